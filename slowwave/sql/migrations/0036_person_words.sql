-- An episode's words for search (search_tsv, and the same words parsed for a pending episode)
-- are its people's: the messages of an agent's chat role (models.consolidation.AGENT_ROLES)
-- are left out where a person speaks in the episode, and kept where only agents do. An
-- assistant's long answers repeat a question's words many times over ("check the bike, oil
-- the bike chain ...") and took the full-text channel from the chat where the user said it
-- once: on LongMemEval (all 612 sessions one haystack) all-evidence recall@10 0.665 → 0.741.
-- Shown, an episode is still whole: only what its words are matched on changes.
CREATE OR REPLACE FUNCTION slowwave_person_texts(messages jsonb) RETURNS jsonb
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT coalesce(
        (SELECT jsonb_agg(m -> 'text' ORDER BY n)
         FROM jsonb_array_elements(messages) WITH ORDINALITY AS t(m, n)
         WHERE lower(btrim(coalesce(m ->> 'speaker', '')))
               <> ALL (ARRAY['assistant', 'agent', 'ai', 'bot', 'system', 'tool'])),
        jsonb_path_query_array(messages, '$[*].text'))
$$;

-- the words already stored, parsed again by the rule
UPDATE episodic_memory
SET search_tsv = to_tsvector('english'::regconfig, slowwave_person_texts(messages))
WHERE search_tsv IS NOT NULL;
