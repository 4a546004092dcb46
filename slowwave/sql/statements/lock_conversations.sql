-- A forget or a revert takes conversations from every writer until this transaction ends:
-- an exclusive lock, in key order (hold_conversations takes them in the same order). It waits
-- only for transactions already open on them; writers that come later wait for it, then see
-- what it did. The statements after it see whatever those transactions committed.
SELECT count(pg_advisory_xact_lock(k))
FROM (SELECT DISTINCT slowwave_conversation_key(c) AS k
      FROM unnest(%(conversations)s::text[]) AS c
      ORDER BY 1) held
