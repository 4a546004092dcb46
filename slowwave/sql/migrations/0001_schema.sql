-- slowwave schema, version 1.
-- {embedding_dim} is the setting SLOWWAVE_EMBEDDING_DIM, rendered as a literal integer.

CREATE EXTENSION IF NOT EXISTS vector;

-- array_to_string is STABLE, a generated column needs IMMUTABLE (seed 001, migration notes).
-- It is immutable in fact for a text[] argument and a constant separator.
CREATE FUNCTION slowwave_keywords_to_text(keywords text[]) RETURNS text
    LANGUAGE sql IMMUTABLE PARALLEL SAFE STRICT
    RETURN array_to_string(keywords, ' ');

-- One row per consolidation run (nightly, backfill, or an in-process call).
CREATE TABLE consolidation_runs (
    id                      uuid PRIMARY KEY,
    flow_run_id             text,
    kind                    text NOT NULL DEFAULT 'manual',
    status                  text NOT NULL DEFAULT 'running'
        CHECK (status IN ('running', 'completed', 'completed_with_failures', 'failed')),
    started_at              timestamptz NOT NULL DEFAULT now(),
    finished_at             timestamptz,
    conversations           integer NOT NULL DEFAULT 0,
    chunks                  integer NOT NULL DEFAULT 0,
    chunks_failed           integer NOT NULL DEFAULT 0,
    episodes_consolidated   integer NOT NULL DEFAULT 0,
    episodes_skipped        integer NOT NULL DEFAULT 0,
    episodes_quarantined    integer NOT NULL DEFAULT 0,
    facts_inserted          integer NOT NULL DEFAULT 0,
    facts_reinforced        integer NOT NULL DEFAULT 0,
    facts_updated           integer NOT NULL DEFAULT 0,
    facts_invalidated       integer NOT NULL DEFAULT 0,
    dedupe_merges           integer NOT NULL DEFAULT 0,
    actions_rejected        integer NOT NULL DEFAULT 0,
    prompt_tokens           bigint NOT NULL DEFAULT 0,
    completion_tokens       bigint NOT NULL DEFAULT 0,
    summary                 jsonb NOT NULL DEFAULT '[]'::jsonb,
    error                   text,
    CHECK (finished_at IS NULL OR finished_at >= started_at)
);

CREATE TABLE episodic_memory (
    id                      uuid PRIMARY KEY,
    conversation_id         text NOT NULL CHECK (length(conversation_id) > 0),
    -- stable key of the source (file + conversation + session): re-ingesting adds nothing
    external_key            text NOT NULL UNIQUE,
    messages                jsonb NOT NULL CHECK (jsonb_typeof(messages) = 'array'),
    summary                 text,
    surprise                real NOT NULL DEFAULT 0
        CONSTRAINT episodic_memory_surprise_range CHECK (surprise >= 0 AND surprise <= 1),
    start_at                timestamptz NOT NULL,
    end_at                  timestamptz NOT NULL,
    created_at              timestamptz NOT NULL DEFAULT now(),
    consolidated_at         timestamptz,
    consolidation_run_id    uuid REFERENCES consolidation_runs (id),
    gated                   boolean NOT NULL DEFAULT false,
    attempts                integer NOT NULL DEFAULT 0 CHECK (attempts >= 0),
    last_error              text,
    quarantined_at          timestamptz,
    CONSTRAINT episodic_memory_time_order CHECK (end_at >= start_at)
);

-- claim: the pending episodes of a conversation, oldest first
CREATE INDEX episodic_memory_pending_idx ON episodic_memory (conversation_id, end_at, id)
    WHERE consolidated_at IS NULL AND quarantined_at IS NULL;

CREATE TABLE semantic_memory (
    id                      uuid PRIMARY KEY,
    conversation_id         text NOT NULL CHECK (length(conversation_id) > 0),
    category                text NOT NULL
        CONSTRAINT semantic_memory_category_check CHECK (category IN (
            'identity', 'preference', 'interest', 'personality',
            'relationship', 'experience', 'goal', 'guideline')),
    fact                    text NOT NULL
        CONSTRAINT semantic_memory_fact_not_empty CHECK (length(btrim(fact)) > 0),
    keywords                text[] NOT NULL DEFAULT ARRAY[]::text[],
    source_episodic_ids     uuid[] NOT NULL CHECK (cardinality(source_episodic_ids) > 0),
    valid_at                timestamptz NOT NULL,
    invalid_at              timestamptz,
    embedding               vector({embedding_dim}) NOT NULL,
    created_at              timestamptz NOT NULL DEFAULT now(),
    supersedes_id           uuid REFERENCES semantic_memory (id),
    created_by_run_id       uuid REFERENCES consolidation_runs (id),
    search_tsv              tsvector GENERATED ALWAYS AS (
        to_tsvector('english'::regconfig,
                    fact || ' ' || coalesce(slowwave_keywords_to_text(keywords), ''))
    ) STORED,
    CONSTRAINT semantic_memory_validity_order CHECK (invalid_at IS NULL OR invalid_at >= valid_at)
);

-- predict / dedupe / retrieval: the active facts of one conversation
CREATE INDEX semantic_memory_active_idx ON semantic_memory (conversation_id, category)
    WHERE invalid_at IS NULL;
-- as-of queries and lineage walks
CREATE INDEX semantic_memory_validity_idx ON semantic_memory (conversation_id, valid_at, invalid_at);
CREATE INDEX semantic_memory_supersedes_idx ON semantic_memory (supersedes_id)
    WHERE supersedes_id IS NOT NULL;
CREATE INDEX semantic_memory_embedding_hnsw ON semantic_memory
    USING hnsw (embedding vector_cosine_ops);
CREATE INDEX semantic_memory_search_gin ON semantic_memory USING gin (search_tsv);

-- One row per action the apply stage took (or refused), for audit.
CREATE TABLE decision_log (
    id                      bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    run_id                  uuid REFERENCES consolidation_runs (id),
    conversation_id         text NOT NULL,
    chunk_id                uuid NOT NULL,
    proposed_action         text NOT NULL,
    action                  text NOT NULL CHECK (action IN (
        'new', 'reinforce', 'update', 'invalidate', 'merge', 'rejected')),
    fact_id                 uuid REFERENCES semantic_memory (id),
    previous_fact_id        uuid REFERENCES semantic_memory (id),
    similarity              real,
    episode_ids             uuid[] NOT NULL,
    event_time              timestamptz NOT NULL,
    recorded_at             timestamptz NOT NULL DEFAULT clock_timestamp(),
    reason                  text
);

CREATE INDEX decision_log_run_idx ON decision_log (run_id);
CREATE INDEX decision_log_conversation_idx ON decision_log (conversation_id, recorded_at);
CREATE INDEX decision_log_fact_idx ON decision_log (fact_id) WHERE fact_id IS NOT NULL;
