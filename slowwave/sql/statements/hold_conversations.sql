-- Hold conversations against a forget or a revert until this transaction ends: a shared lock
-- (writers of different runs never wait on one another; a forget or a revert waits for them,
-- and they for it), taken in key order, the order lock_conversations takes them in. Run it
-- first in a writing transaction, then forgotten_among: its snapshot comes after the lock.
-- %(exclusive)s: an exclusive lock (an ingest, which may grow a conversation's latest
-- episode, takes turns with other ingests of it; a claim skips the conversation meanwhile).
SELECT count(CASE WHEN %(exclusive)s THEN pg_advisory_xact_lock(k)
                  ELSE pg_advisory_xact_lock_shared(k) END)
FROM (SELECT DISTINCT slowwave_conversation_key(c) AS k
      FROM unnest(%(conversations)s::text[]) AS c
      ORDER BY 1) held
