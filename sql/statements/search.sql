-- search: hybrid retrieval over one conversation's facts, fused by reciprocal rank fusion.
-- Scope first (one conversation; active facts, or those valid at %(as_of)s; a category), then
-- up to %(candidates)s candidates from each ranker in a deterministic order (ties by id):
--   full text: BM25 (k1 = 1.2, b = 0.75) over fact + keywords, document frequencies taken in
--              the scope, so a name that appears in every fact of a conversation counts for
--              little; any of the query's words may match (OR), matched in place on the
--              scope's stored tsvectors (the scope is found through semantic_memory_active_idx,
--              or semantic_memory_validity_idx as of a time: tests/test_plans.py);
--   vector:    exact cosine distance over the scoped rows (cosine_distance(), not <=>, so the
--              planner cannot swap in an approximate, post-filtered HNSW scan).
WITH scope AS MATERIALIZED (
    SELECT id, embedding, search_tsv
    FROM semantic_memory
    WHERE conversation_id = %(conversation_id)s
      AND (%(category)s::text IS NULL OR category = %(category)s::text)
      AND CASE
              WHEN %(as_of)s::timestamptz IS NULL THEN invalid_at IS NULL
              ELSE valid_at <= %(as_of)s::timestamptz
                   AND (invalid_at IS NULL OR invalid_at > %(as_of)s::timestamptz)
          END
), words AS (
    SELECT tsvector_to_array(to_tsvector('english', %(query)s)) AS lexemes
), query AS (
    SELECT lexemes,
           CASE WHEN cardinality(lexemes) > 0 THEN
               to_tsquery('simple', array_to_string(
                   ARRAY(SELECT quote_literal(l) FROM unnest(lexemes) AS l), ' | '))
           END AS tsq
    FROM words
), postings AS (
    SELECT s.id, u.lexeme AS term, cardinality(u.positions) AS tf, length(s.search_tsv) AS dl
    FROM scope s
    CROSS JOIN query q
    CROSS JOIN LATERAL unnest(s.search_tsv) AS u
    WHERE %(use_fulltext)s AND q.tsq IS NOT NULL AND s.search_tsv @@ q.tsq
      AND u.lexeme = ANY(q.lexemes)
), sizes AS (
    SELECT count(*) AS docs, coalesce(avg(length(search_tsv)), 1) AS avgdl FROM scope
), df AS (
    -- a word found in most of the scope's facts (a person's own name in their memory)
    -- tells nothing apart: it does not make a fact a full-text candidate
    SELECT term, count(*) AS n FROM postings GROUP BY term
), informative AS (
    SELECT df.term, ln(1 + (z.docs - df.n + 0.5) / (df.n + 0.5)) AS idf
    FROM df CROSS JOIN sizes z
    WHERE z.docs < 4 OR df.n <= z.docs / 2.0
), fulltext AS (
    SELECT p.id,
           row_number() OVER (
               ORDER BY sum(
                   i.idf * p.tf * 2.2 / (p.tf + 1.2 * (0.25 + 0.75 * p.dl / z.avgdl))
               ) DESC, p.id) AS r
    FROM postings p
    JOIN informative i USING (term)
    CROSS JOIN sizes z
    GROUP BY p.id
    ORDER BY r
    LIMIT %(candidates)s
), semantic AS (
    SELECT id, row_number() OVER (ORDER BY cosine_distance(embedding, %(vector)s::vector), id) AS r
    FROM scope
    WHERE %(use_vector)s
    ORDER BY r
    LIMIT %(candidates)s
), fused AS (
    SELECT id, f.r AS fulltext_rank, v.r AS vector_rank,
           coalesce(1.0 / (%(rrf_k)s + f.r), 0) + coalesce(1.0 / (%(rrf_k)s + v.r), 0) AS score
    FROM fulltext f
    FULL JOIN semantic v USING (id)
)
SELECT m.id, m.category, m.fact, m.keywords, m.source_episodic_ids, m.valid_at, m.invalid_at,
       fused.fulltext_rank, fused.vector_rank, fused.score::float8 AS score
FROM fused
JOIN semantic_memory m USING (id)
ORDER BY fused.score DESC, m.id
LIMIT %(k)s
