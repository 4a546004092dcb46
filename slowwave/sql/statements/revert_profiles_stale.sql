-- Revert, 0: the profiles of the conversations the run decided on no longer say what holds:
-- stale, rewritten after the next run (before the run's decisions are removed).
UPDATE conversation_profiles p
SET stale = true
WHERE p.conversation_id IN (SELECT conversation_id FROM decision_log WHERE run_id = %(run_id)s)
RETURNING p.conversation_id
