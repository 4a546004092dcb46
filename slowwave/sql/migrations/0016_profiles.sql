-- Profiles (SLOWWAVE_PROFILES): a model-written profile of each conversation's active facts,
-- within a token limit, refreshed when a run changes the conversation's facts. `stale`: its
-- facts changed since it was written (a refresh failed, a revert, an undelete) and it waits
-- for the next refresh. A forgotten fact takes its conversation's profile with it, a forgotten
-- conversation too.
CREATE TABLE conversation_profiles (
    conversation_id text PRIMARY KEY,
    profile text,
    facts integer NOT NULL DEFAULT 0,
    tokens integer NOT NULL DEFAULT 0,
    model text,
    run_id uuid,
    stale boolean NOT NULL DEFAULT false,
    updated_at timestamptz NOT NULL DEFAULT now()
);
-- the stale ones, found after every run without reading every profile
CREATE INDEX conversation_profiles_stale_idx ON conversation_profiles (conversation_id)
    WHERE stale;
