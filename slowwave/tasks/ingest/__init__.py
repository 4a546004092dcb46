"""ingest: historical transcripts into episodes, idempotently, in event time."""
