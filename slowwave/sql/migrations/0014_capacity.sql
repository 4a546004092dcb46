-- Capacity (SLOWWAVE_MAX_ACTIVE_FACTS): when a conversation holds more active facts than its
-- cap, the least recently retrieved and least corroborated are retired. Retrieval through the
-- API and CLI records when a fact was last served.
ALTER TABLE semantic_memory ADD COLUMN last_retrieved_at timestamptz;
