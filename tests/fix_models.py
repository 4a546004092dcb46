"""Model fixtures (filled in by the consolidation tests)."""
