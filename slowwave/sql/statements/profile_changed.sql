-- profile: the conversations whose profile needs writing after a run: those whose active facts
-- the run changed (a new fact or version, an ending, a gray-zone merge, an eviction), and
-- those whose profile is stale (a refresh failed, a revert, an undelete). Reinforcements and
-- dedupe merges change no sentence. Through the decision log's run_id index.
SELECT DISTINCT conversation_id
FROM decision_log
WHERE run_id = %(run_id)s
  AND (action IN ('new', 'update', 'invalidate')
       OR (action = 'merge' AND previous_fact_id IS NOT NULL))
UNION
SELECT conversation_id FROM conversation_profiles WHERE stale
ORDER BY 1
