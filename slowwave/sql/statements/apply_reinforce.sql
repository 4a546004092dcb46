-- apply: reinforce = set union of episode ids, in one statement for all (fact, episode) pairs,
-- each fact only in its plan's conversation. Episodes already recorded are not added again,
-- so a replayed reinforce changes nothing.
WITH additions AS (
    SELECT p.fact_id, array_agg(DISTINCT p.episode_id ORDER BY p.episode_id) AS ids
    FROM unnest(%(fact_ids)s::uuid[], %(episode_ids)s::uuid[], %(conversations)s::text[])
      AS p(fact_id, episode_id, conversation_id)
    JOIN semantic_memory s ON s.id = p.fact_id AND s.conversation_id = p.conversation_id
    WHERE NOT (p.episode_id = ANY(s.source_episodic_ids))
    GROUP BY p.fact_id
)
UPDATE semantic_memory s
SET source_episodic_ids = s.source_episodic_ids || a.ids
FROM additions a
WHERE s.id = a.fact_id
  AND s.invalid_at IS NULL
