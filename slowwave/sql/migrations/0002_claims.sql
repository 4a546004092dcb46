-- Claims: a run leases the pending episodes of the conversations it takes, so that
-- concurrent runs never take the same work and a crashed run's lease simply expires.
ALTER TABLE episodic_memory
    ADD COLUMN claimed_by    uuid,
    ADD COLUMN claimed_until timestamptz;

CREATE INDEX episodic_memory_claimed_idx ON episodic_memory (claimed_by)
    WHERE claimed_by IS NOT NULL;

-- One row per chunk a run worked on: the unit of one model call and one apply transaction.
CREATE TABLE consolidation_chunks (
    id                  uuid PRIMARY KEY,
    run_id              uuid REFERENCES consolidation_runs (id),
    conversation_id     text NOT NULL,
    episode_ids         uuid[] NOT NULL,
    status              text NOT NULL CHECK (status IN ('applied', 'failed', 'quarantined')),
    model               text,
    prompt_tokens       integer NOT NULL DEFAULT 0,
    completion_tokens   integer NOT NULL DEFAULT 0,
    error               text,
    recorded_at         timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX consolidation_chunks_run_idx ON consolidation_chunks (run_id);
CREATE INDEX consolidation_chunks_conversation_idx ON consolidation_chunks (conversation_id);

ALTER TABLE decision_log
    ADD CONSTRAINT decision_log_chunk_fk FOREIGN KEY (chunk_id) REFERENCES consolidation_chunks (id);
