-- Slots (SLOWWAVE_SLOTS): a single-valued attribute of a person (identity:location:ana) is
-- held by at most one active fact of a conversation; a new value in a filled slot becomes an
-- update of the fact that held it. Checked at COMMIT, so that a transaction may end the old
-- holder and write the new one in either order (apply, revert, undelete).
ALTER TABLE semantic_memory ADD COLUMN slot text;
ALTER TABLE semantic_memory ADD CONSTRAINT semantic_memory_one_active_per_slot
    EXCLUDE USING btree (conversation_id WITH =, slot WITH =)
    WHERE (invalid_at IS NULL AND slot IS NOT NULL)
    DEFERRABLE INITIALLY DEFERRED;
