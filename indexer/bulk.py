"""Bulk inserts of plain rows, for the indexer's batches: COPY on PostgreSQL, executemany on SQLite.

`bulk_create` builds a model instance per row and prepares every field through the ORM, and on
PostgreSQL sends the rows as text arrays that psycopg escapes and the server parses again; for
a backfill that is most of the time spent. Here a row is a tuple of the model fields' Python
values in the given order, converted only where the field stores something else: the custom
chain fields through their own `get_prep_value` (78-digit UInt256 strings, validated lowercase
hex), datetimes through the backend's adapter, JSON as its text. The rows join the caller's
transaction like any other query, so they commit or roll back with the rest of the batch.

On PostgreSQL most of a batch's time is the server's: index maintenance, the trigram index
above all. `RowStream` sends the COPYs from a background thread, so that the server works on
one table's rows while this process builds the next table's.
"""

from __future__ import annotations

import queue
import threading
import zlib
from collections.abc import Callable, Sequence
from datetime import datetime
from types import TracebackType
from typing import Any, Self

import orjson
from django.conf import settings
from django.db import DEFAULT_DB_ALIAS, connection, connections, models
from django.db.backends.base.base import BaseDatabaseWrapper
from django.utils import timezone
from psycopg import sql

from records.dialect import dialect
from records.fields import UINT256_DIGITS, UINT256_MAX, AddressField, Bytes32Field, UInt256Field

_Convert = Callable[[Any], Any]


def json_text(value: Any) -> str:
    """JSON text of a value: what a JSONField column receives."""
    return orjson.dumps(value).decode()


def _datetime_converter() -> _Convert | None:
    if not dialect(connection).datetimes_as_text:
        return None  # psycopg sends aware datetimes as they are, as Django does
    if not settings.USE_TZ:
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


def _remembered(convert: _Convert) -> _Convert:
    """`convert` with its answers kept: block times, addresses and block hashes repeat."""
    answers: dict[Any, Any] = {}

    def converted(value: Any) -> Any:
        try:
            return answers[value]
        except KeyError:
            answers[value] = answer = convert(value)
            return answer

    return converted


def _uint256_text(field: UInt256Field) -> _Convert:
    """UInt256Field.get_prep_value, with the decoder's plain ints in range taken straight."""
    def text(value: Any) -> Any:
        if type(value) is int and 0 <= value <= UINT256_MAX:
            return str(value).zfill(UINT256_DIGITS)
        return field.get_prep_value(value)

    return text


def _converter(field: models.Field[Any, Any]) -> _Convert | None:
    if isinstance(field, AddressField):
        return _remembered(field.get_prep_value)
    if isinstance(field, UInt256Field):
        return _uint256_text(field)
    if isinstance(field, Bytes32Field):
        return field.get_prep_value
    if isinstance(field, models.DateTimeField):
        convert = _datetime_converter()
        return None if convert is None else _remembered(convert)
    if isinstance(field, models.JSONField):
        return json_text
    return None


# SQLite: the page cache of the indexer's connection, in KiB (the default, 2 MiB, is smaller than
# the applied-log ledger's unique index, whose keys arrive in random order), and how many pages
# the write-ahead log may hold during a bulk backfill before a commit copies them into the
# database (the default, 1,000, made every other commit of a backfill wait for that copy and its
# fsync; at 32,768 (256 MiB of 8 KiB pages) a checkpoint is rarer and copies each much-changed
# page once: a backfill's commits took 30% less; the log file is reused afterwards, so it stays
# about that size).
SQLITE_CACHE_KIB = 65_536
SQLITE_BULK_CHECKPOINT_PAGES = 32_768
SQLITE_CHECKPOINT_PAGES = 1_000


