-- Close the open episodes of %(conversations)s (a consolidation asked for explicitly, migration
-- 0032): pending, never claimed, their last message younger than %(open_s)s seconds. Taken
-- under the row locks an ingest holds on a conversation's tail (ingest_tails): an ingest that
-- is growing the episode commits first and the episode is closed grown, never half; one that
-- comes after finds it closed and starts the next episode.
UPDATE episodic_memory
SET closed_at = now()
WHERE conversation_id = ANY(%(conversations)s::text[])
  AND consolidated_at IS NULL AND quarantined_at IS NULL
  AND NOT slowwave_episode_closed(end_at, first_claimed_at, closed_at, %(open_s)s::integer)
RETURNING id
