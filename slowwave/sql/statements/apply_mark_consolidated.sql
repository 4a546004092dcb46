-- apply, last step: the chunk's episodes are consolidated by this run. A part that does not
-- finish its episode (messages_to not null) only moves the episode's progress on; the episode
-- stays pending and claimed for its next part. Either way the episode's words for search (its
-- people's: slowwave_person_texts) are parsed now, with the first facts that can cite it (its
-- messages no longer change once claimed).
UPDATE episodic_memory e
SET consolidated_at = CASE WHEN p.messages_to IS NULL THEN now() END,
    consolidation_run_id = CASE WHEN p.messages_to IS NULL THEN %(run_id)s::uuid END,
    consolidated_messages = coalesce(p.messages_to, jsonb_array_length(e.messages)),
    gated = (p.messages_to IS NULL AND e.consolidated_messages = 0
             AND e.id = ANY(%(gated)s::uuid[])),
    last_error = NULL,
    search_tsv = coalesce(
        e.search_tsv,
        to_tsvector('english'::regconfig, slowwave_person_texts(e.messages))),
    claimed_by = CASE WHEN p.messages_to IS NULL THEN NULL ELSE e.claimed_by END,
    claim_shard = CASE WHEN p.messages_to IS NULL THEN NULL ELSE e.claim_shard END,
    claimed_until = CASE WHEN p.messages_to IS NULL THEN NULL ELSE e.claimed_until END
FROM unnest(%(ids)s::uuid[], %(messages_to)s::integer[]) AS p(id, messages_to)
WHERE e.id = p.id
