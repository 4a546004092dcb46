-- Quarantined episodes can be listed and released by an operator. A release is recorded in the
-- decision log (who asked and why, in `reason`), which so far held only a chunk's decisions:
-- its chunk may be absent, and `released` is an action of its own.
ALTER TABLE decision_log ALTER COLUMN chunk_id DROP NOT NULL;
ALTER TABLE decision_log DROP CONSTRAINT decision_log_action_check;
ALTER TABLE decision_log ADD CONSTRAINT decision_log_action_check CHECK (action IN (
    'new', 'reinforce', 'update', 'invalidate', 'merge', 'rejected', 'released'));
-- `slowwave quarantine list` reads the quarantined episodes, a few among many.
CREATE INDEX episodic_memory_quarantined_idx ON episodic_memory (conversation_id, quarantined_at)
    WHERE quarantined_at IS NOT NULL;
