"""Postgres access: the database handle, the embedded server, migrations and status."""

from slowwave.sql.db.database import Database, DatabaseUnavailable, redact
from slowwave.sql.db.migrate import MigrationError, migrate

__all__ = ["Database", "DatabaseUnavailable", "MigrationError", "migrate", "redact"]
