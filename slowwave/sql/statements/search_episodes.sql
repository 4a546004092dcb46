-- search_episodes: the episodes of one conversation that best answer a query (the episodic
-- memories a search returns beside its facts). Every episode that is not quarantined, pending
-- or consolidated, that began by %(as_of)s (event time; null: all), found through
-- episodic_memory_latest_idx. Two channels, fused by reciprocal rank fusion (%(rrf_k)s):
--   full text: BM25 (k1 = 1.2, b = 0.75) over the episode's people's words (an agent's
--              messages left out where a person speaks: slowwave_person_texts), any of the
--              query's words matching (OR), document frequencies among the conversation's
--              episodes; a
--              consolidated episode's words are stored (search_tsv, apply_mark_consolidated),
--              a pending one's parsed here, so a message is found the moment it is recorded;
--   vector:    the cosine distance of the episode's nearest window of messages (returned as
--              best_from / best_to: the excerpt is centred on it, with the best full-text
--              message)
--              (episode_windows, embedded before the search by tasks.memories, or soon after
--              by a server's thread), weighted by %(vector_weight)s (0: off): what the query
--              means without its words. An episode whose messages are not all embedded yet
--              counts in it as high as its full-text rank (it cannot be judged there yet, and
--              is not pushed down for that while the server embeds it);
--   temporal:  when the query names a time (%(time_from)s .. %(time_to)s: tasks.timeframe,
--              "two weeks ago", "in April 2023"), the episodes begun within it, in the order
--              of both others fused among them (by reciprocal rank: an episode that says the
--              query's words and one nearest in meaning both rise), weighted by
--              %(temporal_weight)s (0: off).
-- Up to %(candidates)s from each channel; the best %(candidates)s fused, each with its FSRS
-- card, weighed by the caller, and the episodes that replaced what it taught: those holding a
-- later version (supersedes_id) of one of its facts, begun by %(as_of)s or now (a question
-- about now puts them before it: tasks.memories).
WITH scope AS MATERIALIZED (
    SELECT e.id, e.start_at, jsonb_array_length(e.messages) AS messages,
           coalesce(e.search_tsv,
                    to_tsvector('english'::regconfig, slowwave_person_texts(e.messages))) AS tsv
    FROM episodic_memory e
    WHERE e.conversation_id = %(conversation_id)s AND e.quarantined_at IS NULL
      AND (%(as_of)s::timestamptz IS NULL OR e.start_at <= %(as_of)s::timestamptz)
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
    SELECT s.id, u.lexeme AS term, cardinality(u.positions) AS tf, length(s.tsv) AS dl
    FROM scope s
    CROSS JOIN query q
    CROSS JOIN LATERAL unnest(s.tsv) AS u
    WHERE q.tsq IS NOT NULL AND s.tsv @@ q.tsq AND u.lexeme = ANY(q.lexemes)
), sizes AS (
    SELECT count(*) AS docs, coalesce(avg(length(tsv)), 1) AS avgdl FROM scope
), scores AS (
    SELECT p.id,
           sum(ln(1 + (z.docs - df.n + 0.5) / (df.n + 0.5))
               * p.tf * 2.2 / (p.tf + 1.2 * (0.25 + 0.75 * p.dl / z.avgdl)))::float8 AS bm25
    FROM postings p
    JOIN (SELECT term, count(*) AS n FROM postings GROUP BY term) AS df USING (term)
    CROSS JOIN sizes z
    GROUP BY p.id
), fulltext AS (
    SELECT id, row_number() OVER (ORDER BY bm25 DESC, id) AS r
    FROM scores
    ORDER BY r
    LIMIT %(candidates)s
), nearest AS (
    SELECT DISTINCT ON (id) id, d, covered, best_from, best_to
    FROM (
        SELECT w.episode_id AS id, cosine_distance(w.embedding, %(vector)s::vector) AS d,
               max(w.messages_to) OVER (PARTITION BY w.episode_id) AS covered,
               w.messages_from AS best_from, w.messages_to AS best_to
        FROM episode_windows w
        JOIN scope s ON s.id = w.episode_id
        WHERE %(vector_weight)s::float8 > 0 AND w.conversation_id = %(conversation_id)s
    ) AS w
    ORDER BY id, d, best_from
), semantic AS (
    SELECT id, row_number() OVER (ORDER BY d, id) AS r
    FROM nearest
    ORDER BY r
    LIMIT %(candidates)s
), temporal AS (
    SELECT id, row_number() OVER (
               ORDER BY coalesce(1.0 / (%(rrf_k)s + vr), 0) + coalesce(1.0 / (%(rrf_k)s + br), 0)
                        DESC, id) AS r
    FROM (
        SELECT s.id,
               CASE WHEN n.id IS NOT NULL
                    THEN row_number() OVER (ORDER BY n.d NULLS LAST, s.id) END AS vr,
               CASE WHEN b.id IS NOT NULL
                    THEN row_number() OVER (ORDER BY b.bm25 DESC NULLS LAST, s.id) END AS br
        FROM scope s
        LEFT JOIN nearest n USING (id)
        LEFT JOIN scores b USING (id)
        WHERE %(temporal_weight)s::float8 > 0
          AND s.start_at >= %(time_from)s::timestamptz AND s.start_at < %(time_to)s::timestamptz
          AND (n.id IS NOT NULL OR b.id IS NOT NULL)
    ) AS within
    ORDER BY r
    LIMIT %(candidates)s
), fused AS (
    SELECT id, f.r AS fulltext_rank, v.r AS vector_rank, t.r AS temporal_rank,
           n.best_from, n.best_to,
           coalesce(1.0 / (%(rrf_k)s + f.r), 0)
           + %(vector_weight)s::float8 * greatest(
               coalesce(1.0 / (%(rrf_k)s + v.r), 0),
               CASE WHEN coalesce(n.covered, 0) < s.messages
                    THEN coalesce(1.0 / (%(rrf_k)s + f.r), 0) ELSE 0 END)
           + coalesce(%(temporal_weight)s::float8 / (%(rrf_k)s + t.r), 0) AS fused
    FROM fulltext f
    FULL JOIN semantic v USING (id)
    FULL JOIN temporal t USING (id)
    JOIN scope s USING (id)
    LEFT JOIN nearest n USING (id)
    ORDER BY fused DESC, id
    LIMIT %(candidates)s
), replaced AS (
    SELECT u.id, array_agg(DISTINCT v.id) AS replaced_by
    FROM semantic_memory s
    CROSS JOIN LATERAL unnest(s.source_episodic_ids) AS u(id)
    JOIN semantic_memory later
      ON later.supersedes_id = s.id
     AND (%(as_of)s::timestamptz IS NULL OR later.valid_at <= %(as_of)s::timestamptz)
    CROSS JOIN LATERAL unnest(later.source_episodic_ids) AS v(id)
    WHERE s.conversation_id = %(conversation_id)s
      AND (%(as_of)s::timestamptz IS NULL OR s.valid_at <= %(as_of)s::timestamptz)
      AND u.id IN (SELECT id FROM fused) AND v.id <> u.id
    GROUP BY u.id
)
SELECT e.id, e.conversation_id, e.start_at, e.end_at, e.consolidated_at IS NULL AS pending,
       e.messages, f.fused::float8 AS fused, f.fulltext_rank, f.vector_rank, f.temporal_rank,
       f.best_from, f.best_to, coalesce(r.replaced_by, '{}') AS replaced_by,
       e.review_stability, e.review_difficulty, e.review_state, e.review_step, e.reviewed_at,
       e.reviews
FROM fused f
JOIN episodic_memory e USING (id)
LEFT JOIN replaced r USING (id)
ORDER BY f.fused DESC, e.id
