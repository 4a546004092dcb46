-- Reverting a run (slowwave runs revert): a run whose facts something else still names keeps
-- its row, marked reverted; otherwise the row goes with everything it wrote. Every operator
-- operation that changes history (revert, forget) leaves a row here: what kind, when, who and
-- why, and how many rows of each table it touched. Never content: a forgotten conversation is
-- named by the SHA-256 of its id, so an audit can check that a given id was forgotten without
-- the database holding it.
ALTER TABLE consolidation_runs DROP CONSTRAINT consolidation_runs_status_check;
ALTER TABLE consolidation_runs ADD CONSTRAINT consolidation_runs_status_check
    CHECK (status IN ('running', 'completed', 'completed_with_failures', 'failed', 'crashed',
                      'reverted'));
CREATE TABLE history_operations (
    id          bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    kind        text NOT NULL CHECK (kind IN ('revert', 'forget_conversation', 'forget_fact')),
    target      text NOT NULL,
    done_at     timestamptz NOT NULL DEFAULT clock_timestamp(),
    done_by     text NOT NULL,
    reason      text NOT NULL,
    rows        jsonb NOT NULL
);
