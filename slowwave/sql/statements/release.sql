-- Runs give back what they claimed and did not consolidate: a run that ends, or runs that
-- died (marked crashed).
UPDATE episodic_memory SET claimed_by = NULL, claimed_until = NULL, claim_shard = NULL
WHERE claimed_by = ANY(%(run_ids)s::uuid[])
