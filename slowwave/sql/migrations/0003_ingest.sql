-- Ingestion of transcripts: which messages already became episodes (so a re-ingest, or a
-- source that grew, adds only what is new), and a UUID v7 generator for set-based inserts.

-- UUID v7: 48-bit Unix milliseconds, then random bits, version 7 and variant bits set.
CREATE FUNCTION slowwave_uuid7() RETURNS uuid
    LANGUAGE sql VOLATILE PARALLEL SAFE
    RETURN encode(
        set_bit(set_bit(overlay(uuid_send(gen_random_uuid())
                                PLACING substring(int8send(floor(extract(epoch FROM clock_timestamp()) * 1000)::bigint) FROM 3)
                                FROM 1 FOR 6),
                        52, 1),
                53, 1),
        'hex')::uuid;

CREATE TABLE ingested_messages (
    conversation_id text NOT NULL,
    message_id      text NOT NULL,
    episode_id      uuid NOT NULL REFERENCES episodic_memory (id),
    PRIMARY KEY (conversation_id, message_id)
);
CREATE INDEX ingested_messages_episode_idx ON ingested_messages (episode_id);
