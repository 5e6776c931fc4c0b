"""Every record keeps its JSON (records.representation.record_body): add the column and render it
for the records that exist."""

from __future__ import annotations

from typing import Any

from django.db import migrations, models

from records.bodies import render_bodies


def render(apps: Any, schema_editor: Any) -> None:
    deployment = apps.get_model("records", "Deployment")
    for name in ("Bounty", "Submission", "Dispute"):
        render_bodies(apps.get_model("records", name), deployment, using=schema_editor.connection.alias)


HELP = "the record's JSON without its counter (records.representation.record_body)"


class Migration(migrations.Migration):
    dependencies = [("records", "0006_sort_indexes_cover_deployment")]

    operations = [
        migrations.AddField("bounty", "body", models.TextField(default="", editable=False, help_text=HELP)),
        migrations.AddField("submission", "body", models.TextField(default="", editable=False, help_text=HELP)),
        migrations.AddField("dispute", "body", models.TextField(default="", editable=False, help_text=HELP)),
        migrations.RunPython(render, migrations.RunPython.noop, elidable=True),
    ]
