-- Episodic memory is returned by search beside the facts, and remembered as the seeds do it:
-- FSRS applies to episodic memory only (seed 000), facts do not decay. Each episode carries
-- its FSRS card (the `fsrs` package's Card: stability, difficulty, state, learning step) and
-- when it was last reviewed; a search that returns an episode reviews it (rated Good), a
-- context does not. An episode never reviewed counts as reviewed once, at its end (event time).
-- Nullable columns and a constant default: no table rewrite.
ALTER TABLE episodic_memory
    ADD COLUMN review_stability real,
    ADD COLUMN review_difficulty real,
    ADD COLUMN review_state smallint,
    ADD COLUMN review_step smallint,
    ADD COLUMN reviewed_at timestamptz,
    ADD COLUMN reviews integer NOT NULL DEFAULT 0 CHECK (reviews >= 0);

-- The episodes' vectors, for the episodic memories' vector channel: one per window of
-- consecutive messages (SLOWWAVE_SEARCH_MEMORY_WINDOW: a whole episode is longer than the
-- embedding model reads), `speaker: text` lines embedded as the facts are. Derived from the
-- episode's text, so they go with it (a forget's statement deletes them first, its purge
-- rewrites this table). Filled for a conversation's new messages before it is searched; a
-- window still growing (the episode's last, short of a full window) is embedded again when it
-- grows.
CREATE TABLE episode_windows (
    episode_id      uuid NOT NULL REFERENCES episodic_memory (id) ON DELETE CASCADE,
    messages_from   integer NOT NULL CHECK (messages_from >= 0),
    messages_to     integer NOT NULL,
    conversation_id text NOT NULL,
    embedding       vector({embedding_dim}) NOT NULL,
    PRIMARY KEY (episode_id, messages_from),
    CHECK (messages_to > messages_from)
);
CREATE INDEX episode_windows_conversation_idx ON episode_windows (conversation_id);
