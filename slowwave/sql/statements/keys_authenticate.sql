-- keys: the live key with this SHA-256, if any (marked used at most once a minute, so that a
-- busy key does not turn every request into a write)
WITH found AS (
    SELECT id, tenant, scope, prefix, name, conversation_id, created_at, created_by,
           revoked_at, last_used_at
    FROM api_keys WHERE key_sha256 = %(digest)s AND revoked_at IS NULL
), used AS (
    UPDATE api_keys k SET last_used_at = now()
    FROM found f
    WHERE k.id = f.id AND (k.last_used_at IS NULL OR k.last_used_at < now() - interval '1 minute')
)
SELECT * FROM found
