-- Revert, 2: the evidence the run appended to other runs' facts (reinforce, merge) is removed:
-- the episodes of its applied chunks were its own (claimed), so none of them was there before.
WITH evidence AS (
    SELECT array_agg(DISTINCT e) AS ids
    FROM consolidation_chunks c, unnest(c.episode_ids) AS e
    WHERE c.run_id = %(run_id)s AND c.status = 'applied'
      -- a long episode another run applied parts of is that run's evidence too
      AND NOT EXISTS (SELECT 1 FROM consolidation_chunks o
                      WHERE o.run_id <> %(run_id)s AND o.status = 'applied'
                        AND e = ANY(o.episode_ids))
)
UPDATE semantic_memory s
SET source_episodic_ids = ARRAY(
        SELECT x FROM unnest(s.source_episodic_ids) WITH ORDINALITY AS u(x, n)
        WHERE NOT (x = ANY(v.ids)) ORDER BY n)
FROM evidence v
WHERE s.source_episodic_ids && v.ids
  AND s.created_by_run_id IS DISTINCT FROM %(run_id)s
RETURNING s.id
