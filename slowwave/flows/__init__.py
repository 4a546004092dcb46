"""Prefect flows: the nightly consolidation and the backfill (ingest, then consolidate)."""
