-- The embedding model whose vectors the store holds (facts and episode windows alike): vectors of
-- one model are never compared with another's. One row, written by the first migrate after this
-- one with the model the settings name (a store made before it is taken to hold that model's
-- vectors); a later migrate with another model is refused while any vector is stored
-- (sql/db/migrate.py: check_embedding_model), and re-records it while none is.
CREATE TABLE embedding_model (
    only_row    boolean PRIMARY KEY DEFAULT true CHECK (only_row),
    model       text NOT NULL,
    recorded_at timestamptz NOT NULL DEFAULT now()
);
