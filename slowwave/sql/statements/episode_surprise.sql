-- surprise: keep the novelty computed when a chunk opened, for episodes whose source gave no
-- surprise and that have none computed yet, and return the surprise each episode keeps: a
-- retried chunk, or a later part of a long episode, uses the first value, not its own.
WITH given AS (
    SELECT v.id, v.novelty
    FROM unnest(%(ids)s::uuid[], %(novelties)s::real[]) AS v(id, novelty)
), scored AS (
    UPDATE episodic_memory e SET novelty = g.novelty
    FROM given g
    WHERE e.id = g.id AND e.surprise IS NULL AND e.novelty IS NULL
    RETURNING e.id, e.novelty
)
SELECT g.id, coalesce(s.novelty, e.surprise, e.novelty, g.novelty) AS surprise
FROM given g
LEFT JOIN scored s ON s.id = g.id
LEFT JOIN episodic_memory e ON e.id = g.id
