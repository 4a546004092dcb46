-- surprise: keep the novelty computed when a chunk opened, for episodes whose source gave no
-- surprise and that have none computed yet (a retried chunk sees the first value).
UPDATE episodic_memory e SET novelty = v.novelty
FROM unnest(%(ids)s::uuid[], %(novelties)s::real[]) AS v(id, novelty)
WHERE e.id = v.id AND e.surprise IS NULL AND e.novelty IS NULL
