-- Nothing left behind, and long episodes consolidated in parts.

-- When a run first claimed the episode. An episode a run already claimed once (the tail of a
-- crashed or failed run) is due at the next run, whatever its conversation's count.
ALTER TABLE episodic_memory
    ADD COLUMN first_claimed_at timestamptz,
    -- An episode too long for one prompt is consolidated in parts, by messages: this many of
    -- its messages (from the first) are already consolidated; the rest are still pending.
    ADD COLUMN consolidated_messages integer NOT NULL DEFAULT 0
        CONSTRAINT episodic_memory_consolidated_messages_range
        CHECK (consolidated_messages >= 0 AND consolidated_messages <= jsonb_array_length(messages));

-- The one definition of "due" for a conversation's pending episodes, used by the claim and by
-- the count of what a run left pending (so the two can never disagree).
CREATE FUNCTION slowwave_due(
    pending bigint,              -- pending episodes of the conversation
    max_surprise real,           -- their highest surprise
    claimed_before boolean,      -- some of them were claimed by an earlier run
    oldest_created timestamptz,  -- when the oldest of them was recorded (system time)
    threshold integer,           -- SLOWWAVE_EPISODE_THRESHOLD
    flashbulb real,              -- SLOWWAVE_FLASHBULB_SURPRISE
    waited_since timestamptz     -- now() minus SLOWWAVE_DUE_AFTER_S
) RETURNS boolean
    LANGUAGE sql IMMUTABLE PARALLEL SAFE
    RETURN pending >= threshold
        OR max_surprise >= flashbulb
        OR claimed_before
        OR oldest_created <= waited_since;

-- A chunk whose episodes another run took over (its lease had expired) is recorded as such:
-- it is not a failure of the chunk and charges no attempt.
ALTER TABLE consolidation_chunks DROP CONSTRAINT consolidation_chunks_status_check;
ALTER TABLE consolidation_chunks ADD CONSTRAINT consolidation_chunks_status_check
    CHECK (status IN ('applied', 'failed', 'quarantined', 'conflict'));

-- The outcome of a chunk is read back by its id (a commit whose confirmation was lost, a
-- retried shard): its decisions are counted through this index.
CREATE INDEX decision_log_chunk_idx ON decision_log (chunk_id);
