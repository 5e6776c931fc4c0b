"""Trigram GIN indexes on `search_text`, PostgreSQL only, so that `q` needs no table scan.

SQLite has no such index; there `q` scans the table (the embedded default serves small data)."""

from django.db import migrations
from django.db.backends.base.schema import BaseDatabaseSchemaEditor
from django.db.migrations.state import StateApps

TABLES = ("records_bounty", "records_submission", "records_dispute")


def create(apps: StateApps, schema_editor: BaseDatabaseSchemaEditor) -> None:
    if schema_editor.connection.vendor != "postgresql":
        return
    schema_editor.execute("CREATE EXTENSION IF NOT EXISTS pg_trgm")
    for table in TABLES:
        schema_editor.execute(
            f"CREATE INDEX IF NOT EXISTS {table}_search_trgm ON {table} USING gin (search_text gin_trgm_ops)"
        )


def drop(apps: StateApps, schema_editor: BaseDatabaseSchemaEditor) -> None:
    if schema_editor.connection.vendor != "postgresql":
        return
    for table in TABLES:
        schema_editor.execute(f"DROP INDEX IF EXISTS {table}_search_trgm")


class Migration(migrations.Migration):
    dependencies = [("records", "0001_initial")]
    operations = [migrations.RunPython(create, drop)]
