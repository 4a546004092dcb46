"""The consolidation stages as plain functions: claim, gate, predict, calibrate, guard, embed,
apply. They need no Prefect; the flows call them."""
