-- load: the conversations of the staged episodes (held against a forget, then checked
-- against the tombstones, before anything is written).
SELECT DISTINCT conversation_id FROM slowwave_staged_episodes
