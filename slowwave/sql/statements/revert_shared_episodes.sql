-- Earlier runs that applied parts of an episode this run applied parts of (a long episode done
-- across runs): what such an episode held before this run is not recorded, so this run alone
-- cannot be reverted exactly.
SELECT DISTINCT o.run_id
FROM consolidation_chunks c
JOIN consolidation_chunks o
  ON o.episode_ids && c.episode_ids AND o.run_id <> c.run_id
 AND o.status = 'applied' AND o.recorded_at < c.recorded_at
JOIN consolidation_runs r ON r.id = o.run_id AND r.status <> 'reverted'
WHERE c.run_id = %(run_id)s AND c.status = 'applied'
