-- Whether a conversation has any fact at all (valid now or once): tells "no such
-- conversation, or nothing consolidated yet" apart from "nothing matched".
SELECT EXISTS (SELECT 1 FROM semantic_memory WHERE conversation_id = %(conversation_id)s)
