-- The latest runs, newest first, with what each committed (slowwave runs list, GET /v1/runs):
-- the view of migration 0027, which counts a run still marked running from its recorded chunks.
SELECT * FROM consolidation_run_totals ORDER BY started_at DESC LIMIT %(limit)s
