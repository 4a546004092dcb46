-- Surprise computed when a chunk opens (tasks/surprise.py). An episode whose source gave no
-- surprise is stored with none (NULL); the first time a chunk holding it opens, its novelty
-- against the conversation's facts is kept in its own column, so that a source's surprise and
-- a computed one are never confused and a revert can take back what it computed. The stages
-- see coalesce(surprise, novelty). Episodes ingested before this migration keep the neutral
-- 0.5 ingest gave them.
ALTER TABLE episodic_memory ALTER COLUMN surprise DROP NOT NULL;
ALTER TABLE episodic_memory ALTER COLUMN surprise DROP DEFAULT;
ALTER TABLE episodic_memory ADD COLUMN novelty real
    CONSTRAINT episodic_memory_novelty_range CHECK (novelty >= 0 AND novelty <= 1);

-- A conversation whose pending episodes have no surprise yet (none given, none computed) has no
-- highest surprise: that is "no flashbulb", not "unknown", or the count of what a run left
-- pending would lose such conversations.
CREATE OR REPLACE FUNCTION slowwave_due(
    pending bigint,
    max_surprise real,
    claimed_before boolean,
    oldest_created timestamptz,
    threshold integer,
    flashbulb real,
    waited_since timestamptz
) RETURNS boolean
    LANGUAGE sql IMMUTABLE PARALLEL SAFE
    RETURN pending >= threshold
        OR coalesce(max_surprise >= flashbulb, false)
        OR claimed_before
        OR oldest_created <= waited_since;
