-- The conversations among `ids` that slowwave knows nothing of now: no fact (valid or once),
-- no pending and no quarantined episode. An ingested conversation has one of these, unless
-- every episode of it was consolidated into no fact at all (then it has nothing to show
-- either). A command asked about one says so instead of showing an empty table.
SELECT c.id
FROM unnest(%(ids)s::text[]) AS c (id)
WHERE NOT EXISTS (SELECT 1 FROM semantic_memory AS f WHERE f.conversation_id = c.id)
  AND NOT EXISTS (
      SELECT 1 FROM episodic_memory AS e
      WHERE e.conversation_id = c.id AND e.consolidated_at IS NULL AND e.quarantined_at IS NULL)
  AND NOT EXISTS (
      SELECT 1 FROM episodic_memory AS e
      WHERE e.conversation_id = c.id AND e.quarantined_at IS NOT NULL)
ORDER BY c.id
