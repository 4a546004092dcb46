-- ingest: valid messages of one source are COPYed here, then segmented set-wise.
CREATE TEMP TABLE slowwave_ingest (
    line            bigint NOT NULL,
    conversation_id text NOT NULL,
    message_id      text NOT NULL,
    at              timestamptz NOT NULL,
    speaker         text NOT NULL,
    text            text NOT NULL,
    session_id      text,
    surprise        real
) ON COMMIT DROP;
-- the episode each staged conversation may go on in (ingest_tails)
CREATE TEMP TABLE slowwave_ingest_tails (
    episode_id      uuid PRIMARY KEY,
    conversation_id text NOT NULL UNIQUE,
    end_at          timestamptz NOT NULL,
    session_id      text,
    messages        integer NOT NULL
) ON COMMIT DROP
