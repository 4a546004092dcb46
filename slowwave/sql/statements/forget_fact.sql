-- Forget one fact: its row goes; the decisions about it lose its id and its text but keep what
-- else they record (an update's predecessor: a revert of that run still finds the fact it
-- ended); a fact that superseded it now supersedes its predecessor (the chain closes over the
-- gap), and decisions that named it as the fact they replaced no longer do. Successors written
-- from it by a run in flight (not among %(known)s, the ones there when the forget was asked)
-- go with it, and their successors. The conversation's profile may quote it: its text goes too
-- (stale, rewritten after the next run). Returns the rows touched per table, for the tombstone.
WITH RECURSIVE derived (id) AS (
    SELECT id FROM semantic_memory WHERE id = %(id)s
    UNION
    SELECT s.id FROM semantic_memory s JOIN derived d ON s.supersedes_id = d.id
    WHERE NOT s.id = ANY(%(known)s::uuid[])
), target AS (
    SELECT s.id, s.conversation_id, s.supersedes_id
    FROM semantic_memory s WHERE s.id IN (SELECT id FROM derived)
    FOR UPDATE
), spliced AS (
    UPDATE semantic_memory s
    SET supersedes_id = (SELECT t.supersedes_id FROM target t WHERE t.id = %(id)s)
    WHERE s.supersedes_id IN (SELECT id FROM target) AND s.id NOT IN (SELECT id FROM target)
    RETURNING 1
), named AS (
    -- one UPDATE per decision: two statements of one query never change the same row
    SELECT d.id,
           d.fact_id IN (SELECT id FROM target) AS about,
           d.previous_fact_id IN (SELECT id FROM target) AS replaced
    FROM decision_log d
    WHERE d.fact_id IN (SELECT id FROM target) OR d.previous_fact_id IN (SELECT id FROM target)
), decisions AS (
    UPDATE decision_log d
    SET fact_id = CASE WHEN n.about THEN NULL ELSE d.fact_id END,
        proposed_fact = CASE WHEN n.about THEN NULL ELSE d.proposed_fact END,
        reason = CASE WHEN n.about THEN NULL ELSE d.reason END,
        previous_fact_id = CASE WHEN n.replaced THEN NULL ELSE d.previous_fact_id END
    FROM named n
    WHERE d.id = n.id
    RETURNING 1
), profile AS (
    UPDATE conversation_profiles p SET profile = NULL, tokens = 0, stale = true
    WHERE p.conversation_id IN (SELECT conversation_id FROM target)
    RETURNING 1
), fact AS (
    DELETE FROM semantic_memory s USING target t WHERE s.id = t.id RETURNING 1
)
SELECT (SELECT count(*) FROM fact) AS facts,
       (SELECT count(*) FROM target) - 1 AS successors_forgotten,
       (SELECT count(*) FROM named WHERE about) AS decisions_scrubbed,
       (SELECT count(*) FROM spliced) AS successors_relinked,
       (SELECT count(*) FROM named WHERE replaced) AS decisions_unlinked,
       (SELECT count(*) FROM profile) AS profiles_cleared
