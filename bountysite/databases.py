"""Which database a query goes to: the primary (DATABASE_URL), or the replica a read chose.

With DATABASE_REPLICA_URLS, settings add one alias per replica (`replica1`, `replica2`, ...).
Nothing reads from one unless it asks: the read side names its database for a stretch of work
with `reading_from` (records.replicas chooses it), and Django's ORM asks the router, which answers
with that database for reads and the primary for every write. Code that never asks (the admin,
sessions, sign-in throttles, the indexer, /health's indexer state) reads the primary, where its
own writes are. The choice is a context variable: it follows a request into the threads Django
and Channels run its database work on (asgiref copies the context), and no other request sees it.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any

from django.db import DEFAULT_DB_ALIAS, connections
from django.db.backends.base.base import BaseDatabaseWrapper

PRIMARY = DEFAULT_DB_ALIAS

_reading_from: ContextVar[str] = ContextVar("reading_from", default=PRIMARY)


@contextmanager
def reading_from(alias: str) -> Iterator[str]:
    """Reads inside go to the database `alias` (the primary's or a replica's)."""
    token = _reading_from.set(alias)
    try:
        yield alias
    finally:
        _reading_from.reset(token)


def read_alias() -> str:
    """The database reads go to here: the one `reading_from` named, or the primary."""
    return _reading_from.get()


def read_connection() -> BaseDatabaseWrapper:
    """The connection reads go to here (`read_alias`), for the read side's raw SQL."""
    return connections[_reading_from.get()]


def replica_aliases() -> list[str]:
    """The replicas' aliases, as settings made them from DATABASE_REPLICA_URLS."""
    return [alias for alias in connections.settings if alias != PRIMARY]


class ReadRouter:
    """Django's database router: reads where `reading_from` says, writes and migrations on the primary."""

    def db_for_read(self, model: type[Any], **hints: Any) -> str:
        return _reading_from.get()

    def db_for_write(self, model: type[Any], **hints: Any) -> str:
        return PRIMARY

    def allow_relation(self, obj1: Any, obj2: Any, **hints: Any) -> bool:
        return True  # every database holds the same rows: a replica is a copy of the primary

    def allow_migrate(self, db: str, app_label: str, **hints: Any) -> bool:
        return db == PRIMARY  # a replica takes its schema from the primary's WAL
