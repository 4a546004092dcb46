-- An episode's transcript words (search_tsv) are parsed when a chunk that holds it is applied,
-- in the transaction that writes the facts citing it (apply_mark_consolidated), no longer when
-- it is written: search reads them only through the facts that cite an episode, and a pending
-- episode has none. Ingesting a lake then parses nothing (a quarter of its time at a million
-- messages). The words already stored stay.
ALTER TABLE episodic_memory ALTER COLUMN search_tsv DROP EXPRESSION;
