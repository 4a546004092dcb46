-- profile: the profiles written (or, where writing failed, the old one marked stale), one
-- statement for the run's conversations. A conversation with no active fact left has no
-- profile: its row is removed.
WITH given AS (
    SELECT * FROM unnest(%(conversations)s::text[], %(profiles)s::text[], %(facts)s::int[],
                         %(tokens)s::int[], %(ok)s::boolean[])
                  AS g(conversation_id, profile, facts, tokens, ok)
), emptied AS (
    DELETE FROM conversation_profiles p USING given g
    WHERE p.conversation_id = g.conversation_id AND g.facts = 0
    RETURNING 1
)
INSERT INTO conversation_profiles AS p
    (conversation_id, profile, facts, tokens, model, run_id, stale, updated_at)
SELECT conversation_id, profile, facts, tokens, %(model)s, %(run_id)s, NOT ok, now()
FROM given
WHERE facts > 0
ON CONFLICT (conversation_id) DO UPDATE
SET profile = CASE WHEN EXCLUDED.stale THEN p.profile ELSE EXCLUDED.profile END,
    facts = CASE WHEN EXCLUDED.stale THEN p.facts ELSE EXCLUDED.facts END,
    tokens = CASE WHEN EXCLUDED.stale THEN p.tokens ELSE EXCLUDED.tokens END,
    model = CASE WHEN EXCLUDED.stale THEN p.model ELSE EXCLUDED.model END,
    run_id = CASE WHEN EXCLUDED.stale THEN p.run_id ELSE EXCLUDED.run_id END,
    stale = EXCLUDED.stale,
    updated_at = CASE WHEN EXCLUDED.stale THEN p.updated_at ELSE EXCLUDED.updated_at END
