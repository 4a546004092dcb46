-- keys: revoke one, named by its id, the key itself or the start of its prefix (of one
-- tenant, or any);
-- revoking twice keeps the first time
UPDATE api_keys
SET revoked_at = coalesce(revoked_at, now())
WHERE (id::text = %(name)s OR key_sha256 = %(digest)s
       OR left(prefix, length(%(name)s)) = %(name)s)
  AND (%(tenant)s::text IS NULL OR tenant = %(tenant)s)
RETURNING id, tenant, scope, prefix, name, conversation_id, created_at, created_by, revoked_at,
          last_used_at
