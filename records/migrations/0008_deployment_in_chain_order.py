"""Deployments remember whether each kind of their records is in chain order (records.chronology),
set here from the records that exist."""

from __future__ import annotations

from typing import Any

from django.db import migrations, models

from records.chronology import refresh_in_chain_order


def refresh(apps: Any, schema_editor: Any) -> None:
    refresh_in_chain_order(apps, using=schema_editor.connection.alias)


class Migration(migrations.Migration):
    dependencies = [("records", "0007_record_bodies")]

    operations = [
        *(migrations.AddField("deployment", f"{kind}_in_chain_order", models.BooleanField(default=False, db_default=False))
          for kind in ("bounty", "submission", "dispute")),
        migrations.RunPython(refresh, migrations.RunPython.noop, elidable=True),
    ]
