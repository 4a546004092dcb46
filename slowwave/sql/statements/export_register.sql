-- An export target, recorded so that a forget reaches it; the kinds it holds accumulate.
INSERT INTO export_targets AS t (target, what)
VALUES (%(target)s, %(what)s::text[])
ON CONFLICT (target) DO UPDATE
SET what = ARRAY(SELECT DISTINCT unnest(t.what || excluded.what) ORDER BY 1),
    last_exported_at = now()
