-- Decision metrics over every finished run, from the runs' stored summaries (one row per run):
-- per kind and status, how many runs and their wall seconds; every numeric counter of the
-- summaries summed; the stage seconds summed; the similarity histograms added up.
WITH finished AS (
    SELECT kind, status, summary, extract(epoch FROM finished_at - started_at) AS seconds
    FROM consolidation_runs
    WHERE finished_at IS NOT NULL AND summary IS NOT NULL
)
SELECT 'runs' AS part, kind || '|' || status AS key, count(*)::float8 AS value
FROM finished GROUP BY kind, status
UNION ALL
SELECT 'run_seconds', kind || '|' || status, sum(seconds)::float8
FROM finished GROUP BY kind, status
UNION ALL
SELECT 'counter', c.key, sum(c.value::text::float8)
FROM finished f, jsonb_each(f.summary) AS c(key, value)
WHERE jsonb_typeof(c.value) = 'number'
GROUP BY c.key
UNION ALL
SELECT 'stage_seconds', s.key, sum(s.value::text::float8)
FROM finished f, jsonb_each(f.summary -> 'stage_seconds') AS s(key, value)
GROUP BY s.key
UNION ALL
SELECT 'similarity', h.key || '|' || b.ord, sum(b.n::float8)
FROM finished f, jsonb_each(f.summary -> 'similarity') AS h(key, value),
     jsonb_array_elements_text(h.value -> 'buckets') WITH ORDINALITY AS b(n, ord)
GROUP BY h.key, b.ord
UNION ALL
SELECT 'similarity_sum', h.key, sum((h.value ->> 'total')::float8)
FROM finished f, jsonb_each(f.summary -> 'similarity') AS h(key, value)
GROUP BY h.key
UNION ALL
SELECT 'similarity_count', h.key, sum((h.value ->> 'count')::float8)
FROM finished f, jsonb_each(f.summary -> 'similarity') AS h(key, value)
GROUP BY h.key
