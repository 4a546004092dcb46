-- reembed_progress: how many facts and episode windows there are, and how many of each have
-- the new model's vector.
SELECT (SELECT count(*) FROM semantic_memory) AS facts,
       (SELECT count(*) FROM semantic_memory WHERE embedding_next IS NOT NULL) AS facts_done,
       (SELECT count(*) FROM episode_windows) AS windows,
       (SELECT count(*) FROM episode_windows WHERE embedding_next IS NOT NULL) AS windows_done