def batch_session(*, bulk: bool) -> None:
    """Settings for the transaction of a batch.

    On SQLite, the connection's page cache and, for a bulk backfill, rarer checkpoints (above).
    On PostgreSQL, the trigram GIN indexes, when they exist, keep this transaction's new search texts in their
    pending list (merged later by autovacuum or when the list fills) instead of merging them row by
    row, which is most of a batch's database time; searches scan the pending list meanwhile, so
    they stay correct. A bulk backfill's commit does not wait for its WAL to reach the disk: a
    crash of the server may lose the last batches, but never part of one (records and progress
    are one transaction), and the indexer indexes them again. (records.dialect: `page_cache_pragmas`,
    `trigram_search`, `asynchronous_commit`.)"""
    can = dialect(connection)
    with connection.cursor() as cursor:
        if can.page_cache_pragmas:
            cursor.execute(f"PRAGMA cache_size = -{SQLITE_CACHE_KIB}")
            cursor.execute(f"PRAGMA wal_autocheckpoint = "
                           f"{SQLITE_BULK_CHECKPOINT_PAGES if bulk else SQLITE_CHECKPOINT_PAGES}")
        if can.trigram_search:
            cursor.execute("SET LOCAL gin_pending_list_limit = '256MB'")
        if bulk and can.asynchronous_commit:
            cursor.execute("SET LOCAL synchronous_commit = off")


_Rows = Sequence[Sequence[Any]]


def _preparer(fields: Sequence[models.Field[Any, Any]]) -> Callable[[Sequence[Any]], Sequence[Any]]:
    converters = [(i, convert) for i, field in enumerate(fields) if (convert := _converter(field)) is not None]

    def prepared(row: Sequence[Any]) -> Sequence[Any]:
        if not converters:
            return row
        values = list(row)
        for i, convert in converters:
            values[i] = convert(values[i])
        return values

    return prepared


class ConvertedRows(list[Sequence[Any]]):
    """Rows already converted (`convert_rows`): inserted and updated as they are."""


def convert_rows(model: type[models.Model], columns: Sequence[str], rows: _Rows) -> ConvertedRows:
    """The rows with their values converted as the inserts and updates here would, ahead of
    them (in another process, say: a bulk backfill's reader)."""
    prepared = _preparer(_fields(model, columns))
    return ConvertedRows(prepared(row) for row in rows)


def _rows_preparer(fields: Sequence[models.Field[Any, Any]],
                   rows: _Rows) -> Callable[[Sequence[Any]], Sequence[Any]]:
    return (lambda row: row) if isinstance(rows, ConvertedRows) else _preparer(fields)


def _fields(model: type[models.Model], columns: Sequence[str]) -> list[models.Field[Any, Any]]:
    by_attname = {field.attname: field for field in model._meta.concrete_fields}
    return [by_attname[name] for name in columns]


def _copy(database: BaseDatabaseWrapper, model: type[models.Model], columns: Sequence[str], rows: _Rows,
          *, table: str | None = None) -> None:
    """COPY of the rows into the model's table (or `table`, with those columns) over the (open)
    connection of `database`, whose errors come out as Django's, as through its cursors."""
    fields = _fields(model, columns)
    prepared = _rows_preparer(fields, rows)
    statement = sql.SQL("COPY {} ({}) FROM STDIN").format(
        sql.Identifier(table or model._meta.db_table), sql.SQL(", ").join(sql.Identifier(str(f.column)) for f in fields)
    )
    with database.wrap_database_errors, database.connection.cursor() as cursor, cursor.copy(statement) as copy:
        for row in rows:
            copy.write_row(prepared(row))


def insert_rows(model: type[models.Model], columns: Sequence[str], rows: _Rows) -> None:
    """Inserts `rows` (tuples of the values of the fields named by `columns`, by attname) into
    the model's table."""
    if not rows:
        return
    if dialect(connection).copy_rows:
        connection.ensure_connection()
        _copy(connections[DEFAULT_DB_ALIAS], model, columns, rows)
        return
    fields = _fields(model, columns)
    prepared = _rows_preparer(fields, rows)
    table = model._meta.db_table
    names = [str(field.column) for field in fields]
    quote = connection.ops.quote_name
    statement_text = (f"INSERT INTO {quote(table)} ({', '.join(quote(name) for name in names)}) "
                      f"VALUES ({', '.join(['%s'] * len(names))})")
    with connection.cursor() as cursor:
        cursor.executemany(statement_text, [prepared(row) for row in rows])


