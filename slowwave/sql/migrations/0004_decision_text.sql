-- The decision log keeps the sentence the model proposed, so a merge, a rejection or an
-- update can be audited without the prompt.
ALTER TABLE decision_log ADD COLUMN proposed_fact text;
