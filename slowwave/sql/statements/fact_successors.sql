-- forget --fact, before it waits for the runs in flight: the fact's conversation and the facts
-- that already supersede it (what an operator could see when asking). Any other successor
-- found after the wait was written from it by a run in flight, and is forgotten with it.
SELECT f.conversation_id,
       array(SELECT s.id FROM semantic_memory s WHERE s.supersedes_id = f.id) AS known
FROM semantic_memory f
WHERE f.id = %(id)s
