-- A run the operator interrupted (Ctrl-C, SIGTERM): what it applied stays, its claims were
-- given back, and it says so.
ALTER TABLE consolidation_runs DROP CONSTRAINT consolidation_runs_status_check;
ALTER TABLE consolidation_runs ADD CONSTRAINT consolidation_runs_status_check
    CHECK (status IN ('running', 'completed', 'completed_with_failures', 'failed', 'crashed',
                      'reverted', 'interrupted'));

-- Short ids (slowwave.models.ids.short_id): the start of an id's last group, its random part
-- (a UUID v7's first groups are its time, shared by every row made in the same minute).
-- Facts and episodes are looked up by them; runs, a row a night, are read whole.
CREATE FUNCTION slowwave_short_key(id uuid) RETURNS text
    LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE
    RETURN right(id::text, 12);
CREATE INDEX semantic_memory_short_id ON semantic_memory (slowwave_short_key(id));
CREATE INDEX episodic_memory_short_id ON episodic_memory (slowwave_short_key(id));
