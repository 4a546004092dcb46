-- forget's purge: the other sessions of this database in a transaction that began before
-- %(since)s (holding a snapshot that may still see the deleted rows, which a rewrite keeps).
SELECT count(*)
FROM pg_stat_activity
WHERE datname = current_database()
  AND pid <> pg_backend_pid()
  AND backend_xmin IS NOT NULL
  AND xact_start < %(since)s
