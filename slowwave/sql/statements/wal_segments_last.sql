-- forget's purge: the last write-ahead log segment file there is now (a recycled one can be
-- ahead of the log: it holds an old segment's bytes until the log has written past it).
SELECT max(name) FROM pg_ls_waldir() WHERE name ~ '^[0-9A-F]{24}$'
