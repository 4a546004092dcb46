-- A run that dies is recognised: the process that runs it is recorded, and a later run marks
-- a run whose process is gone (or, on another host, that held no live lease for longer than a
-- lease) as crashed, with the counts its recorded chunks show.
ALTER TABLE consolidation_runs
    ADD COLUMN host text,
    ADD COLUMN pid  integer;
ALTER TABLE consolidation_runs DROP CONSTRAINT consolidation_runs_status_check;
ALTER TABLE consolidation_runs ADD CONSTRAINT consolidation_runs_status_check
    CHECK (status IN ('running', 'completed', 'completed_with_failures', 'failed', 'crashed'));
