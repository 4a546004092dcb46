-- An ingested message names the episode it went into; the foreign key that checked it cost one
-- lookup of episodic_memory's key per message: 1.2 s of the 4.8 s that the statement building
-- episodes took for a group of 500,000 messages (EXPLAIN ANALYZE: a quarter of its time).
-- Both tables are written by that one statement (ingest_segment: a message's row is written
-- with its episode, in the same statement, or not at all) and their rows are removed by one
-- statement (forget_conversation: a conversation's messages and its episodes together); no
-- other statement deletes an episode. tests/test_ingest.py checks that none is left without.
ALTER TABLE ingested_messages DROP CONSTRAINT ingested_messages_episode_id_fkey;
