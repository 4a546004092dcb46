-- load: the staged episodes of forgotten conversations are refused: out of the staging table;
-- per conversation, how many messages.
WITH refused AS (
    DELETE FROM slowwave_staged_episodes
    WHERE conversation_id = ANY(%(conversations)s::text[])
    RETURNING conversation_id, jsonb_array_length(messages) AS messages
)
SELECT conversation_id, sum(messages)::bigint FROM refused GROUP BY conversation_id
