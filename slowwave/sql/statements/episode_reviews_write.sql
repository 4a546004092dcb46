-- A search's reviews, second step (after episode_reviews_lock, in its transaction): each
-- episode's new FSRS card and the time of the review.
UPDATE episodic_memory e
SET review_stability = r.stability,
    review_difficulty = r.difficulty,
    review_state = r.state,
    review_step = r.step,
    reviewed_at = r.at,
    reviews = e.reviews + 1
FROM unnest(%(ids)s::uuid[], %(stability)s::real[], %(difficulty)s::real[],
            %(state)s::smallint[], %(step)s::smallint[], %(at)s::timestamptz[])
    AS r(id, stability, difficulty, state, step, at)
WHERE e.id = r.id
