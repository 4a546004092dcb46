-- keys: every key (of one tenant, or all), newest first; never the key, which is not kept
SELECT id, tenant, scope, prefix, name, conversation_id, created_at, created_by, revoked_at,
       last_used_at
FROM api_keys
WHERE %(tenant)s::text IS NULL OR tenant = %(tenant)s
ORDER BY created_at DESC, id
