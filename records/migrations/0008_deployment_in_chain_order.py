"""Deployments remember whether their records are in chain order (records.chronology), set here
from the records that exist."""

from __future__ import annotations

from typing import Any

from django.db import migrations, models

from records.chronology import refresh_in_chain_order


def refresh(apps: Any, schema_editor: Any) -> None:
    refresh_in_chain_order(apps, using=schema_editor.connection.alias)


class Migration(migrations.Migration):
    dependencies = [("records", "0007_record_bodies")]

    operations = [
        migrations.AddField("deployment", "in_chain_order", models.BooleanField(default=False, db_default=False)),
        migrations.RunPython(refresh, migrations.RunPython.noop, elidable=True),
    ]
