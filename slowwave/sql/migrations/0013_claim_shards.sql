-- A run claims its work shard by shard (flows/consolidate.py): each shard of a run claims its
-- own conversations when it starts, concurrently with the run's other shards. The lease stays
-- the run's (claimed_by: renewed, released and checked by apply per run); claim_shard says
-- which of its shards took an episode, so that a retried shard gets its own claim back and
-- never another shard's.
ALTER TABLE episodic_memory ADD COLUMN claim_shard integer;
