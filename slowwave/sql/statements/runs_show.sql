-- One run (slowwave runs show): its row with what it committed (the view of migration 0027, as
-- runs_list) and the process that ran it. Also read as a run ends, before it stores its counts
-- (tasks.runs.count_committed).
SELECT * FROM consolidation_run_totals WHERE id = %(run_id)s
