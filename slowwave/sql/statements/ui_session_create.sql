-- ui: a new browser session (the expired ones go first)
WITH expired AS (
    DELETE FROM ui_sessions WHERE expires_at < now()
)
INSERT INTO ui_sessions (token_sha256, key_id, form_token, expires_at)
VALUES (%(digest)s, %(key_id)s, %(form_token)s, now() + make_interval(secs => %(ttl_s)s))
