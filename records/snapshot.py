"""One snapshot of the database for reads that build on one another, whichever database it is."""

from __future__ import annotations

import math
from collections.abc import Iterator
from contextlib import contextmanager

from django.db import connection

from records.dialect import dialect


@contextmanager
def read_snapshot() -> Iterator[None]:
    """Runs the reads inside in one read-only transaction that sees the database as of its first
    read, without blocking the indexer (records.dialect, `repeatable_read_snapshot`): REPEATABLE
    READ, READ ONLY on PostgreSQL; on SQLite a deferred BEGIN, one WAL snapshot (Django's own
    transactions there are BEGIN IMMEDIATE, which takes the write lock). Inside a transaction
    already (a test's, say), the reads share that one."""
    if connection.in_atomic_block:
        yield
        return
    connection.ensure_connection()
    snapshot = dialect(connection)
    if snapshot.repeatable_read_snapshot:
        connection.set_autocommit(False)
        with connection.cursor() as cursor:
            cursor.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ, READ ONLY")
    else:
        with connection.cursor() as cursor:
            cursor.execute("BEGIN DEFERRED")
    try:
        yield
    finally:
        if snapshot.repeatable_read_snapshot:
            connection.rollback()
            connection.set_autocommit(True)
        else:
            with connection.cursor() as cursor:
                cursor.execute("ROLLBACK")


def end_snapshot_within(seconds: float) -> None:
    """Inside `read_snapshot`, on PostgreSQL: the server ends the transaction, and its session, if
    it is still idle in it, or still in one statement, `seconds` from now (SET LOCAL: until its end;
    called again, from then). So a reader whose thread or process is stuck cannot hold back
    VACUUM past its deadline. Nothing on SQLite, which has no such timeout."""
    if not dialect(connection).repeatable_read_snapshot:
        return
    milliseconds = max(1, math.ceil(seconds * 1000))
    with connection.cursor() as cursor:
        cursor.execute("SELECT set_config('idle_in_transaction_session_timeout', %s, true), "
                       "set_config('statement_timeout', %s, true)", [str(milliseconds), str(milliseconds)])
