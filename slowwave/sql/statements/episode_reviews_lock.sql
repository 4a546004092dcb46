-- A search's reviews of the episodes it returned, first step: their FSRS cards, locked (an
-- episode a run holds, or another search reviews now, is skipped: a review is a best effort,
-- and never waits on a consolidation). Then episode_reviews_write stores the cards the `fsrs`
-- scheduler computed.
SELECT id, end_at, review_stability, review_difficulty, review_state, review_step, reviewed_at,
       reviews
FROM episodic_memory
WHERE id = ANY(%(ids)s::uuid[])
ORDER BY id
FOR NO KEY UPDATE SKIP LOCKED
