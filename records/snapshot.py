"""One snapshot of the database for reads that build on one another, whichever database it is."""

from __future__ import annotations

import math
from collections.abc import Iterator
from contextlib import contextmanager

from bountysite.databases import read_connection
from records.dialect import dialect

_INSIDE = "bounty_read_snapshot"  # set on a connection (one thread's) while a snapshot is open on it


@contextmanager
def read_snapshot(within: float | None = None, statements_within: float | None = None) -> Iterator[None]:
    """Runs the reads inside in one read-only transaction that sees the database as of its first
    read, without blocking the indexer (records.dialect, `repeatable_read_snapshot`): REPEATABLE
    READ, READ ONLY on PostgreSQL; on SQLite a deferred BEGIN, one WAL snapshot (Django's own
    transactions there are BEGIN IMMEDIATE, which takes the write lock). Inside a transaction
    already (a test's, say, or another snapshot), the reads share that one.

    `within` (seconds), on PostgreSQL: the server ends the transaction, and its session, if it is
    still idle in it, or still in one statement, that long from now (SET LOCAL, in the statement
    that opens it), so a reader whose thread or process is stuck cannot hold back VACUUM past it;
    `statements_within`, if shorter, bounds each statement (a web request's statement timeout).
    SQLite has no such timeout. The reads go to the database `reading_from` names
    (bountysite.databases), the primary by default."""
    connection = read_connection()
    if connection.in_atomic_block or getattr(connection, _INSIDE, False):
        yield
        return
    connection.ensure_connection()
    snapshot = dialect(connection)
    if snapshot.repeatable_read_snapshot:
        connection.set_autocommit(False)
        sql = "SET TRANSACTION ISOLATION LEVEL REPEATABLE READ, READ ONLY"
        if within is not None:
            idle = max(1, math.ceil(within * 1000))
            statement = max(1, math.ceil(min(within, statements_within or within) * 1000))
            sql += (f"; SELECT set_config('idle_in_transaction_session_timeout', '{idle}', true), "
                    f"set_config('statement_timeout', '{statement}', true)")
        with connection.cursor() as cursor:
            cursor.execute(sql)
    else:
        with connection.cursor() as cursor:
            cursor.execute("BEGIN DEFERRED")
    setattr(connection, _INSIDE, True)
    try:
        yield
    finally:
        setattr(connection, _INSIDE, False)
        if snapshot.repeatable_read_snapshot:
            connection.rollback()
            connection.set_autocommit(True)
        else:
            with connection.cursor() as cursor:
                cursor.execute("ROLLBACK")
