-- slowwave serve: tenants, keys, and episodes that grow while a conversation goes on.

-- Tenants (slowwave.models.tenant): a conversation's stored key is its id in the default
-- tenant and tenant || U+001F || id in any other. Data recorded before tenants existed is the
-- default tenant's, unchanged; no id so far may hold the separator, or it would be read as
-- another tenant's.
DO $$
BEGIN
    IF EXISTS (SELECT 1 FROM episodic_memory WHERE strpos(conversation_id, chr(31)) > 0)
       OR EXISTS (SELECT 1 FROM semantic_memory WHERE strpos(conversation_id, chr(31)) > 0) THEN
        RAISE EXCEPTION 'a conversation id holds the control character U+001F, which now '
            'separates a tenant from its conversation id: rename it before upgrading';
    END IF;
END $$;

CREATE FUNCTION slowwave_tenant(conversation_key text) RETURNS text
    LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE
    RETURN CASE WHEN strpos(conversation_key, chr(31)) = 0 THEN 'default'
                ELSE split_part(conversation_key, chr(31), 1) END;

CREATE FUNCTION slowwave_conversation(conversation_key text) RETURNS text
    LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE
    RETURN substr(conversation_key, strpos(conversation_key, chr(31)) + 1);

-- API keys: only the SHA-256 of a key is kept (a key is 32 random bytes: no slow hash needed
-- against guessing); its prefix names it in listings.
CREATE TABLE api_keys (
    id          uuid PRIMARY KEY,
    tenant      text NOT NULL CHECK (tenant ~ '^[a-z0-9][a-z0-9_-]*$' AND length(tenant) <= 63),
    scope       text NOT NULL CHECK (scope IN ('read', 'write', 'admin')),
    prefix      text NOT NULL,
    key_sha256  bytea NOT NULL UNIQUE CHECK (length(key_sha256) = 32),
    name        text NOT NULL DEFAULT '',
    created_at  timestamptz NOT NULL DEFAULT now(),
    created_by  text NOT NULL,
    revoked_at  timestamptz,
    last_used_at timestamptz
);

-- Recording a conversation a few messages at a time: the conversation's latest episode is
-- found per request (it grows while it is pending and unclaimed).
CREATE INDEX episodic_memory_latest_idx ON episodic_memory (conversation_id, end_at DESC);

