-- Keep only the indexes a statement slowwave runs uses (tests/test_plans.py EXPLAINs every
-- statement against tables of realistic size); every insert paid for the others.
-- No statement orders by the <=> operator: vector search is an exact scan of one
-- conversation's facts (an approximate index filtered to one conversation afterwards can
-- return fewer rows than asked), so the HNSW index was never read, and every COPY of facts
-- paid for its graph.
DROP INDEX semantic_memory_embedding_hnsw;
-- Full text: search scores one conversation's facts (found through semantic_memory_active_idx
-- or, as of a time, semantic_memory_validity_idx) and matches their tsvectors in place; a GIN
-- index over every conversation's facts would find matches everywhere, then filter.
DROP INDEX semantic_memory_search_gin;
-- No statement walks lineage, reads the decision log by run, conversation or fact, reads
-- chunks by run or conversation, or looks an ingested message up by its episode (yet: the
-- history and forget operations bring their statements, and their indexes, with them).
DROP INDEX semantic_memory_supersedes_idx;
DROP INDEX decision_log_run_idx;
DROP INDEX decision_log_conversation_idx;
DROP INDEX decision_log_fact_idx;
DROP INDEX consolidation_chunks_run_idx;
DROP INDEX consolidation_chunks_conversation_idx;
DROP INDEX ingested_messages_episode_idx;
