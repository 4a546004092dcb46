-- The model calls each chunk made (its own answer, a second look's, a change check's, a gray
-- zone's, a failed one too): what a run's call budget (SLOWWAVE_RUN_CALL_BUDGET) sums, as its
-- token budget sums the tokens.
ALTER TABLE consolidation_chunks ADD COLUMN model_calls integer NOT NULL DEFAULT 0;
