"""Bulk inserts of plain rows, for the indexer's batches: COPY on PostgreSQL, executemany on SQLite.

`bulk_create` builds a model instance per row and prepares every field through the ORM, and on
PostgreSQL sends the rows as text arrays that psycopg escapes and the server parses again; for
a backfill that is most of the time spent. Here a row is a tuple of the model fields' Python
values in the given order, converted only where the field stores something else: the custom
chain fields through their own `get_prep_value` (78-digit UInt256 strings, validated lowercase
hex), datetimes through the backend's adapter, JSON as its text. The rows join the caller's
transaction like any other query, so they commit or roll back with the rest of the batch.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from datetime import datetime
from typing import Any

import orjson
from django.conf import settings
from django.db import connection, models
from django.utils import timezone
from psycopg import sql

from records.fields import AddressField, Bytes32Field, UInt256Field

_Convert = Callable[[Any], Any]


def json_text(value: Any) -> str:
    """JSON text of a value: what a JSONField column receives."""
    return orjson.dumps(value).decode()


def _datetime_converter() -> _Convert | None:
    if connection.vendor == "postgresql":
        return None  # psycopg sends aware datetimes as they are, as Django does
    if connection.vendor != "sqlite" or not settings.USE_TZ:
        return connection.ops.adapt_datetimefield_value
    zone = connection.timezone

    def naive_text(value: datetime | None) -> str | None:
        # SQLite's adapt_datetimefield_value without its per-value settings look-ups.
        if value is None:
            return None
        if timezone.is_aware(value):
            value = timezone.make_naive(value, zone)
        return str(value)

    return naive_text


def _converter(field: models.Field[Any, Any]) -> _Convert | None:
    if isinstance(field, UInt256Field | AddressField | Bytes32Field):
        return field.get_prep_value
    if isinstance(field, models.DateTimeField):
        return _datetime_converter()
    if isinstance(field, models.JSONField):
        return json_text
    return None


def defer_search_index_merge() -> None:
    """On PostgreSQL, lets this transaction's new search texts wait in the trigram GIN index's
    pending list (merged later by autovacuum or when the list fills) instead of merging them into
    the index row by row, which is most of a backfill batch's database time. Searches scan the
    pending list meanwhile, so they stay correct."""
    if connection.vendor == "postgresql":
        with connection.cursor() as cursor:
            cursor.execute("SET LOCAL gin_pending_list_limit = '256MB'")


def insert_rows(model: type[models.Model], columns: Sequence[str], rows: Sequence[Sequence[Any]]) -> None:
    """Inserts `rows` (tuples of the values of the fields named by `columns`, by attname) into
    the model's table."""
    if not rows:
        return
    by_attname = {field.attname: field for field in model._meta.concrete_fields}
    fields = [by_attname[name] for name in columns]
    converters = [(i, convert) for i, field in enumerate(fields) if (convert := _converter(field)) is not None]

    def prepared(row: Sequence[Any]) -> Sequence[Any]:
        if not converters:
            return row
        values = list(row)
        for i, convert in converters:
            values[i] = convert(values[i])
        return values

    table = model._meta.db_table
    names = [str(field.column) for field in fields]
    if connection.vendor == "postgresql":
        statement = sql.SQL("COPY {} ({}) FROM STDIN").format(
            sql.Identifier(table), sql.SQL(", ").join(sql.Identifier(name) for name in names)
        )
        with connection.cursor() as cursor, cursor.cursor.copy(statement) as copy:
            for row in rows:
                copy.write_row(prepared(row))
        return
    quote = connection.ops.quote_name
    statement_text = (f"INSERT INTO {quote(table)} ({', '.join(quote(name) for name in names)}) "
                      f"VALUES ({', '.join(['%s'] * len(names))})")
    with connection.cursor() as cursor:
        cursor.executemany(statement_text, [prepared(row) for row in rows])
