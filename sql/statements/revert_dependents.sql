-- The runs that built on a run: started after it and applied chunks in a conversation it
-- applied chunks in (their decisions saw its facts). Newest first: the order a cascade
-- reverts them in. Rare (an operator's revert): the chunks are scanned, not indexed by run.
SELECT later.id
FROM consolidation_runs r
JOIN consolidation_runs later
  ON later.started_at > r.started_at AND later.status <> 'reverted'
WHERE r.id = %(run_id)s
  AND EXISTS (
      SELECT 1
      FROM consolidation_chunks lc
      JOIN consolidation_chunks rc ON rc.conversation_id = lc.conversation_id
      WHERE lc.run_id = later.id AND lc.status = 'applied'
        AND rc.run_id = r.id AND rc.status = 'applied')
ORDER BY later.started_at DESC
