-- search: hybrid retrieval over one conversation's facts, fused by reciprocal rank fusion.
-- Scope first (one conversation; active facts, or those valid at %(as_of)s; a category), then
-- up to %(candidates)s candidates from each ranker in a deterministic order (ties by id):
--   full text: BM25 (k1 = 1.2, b = 0.75) over fact + keywords, document frequencies taken in
--              the scope, so a name that appears in every fact of a conversation counts for
--              little; any of the query's words may match (OR), matched in place on the
--              scope's stored tsvectors (the scope is found through semantic_memory_active_idx,
--              or semantic_memory_validity_idx as of a time: tests/test_plans.py);
--   vector:    exact cosine distance over the scoped rows (cosine_distance(), not <=>, so the
--              planner cannot swap in an approximate, post-filtered HNSW scan);
--   temporal:  when the query names a time (%(time_from)s .. %(time_to)s, found by
--              tasks/timeframe.py), the facts valid from within that window, nearest the query
--              vector first; weighted by %(temporal_weight)s in the fusion;
--   episode:   BM25 over the transcripts of the scope's source episodes (document frequencies
--              among them); a fact ranks by its best source episode's score (a fact a later
--              episode reinforced is found through that episode too, as a second row saying
--              the same would be), then by the query vector; weighted by %(episode_weight)s
--              (0 skips the transcripts); the
--              words are episodic_memory.search_tsv, stored when an episode is consolidated
--              (apply_mark_consolidated).
-- Fused score: sum of weight / (%(rrf_k)s + rank). Then, over the source episodes (a fact's
-- is its best for the query, else its first):
--   spread:    rho, the second best episode's summed fused score over the best one's: near 0
--              when one episode answers the query, near 1 when several answer it alike (a
--              question whose evidence spans episodes);
--   session:   the episodes' best facts in the order of their episodes' sums, then their second
--              best, and so on (a round robin over the episodes); weighted by
--              %(session_weight)s * rho in a second fusion;
--   diversity: the n-th best fact (n from 0) of one source episode has its score multiplied by
--              f ^ n, f = %(diversity_dominant)s - (%(diversity_dominant)s - %(diversity)s) *
--              rho ^ 2, so one episode's facts do not crowd the others out of the top k when
--              several answer, and stay together when one does (both 1: the order as fused).
WITH scope AS MATERIALIZED (
    SELECT id, embedding, search_tsv, valid_at, source_episodic_ids AS episodes,
           source_episodic_ids[1] AS first_episode
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
), distances AS MATERIALIZED (
    SELECT id, valid_at, cosine_distance(embedding, %(vector)s::vector) AS d
    FROM scope
    WHERE %(use_vector)s
), semantic AS (
    SELECT id, row_number() OVER (ORDER BY d, id) AS r
    FROM distances
    ORDER BY r
    LIMIT %(candidates)s
), temporal AS (
    SELECT id, row_number() OVER (ORDER BY d, id) AS r
    FROM distances
    WHERE %(temporal_weight)s::float8 > 0
      AND valid_at >= %(time_from)s::timestamptz AND valid_at < %(time_to)s::timestamptz
    ORDER BY r
    LIMIT %(candidates)s
), episode_docs AS MATERIALIZED (
    -- the transcripts' words (stored) of the scope's source episodes
    SELECT e.id AS episode, e.search_tsv AS tsv
    FROM episodic_memory e
    WHERE %(episode_weight)s::float8 > 0
      AND e.id IN (SELECT DISTINCT unnest(episodes) FROM scope)
), episode_postings AS (
    SELECT d.episode, u.lexeme AS term, cardinality(u.positions) AS tf, length(d.tsv) AS dl
    FROM episode_docs d
    CROSS JOIN query q
    CROSS JOIN LATERAL unnest(d.tsv) AS u
    WHERE q.tsq IS NOT NULL AND d.tsv @@ q.tsq AND u.lexeme = ANY(q.lexemes)
), episode_sizes AS (
    SELECT count(*) AS docs, coalesce(avg(length(tsv)), 1) AS avgdl FROM episode_docs
), episode_scores AS (
    SELECT p.episode,
           sum(ln(1 + (z.docs - df.n + 0.5) / (df.n + 0.5))
               * p.tf * 2.2 / (p.tf + 1.2 * (0.25 + 0.75 * p.dl / z.avgdl))) AS bm25
    FROM episode_postings p
    JOIN (SELECT term, count(*) AS n FROM episode_postings GROUP BY term) df USING (term)
    CROSS JOIN episode_sizes z
    WHERE z.docs < 4 OR df.n <= z.docs / 2.0
    GROUP BY p.episode
), best_episode AS (
    SELECT s.id, max(e.bm25) AS bm25, (array_agg(e.episode ORDER BY e.bm25 DESC))[1] AS episode
    FROM scope s
    CROSS JOIN LATERAL unnest(s.episodes) AS u(episode)
    JOIN episode_scores e ON e.episode = u.episode
    GROUP BY s.id
), episodic AS (
    SELECT b.id, row_number() OVER (ORDER BY b.bm25 DESC, d.d, b.id) AS r
    FROM best_episode b
    LEFT JOIN distances d USING (id)
    ORDER BY r
    LIMIT %(candidates)s
), channels AS (
    SELECT id, f.r AS fulltext_rank, v.r AS vector_rank, t.r AS temporal_rank,
           e.r AS episode_rank,
           coalesce(1.0 / (%(rrf_k)s + f.r), 0) + coalesce(1.0 / (%(rrf_k)s + v.r), 0)
           + coalesce(%(temporal_weight)s::float8 / (%(rrf_k)s + t.r), 0)
           + coalesce(%(episode_weight)s::float8 / (%(rrf_k)s + e.r), 0) AS fused
    FROM fulltext f
    FULL JOIN semantic v USING (id)
    FULL JOIN temporal t USING (id)
    FULL JOIN episodic e USING (id)
), homes AS (
    SELECT c.id, c.fused, coalesce(b.episode, s.first_episode) AS episode
    FROM channels c
    JOIN scope s USING (id)
    LEFT JOIN best_episode b USING (id)
), by_episode AS (
    SELECT h.id, h.fused, h.episode,
           row_number() OVER (PARTITION BY h.episode ORDER BY h.fused DESC, h.id) AS n
    FROM homes h
), episode_sums AS (
    SELECT episode, sum(fused) AS total FROM by_episode GROUP BY episode
), spread AS (
    SELECT coalesce(((array_agg(total ORDER BY total DESC))[2] / nullif(max(total), 0))::float8,
                    0) AS rho
    FROM episode_sums
), session AS (
    SELECT b.id, row_number() OVER (ORDER BY b.n, t.total DESC, b.fused DESC, b.id) AS r
    FROM by_episode b
    JOIN episode_sums t USING (episode)
    WHERE %(session_weight)s::float8 > 0
    ORDER BY r
    LIMIT %(candidates)s
), diversified AS (
    SELECT c.id, c.fulltext_rank, c.vector_rank, c.temporal_rank, c.episode_rank,
           w.r AS session_rank,
           (c.fused + coalesce(%(session_weight)s::float8 * p.rho / (%(rrf_k)s + w.r), 0))
           * power(%(diversity_dominant)s::float8
                   - (%(diversity_dominant)s::float8 - %(diversity)s::float8) * p.rho ^ 2,
                   b.n - 1) AS score
    FROM channels c
    JOIN by_episode b USING (id)
    LEFT JOIN session w USING (id)
    CROSS JOIN spread p
)
SELECT m.id, m.category, m.fact, m.keywords, m.source_episodic_ids, m.valid_at, m.invalid_at,
       d.fulltext_rank, d.vector_rank, d.temporal_rank, d.episode_rank, d.session_rank,
       d.score::float8 AS score
FROM diversified d
JOIN semantic_memory m USING (id)
ORDER BY d.score DESC, m.id
LIMIT %(k)s
