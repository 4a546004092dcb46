-- A re-embedding under way (`slowwave db reembed`, tasks/reembed.py): the model whose vectors
-- are written beside the current ones, and a shadow column on each table of vectors for them
-- (any dimension: the switch may change the column's). Search, dedupe and every run read
-- `embedding`, the recorded model's (embedding_model), until the switch makes the shadow
-- vectors the store's and records the new model, in one transaction. A window embedded again
-- by the old model as its episode grew clears its shadow (episode_windows_write), so it is
-- embedded again before the switch; a fact's text never changes in place.
CREATE TABLE embedding_reembed (
    only_row    boolean PRIMARY KEY DEFAULT true CHECK (only_row),
    model       text NOT NULL,
    dim         integer NOT NULL CHECK (dim > 0),
    started_at  timestamptz NOT NULL DEFAULT now()
);
ALTER TABLE semantic_memory ADD COLUMN embedding_next vector;
ALTER TABLE episode_windows ADD COLUMN embedding_next vector;
