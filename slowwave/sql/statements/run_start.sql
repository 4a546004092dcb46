-- A run starts: its row, status running, and the process that runs it.
INSERT INTO consolidation_runs (id, flow_run_id, kind, started_at, host, pid)
VALUES (%(id)s, %(flow_run_id)s, %(kind)s, %(started_at)s, %(host)s, %(pid)s)
