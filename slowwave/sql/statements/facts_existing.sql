-- which of these facts still exist, and what each says: apply's check that the facts the plans
-- act on are there (a forget or a revert may have removed one while its chunk was in flight;
-- the conversations' hold keeps them from now on), and the change check's known facts.
SELECT id, fact FROM semantic_memory WHERE id = ANY(%(ids)s::uuid[])
