-- A forget (or a revert) takes a conversation away from the work in flight, by construction:
-- every transaction that writes about a conversation (apply, a failure or conflict record,
-- ingest, a profile) first holds the conversation's lock shared (statement
-- hold_conversations), then reads the tombstones (statement forgotten_among) in a snapshot
-- taken after the lock; a forget holds it exclusively (statement lock_conversations) before
-- it deletes. A forget therefore waits only for a transaction already open on the
-- conversation, deletes what it committed, and every later writer sees the tombstone and
-- drops the conversation. The key is the one claim.sql already try-locks: a claim skips a
-- conversation while a forget or a revert holds it.
CREATE FUNCTION slowwave_conversation_key(conversation_id text) RETURNS bigint
    LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE
    RETURN hashtextextended('slowwave:claim:' || conversation_id, 0);

-- A tombstone's target: the SHA-256 of the id, hex (tasks.forget.digest).
CREATE FUNCTION slowwave_digest(value text) RETURNS text
    LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE
    RETURN encode(sha256(convert_to(value, 'UTF8')), 'hex');

-- Every writer and every ingest looks up tombstones by target.
CREATE INDEX history_operations_forgotten ON history_operations (target)
    WHERE kind = 'forget_conversation';
