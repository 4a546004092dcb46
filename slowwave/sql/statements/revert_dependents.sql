-- The runs that built on a run, transitively: a run built on another when it applied a chunk
-- in one of the other's conversations after the other applied one there (its decisions saw
-- those facts), whatever order the two started in. Newest first by their last applied chunk:
-- the order a cascade reverts them in. Rare (an operator's revert): chunks are scanned.
WITH RECURSIVE built (id) AS (
    SELECT %(run_id)s::uuid
    UNION
    SELECT lc.run_id
    FROM built b
    JOIN consolidation_chunks rc ON rc.run_id = b.id AND rc.status = 'applied'
    JOIN consolidation_chunks lc
      ON lc.conversation_id = rc.conversation_id AND lc.status = 'applied'
     AND lc.run_id <> b.id AND lc.recorded_at > rc.recorded_at
)
SELECT r.id, r.status
FROM built JOIN consolidation_runs r ON r.id = built.id
WHERE r.id <> %(run_id)s AND r.status <> 'reverted'
ORDER BY (SELECT max(c.recorded_at) FROM consolidation_chunks c WHERE c.run_id = r.id) DESC,
         r.id
