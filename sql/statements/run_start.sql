-- A run starts: its row, status running.
INSERT INTO consolidation_runs (id, flow_run_id, kind, started_at)
VALUES (%(id)s, %(flow_run_id)s, %(kind)s, %(started_at)s)
