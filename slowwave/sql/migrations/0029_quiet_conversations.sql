-- A conversation is quiet when none of its episodes ended within the last quiet_s seconds
-- (null: every conversation is): the `soon` deployment consolidates only those, leaving a
-- conversation that is still talking to a later run. Read through episodic_memory_latest_idx.
CREATE FUNCTION slowwave_quiet(conversation text, quiet_s integer) RETURNS boolean
LANGUAGE sql STABLE PARALLEL SAFE AS $$
    SELECT quiet_s IS NULL OR NOT EXISTS (
        SELECT 1 FROM episodic_memory
        WHERE conversation_id = conversation AND end_at >= now() - make_interval(secs => quiet_s)
    )
$$;
