-- A purge rewrote the tables after these forgets committed: their bytes are gone from the
-- files (a forget's GET answer and tombstone say so).
UPDATE history_operations
SET purged_at = clock_timestamp()
WHERE kind IN ('forget_conversation', 'forget_fact')
  AND purged_at IS NULL
  AND done_at <= %(began)s
