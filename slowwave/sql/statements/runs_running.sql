-- Runs still marked running, with whether they hold a live lease: the candidates for crashed.
SELECT r.id, r.host, r.pid, r.started_at,
       EXISTS (SELECT 1 FROM episodic_memory e
               WHERE e.claimed_by = r.id AND e.claimed_until >= now()) AS leasing
FROM consolidation_runs r
WHERE r.status = 'running'
