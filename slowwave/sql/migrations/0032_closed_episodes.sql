-- An episode closed by a consolidation asked for explicitly (POST /v1/conversations/ID/consolidate,
-- the MCP tool, `slowwave consolidate -c`): its conversation's latest episode, still open by the
-- wall clock (its last message younger than the segmentation gap), is closed at the moment of the
-- request, so that the run takes it; a message recorded afterwards starts the next episode
-- (ingest_tails passes it by). The close is committed before the run claims: a run that dies
-- after it leaves the episode closed and due (claim.sql), and the next run of any kind
-- consolidates it, once.
ALTER TABLE episodic_memory ADD COLUMN closed_at timestamptz;

-- Whether a pending episode may be claimed: closed (by a request, or by an earlier run's claim),
-- or quiet for open_s seconds. One rule for claim, due_count and claim_left_pending; a plain SQL
-- expression, inlined by the planner.
CREATE FUNCTION slowwave_episode_closed(
    end_at timestamptz, first_claimed_at timestamptz, closed_at timestamptz, open_s integer
) RETURNS boolean
LANGUAGE sql STABLE PARALLEL SAFE AS $$
    SELECT closed_at IS NOT NULL OR first_claimed_at IS NOT NULL
           OR end_at < now() - make_interval(secs => open_s)
$$;
