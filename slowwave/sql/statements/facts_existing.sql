-- apply: which of the facts the plans act on still exist (a forget or a revert may have
-- removed one while its chunk was in flight; the conversations' hold keeps them from now on).
SELECT id FROM semantic_memory WHERE id = ANY(%(ids)s::uuid[])
