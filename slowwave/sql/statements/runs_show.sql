-- One run (slowwave runs show): its row with what it committed (the view of migration 0027, as
-- runs_list), the process that ran it, and the summary it stored as it ended (what it left
-- undone, by reason; '[]' while it runs). Also read as a run ends, before it stores its counts
-- (tasks.runs.count_committed).
SELECT t.*, r.summary
FROM consolidation_run_totals t JOIN consolidation_runs r ON r.id = t.id
WHERE t.id = %(run_id)s
