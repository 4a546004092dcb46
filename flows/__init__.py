"""Prefect flows: nightly consolidation, backfill, and the operational ones."""
