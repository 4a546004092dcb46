-- A run's status, locked while an operator's operation works on it.
SELECT status FROM consolidation_runs WHERE id = %(run_id)s FOR UPDATE
