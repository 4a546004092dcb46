-- A claim's last step, in its transaction on a fresh snapshot: a conversation it took only in
-- part is given back. That happens when another claimer (another run, or another shard of
-- this run) committed its claim on the conversation after this claim's snapshot was taken and
-- before this claim locked it, and an episode ingested meanwhile was all this claim could
-- take: the conversation would be worked on by two claimers at once, out of order. The other
-- claimer keeps it whole; the given-back episodes wait for its tail. It also happens when a
-- revert committed after the snapshot and returned earlier episodes of the conversation to
-- pending: the claim took only the later ones, which must not be consolidated before them.
-- A later round claims the conversation whole.
WITH split AS (
    SELECT conversation_id
    FROM episodic_memory
    WHERE conversation_id = ANY(%(conversations)s::text[])
      AND consolidated_at IS NULL AND quarantined_at IS NULL
      AND claimed_until >= now()
      AND NOT (claimed_by = %(run_id)s AND claim_shard = %(shard)s)
    UNION
    SELECT e.conversation_id
    FROM episodic_memory e
    WHERE e.conversation_id = ANY(%(conversations)s::text[])
      AND e.consolidated_at IS NULL AND e.quarantined_at IS NULL
      AND e.claimed_by IS DISTINCT FROM %(run_id)s
      AND e.start_at < (SELECT min(m.start_at) FROM episodic_memory m
                        WHERE m.conversation_id = e.conversation_id
                          AND m.claimed_by = %(run_id)s AND m.claim_shard = %(shard)s
                          AND m.consolidated_at IS NULL AND m.quarantined_at IS NULL)
)
UPDATE episodic_memory e
SET claimed_by = NULL, claimed_until = NULL, claim_shard = NULL
FROM split s
WHERE e.conversation_id = s.conversation_id
  AND e.claimed_by = %(run_id)s AND e.claim_shard = %(shard)s
  AND e.consolidated_at IS NULL AND e.quarantined_at IS NULL
RETURNING e.conversation_id
