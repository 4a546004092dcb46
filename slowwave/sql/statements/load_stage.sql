-- load: the staging table episodes are COPYed into before one idempotent INSERT.
CREATE TEMP TABLE slowwave_staged_episodes (
    id              uuid NOT NULL,
    conversation_id text NOT NULL,
    external_key    text NOT NULL,
    messages        jsonb NOT NULL,
    summary         text,
    surprise        real,
    start_at        timestamptz NOT NULL,
    end_at          timestamptz NOT NULL
) ON COMMIT DROP
