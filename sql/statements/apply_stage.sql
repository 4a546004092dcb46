-- apply: the staging table facts are COPYed into before one set-based INSERT.
CREATE TEMP TABLE slowwave_staged_facts (
    id                  uuid NOT NULL,
    category            text NOT NULL,
    fact                text NOT NULL,
    keywords            text[] NOT NULL,
    source_episodic_ids uuid[] NOT NULL,
    valid_at            timestamptz NOT NULL,
    embedding           vector NOT NULL,
    supersedes_id       uuid
) ON COMMIT DROP
