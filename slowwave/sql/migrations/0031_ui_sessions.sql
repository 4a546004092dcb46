-- The memory browser's sessions (/ui): a signed-in key's, by the SHA-256 of the cookie's random
-- token (the token itself is not kept), with the session's form token against cross-site
-- requests. A revoked key's sessions end with it (read through api_keys); a deleted key's go
-- with its row. key_id null: the operator's, on a server that runs without keys. The table
-- holds the sessions of the last hours only (the expired are deleted at each sign-in): no index
-- beside its key.
CREATE TABLE ui_sessions (
    token_sha256 bytea PRIMARY KEY,
    key_id uuid REFERENCES api_keys (id) ON DELETE CASCADE,
    form_token text NOT NULL,
    created_at timestamptz NOT NULL DEFAULT now(),
    expires_at timestamptz NOT NULL
);
