-- History you can read and undo (slowwave facts history / undelete, runs revert, forget).
-- Walking lineage forward reads facts by the fact they superseded: its index comes back with
-- the statements that use it (0006 dropped it while none did); only updates carry one.
CREATE INDEX semantic_memory_supersedes_idx ON semantic_memory (supersedes_id)
    WHERE supersedes_id IS NOT NULL;
-- Undelete and revert are decisions of their own in the log, taken by an operator.
ALTER TABLE decision_log DROP CONSTRAINT decision_log_action_check;
ALTER TABLE decision_log ADD CONSTRAINT decision_log_action_check CHECK (action IN (
    'new', 'reinforce', 'update', 'invalidate', 'merge', 'rejected', 'released', 'undeleted'));
