"""PostgreSQL's `statement_timeout` for the web processes only (BOUNTY_STATEMENT_TIMEOUT_MS).

A request's query that runs past it is cancelled by the server, and the API answers 503 with
Retry-After (records.api.errors), so no client holds a worker, a pooled connection or a lock
for longer. The indexer must not have it: its index builds and COPYs run for minutes. The web
entry points (bountysite/asgi.py, bountysite/wsgi.py) call `install`; `manage.py` never does.

It is set once per physical connection, when the pool first hands it out (the pool keeps the
session's settings); SQLite has no such timeout (docs/operations.md, The read API)."""

from __future__ import annotations

import weakref
from typing import Any

from django.conf import settings
from django.db.backends.base.base import BaseDatabaseWrapper
from django.db.backends.signals import connection_created

QUERY_CANCELED = "57014"  # PostgreSQL's SQLSTATE for a statement cancelled (by its timeout among others)

_bounded: weakref.WeakSet[Any] = weakref.WeakSet()  # the driver's connections that have it


def _bound(sender: Any, connection: BaseDatabaseWrapper, **kwargs: Any) -> None:
    timeout: int = settings.BOUNTY_STATEMENT_TIMEOUT_MS
    raw = connection.connection
    if connection.vendor != "postgresql" or not timeout or raw in _bounded:
        return
    with raw.cursor() as cursor:
        cursor.execute("SELECT set_config('statement_timeout', %s, false)", [f"{timeout}ms"])
    _bounded.add(raw)


def install() -> None:
    """Bounds every statement of this process's database connections from now on."""
    connection_created.connect(_bound, dispatch_uid="bountysite.statement_timeout")


def timed_out(error: BaseException) -> bool:
    """Whether a database error is a statement the server cancelled (past statement_timeout)."""
    return getattr(error.__cause__, "sqlstate", None) == QUERY_CANCELED
