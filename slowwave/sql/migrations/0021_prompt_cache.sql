-- Billed and computed prompt tokens: of the prompt tokens a chunk (a run) sent, those the
-- engine took from its prefix cache instead of computing them. 0 where the engine does not
-- say, so that every billed token then counts as computed.
ALTER TABLE consolidation_chunks
    ADD COLUMN cached_tokens integer NOT NULL DEFAULT 0;
ALTER TABLE consolidation_runs
    ADD COLUMN prompt_tokens_cached bigint NOT NULL DEFAULT 0;
