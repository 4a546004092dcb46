-- A key may name its conversation: a client that sends none (an MCP client that knows what
-- was said, not where to file it) records into and searches that one (models.chat).
ALTER TABLE api_keys ADD COLUMN conversation_id text;
