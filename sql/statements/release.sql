-- A run ends: it gives back what it claimed and did not consolidate.
UPDATE episodic_memory SET claimed_by = NULL, claimed_until = NULL
WHERE claimed_by = %(run_id)s
