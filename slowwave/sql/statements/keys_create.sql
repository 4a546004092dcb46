-- keys: a new key, kept as its SHA-256 (models.keys)
INSERT INTO api_keys (id, tenant, scope, prefix, key_sha256, name, conversation_id, created_by)
VALUES (%(id)s, %(tenant)s, %(scope)s, %(prefix)s, %(digest)s, %(name)s, %(conversation_id)s,
        %(by)s)
RETURNING id, tenant, scope, prefix, name, conversation_id, created_at, created_by, revoked_at,
          last_used_at
