-- ingest: valid messages of one source are COPYed here, then segmented set-wise.
CREATE TEMP TABLE slowwave_ingest (
    line            bigint NOT NULL,
    conversation_id text NOT NULL,
    message_id      text NOT NULL,
    at              timestamptz NOT NULL,
    speaker         text NOT NULL,
    text            text NOT NULL,
    session_id      text
) ON COMMIT DROP
