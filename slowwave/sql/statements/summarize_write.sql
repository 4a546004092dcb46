-- summarize: the model's summaries, written set-wise; a summary written meanwhile is kept.
UPDATE episodic_memory e SET summary = s.summary
FROM unnest(%(ids)s::uuid[], %(summaries)s::text[]) AS s(id, summary)
WHERE e.id = s.id AND e.summary IS NULL
