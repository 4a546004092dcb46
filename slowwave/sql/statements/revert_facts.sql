-- Revert, 3: the facts the run wrote are removed, unless a fact of another run supersedes one
-- (an operator's undelete can leave such a link); those stay, ended where they began (they
-- never held). Returns (removed, kept).
WITH written AS (
    SELECT id FROM semantic_memory WHERE created_by_run_id = %(run_id)s
), named AS (
    SELECT w.id FROM written w
    WHERE EXISTS (SELECT 1 FROM semantic_memory o
                  WHERE o.supersedes_id = w.id AND o.created_by_run_id IS DISTINCT FROM %(run_id)s)
), ended AS (
    UPDATE semantic_memory s SET invalid_at = s.valid_at
    WHERE s.id IN (SELECT id FROM named)
    RETURNING s.id
), removed AS (
    DELETE FROM semantic_memory s
    WHERE s.id IN (SELECT id FROM written) AND s.id NOT IN (SELECT id FROM named)
    RETURNING s.id
)
SELECT (SELECT count(*) FROM removed), (SELECT count(*) FROM ended)
