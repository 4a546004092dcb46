-- Which of these conversations were forgotten (a tombstone holds the SHA-256 of the id).
SELECT c
FROM unnest(%(conversations)s::text[]) AS c
WHERE EXISTS (SELECT 1 FROM history_operations h
              WHERE h.kind = 'forget_conversation' AND h.target = slowwave_digest(c))
