-- reembed_facts_missing: facts whose shadow vector (embedding_next, 0035_reembed) the
-- re-embedding has not written yet, after %(after)s in id order (a walk down the primary key;
-- ids are UUIDv7, so what is written meanwhile comes last), with what a fact's vector encodes.
SELECT id, category, fact, keywords
FROM semantic_memory
WHERE embedding_next IS NULL AND id > %(after)s::uuid
ORDER BY id
LIMIT %(limit)s
