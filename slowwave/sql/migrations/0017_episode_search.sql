-- Search's episode channel (SLOWWAVE_SEARCH_EPISODE_WEIGHT) matches the query's words in the
-- transcripts of the facts' source episodes: their words, parsed once when an episode is
-- written rather than at every search.
ALTER TABLE episodic_memory ADD COLUMN search_tsv tsvector GENERATED ALWAYS AS (
    to_tsvector('english'::regconfig, jsonb_path_query_array(messages, '$[*].text'))
) STORED;
