-- A fact's versions: the facts it superseded, back to the first, and the facts that
-- superseded it, forward to the latest (supersedes_id both ways), oldest first. A version's
-- action is `update` when it superseded one, else `new`.
WITH RECURSIVE back (id, supersedes_id, step) AS (
    SELECT id, supersedes_id, 0 FROM semantic_memory WHERE id = %(id)s
    UNION ALL
    SELECT s.id, s.supersedes_id, b.step - 1
    FROM semantic_memory s JOIN back b ON s.id = b.supersedes_id
), forward (id, step) AS (
    SELECT id, 0 FROM semantic_memory WHERE id = %(id)s
    UNION ALL
    SELECT s.id, f.step + 1
    FROM semantic_memory s JOIN forward f ON s.supersedes_id = f.id
), chain AS (
    SELECT id, step FROM back UNION SELECT id, step FROM forward
)
SELECT s.id, s.conversation_id, s.category, s.fact, s.keywords, s.source_episodic_ids,
       s.valid_at, s.invalid_at, s.created_at, s.created_by_run_id, s.supersedes_id
FROM chain c JOIN semantic_memory s ON s.id = c.id
ORDER BY c.step, s.valid_at, s.created_at, s.id
