-- The decision log is apply's audit trail, written by the same transaction as the facts,
-- chunks and runs it names: apply writes a fact and the decision about it together, or
-- neither (tests/reliability checks after every crash point that each decision names a fact
-- and a chunk that exist). Its foreign keys re-checked that row by row: four index probes and
-- a key-share lock per decision, 13% of apply's time at 94k facts (benchmarks/apply.py).
ALTER TABLE decision_log
    DROP CONSTRAINT decision_log_fact_id_fkey,
    DROP CONSTRAINT decision_log_previous_fact_id_fkey,
    DROP CONSTRAINT decision_log_chunk_fk,
    DROP CONSTRAINT decision_log_run_id_fkey;
