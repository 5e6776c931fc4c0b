"""Whether a deployment's records of a kind are in chain order: `created_at` never decreases as
the on-chain ID rises.

The indexer creates records from logs in chain order and stamps each with its block's time, so
this holds for every deployment it writes, and it keeps `Deployment.<kind>_in_chain_order` up to
date (clearing it should a batch ever break the rule). The read side relies on the flag for deep
pages sorted by `created_at`: in chain order, a record's position in that order follows from its
ID (records.selectors)."""

from __future__ import annotations

from typing import Any

from django.db import connections

# (model name, ID field, flag) of each record kind
KINDS = (("Bounty", "bounty_id", "bounty_in_chain_order"), ("Submission", "submission_id", "submission_in_chain_order"),
         ("Dispute", "dispute_id", "dispute_in_chain_order"))


def out_of_order(model: type[Any], id_field: str, deployment_id: int, using: str = "default") -> bool:
    """True if some record of the deployment is older than the record before it by ID (one pass
    over the deployment's records of `model`, a current or historical model)."""
    connection = connections[using]
    quote = connection.ops.quote_name
    table, key = quote(model._meta.db_table), quote(id_field)
    with connection.cursor() as cursor:
        cursor.execute(
            f"SELECT 1 FROM (SELECT created_at, LAG(created_at) OVER (ORDER BY {key}) AS previous "
            f"FROM {table} WHERE deployment_id = %s) AS ordered WHERE created_at < previous LIMIT 1",
            [deployment_id],
        )
        return cursor.fetchone() is not None


def refresh_in_chain_order(apps: Any, using: str = "default") -> None:
    """Sets every deployment's flags from its records (for a data migration: `apps` gives the
    models, current or historical)."""
    deployments = apps.get_model("records", "Deployment")
    for deployment in deployments.objects.using(using).all():
        flags = {flag: not out_of_order(apps.get_model("records", name), id_field, deployment.pk, using)
                 for name, id_field, flag in KINDS}
        deployments.objects.using(using).filter(pk=deployment.pk).update(**flags)
