-- When a run started (`slowwave export --since RUN`).
SELECT started_at FROM consolidation_runs WHERE id = %(id)s
