-- ui: the live session with this token's SHA-256, and its key (live too; none: the operator's)
SELECT s.form_token, s.key_id, k.id, k.tenant, k.scope, k.prefix, k.name, k.conversation_id,
       k.created_at, k.created_by, k.revoked_at, k.last_used_at
FROM ui_sessions s
LEFT JOIN api_keys k ON k.id = s.key_id
WHERE s.token_sha256 = %(digest)s AND s.expires_at > now()
  AND (s.key_id IS NULL OR k.revoked_at IS NULL)
