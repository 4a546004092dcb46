-- slowwave export: where the Parquet exports are, so that a forget reaches them. The target is
-- a local folder (its absolute path) or an object-store URL; never a secret (a URL with
-- credentials in it is refused before it gets here). What was exported, and the fingerprint of
-- each partition it holds, lives with the export (its _slowwave_export.json), not here.
CREATE TABLE export_targets (
    target              text PRIMARY KEY,
    what                text[] NOT NULL,
    first_exported_at   timestamptz NOT NULL DEFAULT now(),
    last_exported_at    timestamptz NOT NULL DEFAULT now()
);
