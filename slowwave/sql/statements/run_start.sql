-- A run starts: its row, status running, the process that runs it, and the tenant whose key
-- asked for it (if one did).
INSERT INTO consolidation_runs (id, flow_run_id, kind, started_at, host, pid, requested_by_tenant)
VALUES (%(id)s, %(flow_run_id)s, %(kind)s, %(started_at)s, %(host)s, %(pid)s,
        %(requested_by_tenant)s)
