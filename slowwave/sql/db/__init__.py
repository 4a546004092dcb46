"""Postgres access: the database handle, the embedded server, migrations and status."""

from slowwave.models.errors import DatabaseUnavailable, MigrationError
from slowwave.sql.db.database import Database, redact
from slowwave.sql.db.migrate import migrate

__all__ = ["Database", "DatabaseUnavailable", "MigrationError", "migrate", "redact"]
