-- reembed_facts_write: the new model's vectors of facts, in their shadow column.
UPDATE semantic_memory f
SET embedding_next = v.embedding
FROM unnest(%(ids)s::uuid[], %(embeddings)s::vector[]) AS v(id, embedding)
WHERE f.id = v.id
