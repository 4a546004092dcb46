-- Forget one fact: its row goes; the decisions about it lose its id and its text but keep what
-- else they record (an update's predecessor: a revert of that run still finds the fact it
-- ended); a fact that superseded it now supersedes its predecessor (the chain closes over the
-- gap), and decisions that named it as the fact they replaced no longer do. The conversation's
-- profile may quote it: its text goes too (stale, rewritten after the next run). Returns the rows
-- touched per table, for the tombstone.
WITH target AS (
    SELECT id, conversation_id, supersedes_id FROM semantic_memory WHERE id = %(id)s FOR UPDATE
), spliced AS (
    UPDATE semantic_memory s SET supersedes_id = t.supersedes_id
    FROM target t WHERE s.supersedes_id = t.id
    RETURNING 1
), unnamed AS (
    UPDATE decision_log SET previous_fact_id = NULL WHERE previous_fact_id = %(id)s
    RETURNING 1
), decisions AS (
    UPDATE decision_log SET fact_id = NULL, proposed_fact = NULL, reason = NULL
    WHERE fact_id = %(id)s
    RETURNING 1
), profile AS (
    UPDATE conversation_profiles p SET profile = NULL, tokens = 0, stale = true
    FROM target t WHERE p.conversation_id = t.conversation_id
    RETURNING 1
), fact AS (
    DELETE FROM semantic_memory s USING target t WHERE s.id = t.id RETURNING 1
)
SELECT (SELECT count(*) FROM fact) AS facts,
       (SELECT count(*) FROM decisions) AS decisions_scrubbed,
       (SELECT count(*) FROM spliced) AS successors_relinked,
       (SELECT count(*) FROM unnamed) AS decisions_unlinked,
       (SELECT count(*) FROM profile) AS profiles_cleared