def update_rows(model: type[models.Model], keys: Sequence[str], columns: Sequence[str], rows: _Rows) -> None:
    """Updates rows found by a unique key: each row holds the values of the `keys` fields, then
    of the `columns` fields to set (attnames). Django's bulk_update would build a CASE over every
    row per column instead."""
    if not rows:
        return
    fields = _fields(model, [*keys, *columns])
    table = connection.ops.quote_name(model._meta.db_table)
    names = [connection.ops.quote_name(str(field.column)) for field in fields]
    matches, sets = names[: len(keys)], names[len(keys) :]
    if dialect(connection).copy_rows:
        # COPY into a temporary table of those columns, then one UPDATE joining it: Django's
        # client-side binding would quote every value into the statement's text.
        staging = f"_update_{model._meta.db_table}_{zlib.crc32(' '.join(columns).encode()):08x}"  # one per shape
        quoted = connection.ops.quote_name(staging)
        connection.ensure_connection()
        with connection.cursor() as cursor:
            cursor.execute(f"CREATE TEMPORARY TABLE IF NOT EXISTS {quoted} ON COMMIT DELETE ROWS AS "
                           f"SELECT {', '.join(names)} FROM {table} WITH NO DATA")
            _copy(connections[DEFAULT_DB_ALIAS], model, [*keys, *columns], rows, table=staging)
            assignments = ", ".join(f"{name} = v.{name}" for name in sets)
            where = " AND ".join(f"{table}.{name} = v.{name}" for name in matches)
            # One index probe per row: the planner, without statistics of a table just loaded,
            # hashed the whole table for every batch instead (a cost that grows with the table).
            cursor.execute("SET LOCAL enable_hashjoin = off; SET LOCAL enable_mergejoin = off")
            cursor.execute(f"UPDATE {table} SET {assignments} FROM {quoted} v WHERE {where}")
            cursor.execute(f"RESET enable_hashjoin; RESET enable_mergejoin; TRUNCATE {quoted}")
        return
    prepared = _rows_preparer(fields, rows)
    values = [prepared(row) for row in rows]
    assignments = ", ".join(f"{name} = %s" for name in sets)
    where = " AND ".join(f"{name} = %s" for name in matches)
    with connection.cursor() as cursor:
        cursor.executemany(f"UPDATE {table} SET {assignments} WHERE {where}",
                           [[*row[len(keys) :], *row[: len(keys)]] for row in values])


class RowStream:
    """`insert_rows` in order, from a background thread on PostgreSQL (inline elsewhere).

    Used as a context manager inside the caller's transaction. Between `insert` and the end of
    the block the caller must not use the connection: the thread owns it. Leaving the block
    waits for every insert and raises the first failure (on an exception in the block, the
    inserts not yet started are dropped), so the transaction commits or rolls back after them."""

    def __init__(self) -> None:
        self._jobs: queue.SimpleQueue[tuple[type[models.Model], Sequence[str], _Rows] | None] = queue.SimpleQueue()
        self._thread: threading.Thread | None = None
        self._failure: BaseException | None = None
        self._cancelled = False

    def __enter__(self) -> Self:
        return self

    def insert(self, model: type[models.Model], columns: Sequence[str], rows: _Rows) -> None:
        if not rows:
            return
        if not dialect(connection).writes_in_the_background:
            insert_rows(model, columns, rows)
            return
        if self._failure is not None:
            raise self._failure
        if self._thread is None:
            connection.ensure_connection()
            # This thread's connection (django.db.connection would be the new thread's own).
            database = connections[DEFAULT_DB_ALIAS]
            self._thread = threading.Thread(target=self._run, args=(database,), name="indexer-copy", daemon=True)
            self._thread.start()
        self._jobs.put((model, columns, rows))

    def _run(self, database: BaseDatabaseWrapper) -> None:
        while (job := self._jobs.get()) is not None:
            if self._failure is not None or self._cancelled:
                continue
            try:
                _copy(database, *job)
            except BaseException as exc:  # re-raised in the caller's thread
                self._failure = exc

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None,
                 traceback: TracebackType | None) -> None:
        if self._thread is None:
            return
        self._cancelled = error is not None
        self._jobs.put(None)
        self._thread.join()
        self._thread = None
        if self._failure is not None and error is None:
            raise self._failure
