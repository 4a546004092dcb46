-- Revert, before its episodes return to pending: what runs in flight claimed of the reverted
-- conversations is taken back. Their chunks of them become conflicts when they reach apply
-- (not charged, not applied), so that no later episode is consolidated before the earlier
-- ones the revert returns to pending: a later run takes each conversation whole, in order.
UPDATE episodic_memory
SET claimed_by = NULL, claimed_until = NULL, claim_shard = NULL
WHERE conversation_id = ANY(%(conversations)s::text[])
  AND claimed_by IS NOT NULL
  AND consolidated_at IS NULL AND quarantined_at IS NULL
RETURNING id
