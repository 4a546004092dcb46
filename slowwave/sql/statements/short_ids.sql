-- For each prefix of an id's last group (a short id, typed or about to be printed), up to
-- `limit` ids of `kind` (run, fact or episode) that start with it: one is the id it names,
-- more make it ambiguous. The prefix is hex (checked before), so [prefix, prefix || 'g')
-- holds exactly the keys that start with it, and the range is an index scan.
SELECT p.prefix, x.id
FROM unnest(%(prefixes)s::text[]) AS p (prefix)
CROSS JOIN LATERAL (
    (SELECT id FROM consolidation_runs
     WHERE %(kind)s = 'run'
       AND slowwave_short_key(id) >= p.prefix AND slowwave_short_key(id) < p.prefix || 'g'
     LIMIT %(limit)s)
    UNION ALL
    (SELECT id FROM semantic_memory
     WHERE %(kind)s = 'fact'
       AND slowwave_short_key(id) >= p.prefix AND slowwave_short_key(id) < p.prefix || 'g'
     LIMIT %(limit)s)
    UNION ALL
    (SELECT id FROM episodic_memory
     WHERE %(kind)s = 'episode'
       AND slowwave_short_key(id) >= p.prefix AND slowwave_short_key(id) < p.prefix || 'g'
     LIMIT %(limit)s)
) AS x
ORDER BY p.prefix, x.id
