-- A run's decision similarities as a cumulative histogram per action: for each upper bound in
-- %(bounds)s, how many of its decisions that carry a similarity (a dedupe merge, a new fact's
-- nearest neighbour, a gray-zone merge: a merge with a previous fact, labelled
-- `gray_zone_merge`) were at or below it; with their sum and count. Read through the run_id
-- index once, when the run ends: metrics add up runs, never scan the log.
SELECT action,
       array_agg(n ORDER BY le) AS buckets,
       max(total)::float8 AS total,
       max(cnt) AS count
FROM (
    SELECT CASE WHEN d.action = 'merge' AND d.previous_fact_id IS NOT NULL
                THEN 'gray_zone_merge' ELSE d.action END AS action,
           b.le,
           count(*) FILTER (WHERE d.similarity <= b.le) AS n,
           sum(d.similarity) AS total,
           count(*) AS cnt
    FROM decision_log d CROSS JOIN unnest(%(bounds)s::real[]) AS b(le)
    WHERE d.run_id = %(run_id)s AND d.similarity IS NOT NULL
    GROUP BY 1, b.le
) h
GROUP BY action
