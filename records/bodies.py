"""Re-rendering the stored JSON bodies of records (records.representation.record_body).

The indexer renders a record's body whenever it writes the record; this is for the rows that
exist when the representation itself changes: a data migration calls `render_bodies`."""

from __future__ import annotations

from typing import Any

from django.db import connections

from records.representation import record_body

BATCH = 2_000


def render_bodies(model: type[Any], deployment_model: type[Any], using: str = "default") -> int:
    """Renders and stores the body of every record of `model` (a current or historical model);
    returns how many were written. Reads in primary-key batches and writes each batch with one
    executemany, so that millions of rows take minutes, not hours."""
    deployments = {d.pk: (d.chain_id, d.contract_address) for d in deployment_model.objects.using(using).all()}
    table = connections[using].ops.quote_name(model._meta.db_table)
    written, last = 0, 0
    while True:
        batch = list(model.objects.using(using).filter(pk__gt=last).order_by("pk")[:BATCH])
        if not batch:
            return written
        rows = []
        for record in batch:
            chain_id, address = deployments[record.deployment_id]
            rows.append((record_body(record, chain_id=chain_id, contract_address=address), record.pk))
        with connections[using].cursor() as cursor:
            cursor.executemany(f"UPDATE {table} SET body = %s WHERE id = %s", rows)
        written += len(batch)
        last = batch[-1].pk
