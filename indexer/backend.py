"""Where the indexer's two databases differ, said once: what each one can do, by the name of the
capability the indexer's modules ask about, not by the vendor's.

PostgreSQL is production's; SQLite the embedded default (one machine, one indexer). Any other
backend Django knows is treated as SQLite is: the portable way.
"""

from __future__ import annotations

from dataclasses import dataclass

from django.db import connections
from django.db.backends.base.base import BaseDatabaseWrapper


@dataclass(frozen=True)
class Backend:
    name: str
    # The writer lock is a session advisory lock the server drops with the session (indexer.locks);
    # otherwise a lock file beside the database.
    advisory_locks: bool
    # Rows are written with COPY from a thread of their own, and a bulk backfill commits its batches
    # from a writer thread, so that the server's work on one overlaps the next (indexer.bulk,
    # indexer.historical); otherwise executemany in the caller's thread.
    writes_in_the_background: bool
    # Secondary indexes are built on connections of their own beside the indexing, readers never
    # blocked, and builds in progress show in the server's catalog (indexer.indexes,
    # indexer.index_build); otherwise in one transaction in the indexer's own loop.
    builds_beside_writes: bool
    # Search runs on trigram GIN indexes, deferred with the others in a bulk backfill (records.search).
    trigram_indexes: bool
    # JSON documents read back whole are stored as `json` text, not parsed into `jsonb` (indexer.models).
    json_text_column: bool


POSTGRESQL = Backend("postgresql", advisory_locks=True, writes_in_the_background=True, builds_beside_writes=True,
                     trigram_indexes=True, json_text_column=True)
PORTABLE = Backend("sqlite", advisory_locks=False, writes_in_the_background=False, builds_beside_writes=False,
                   trigram_indexes=False, json_text_column=False)


def backend(connection: BaseDatabaseWrapper | None = None, *, vendor: str | None = None) -> Backend:
    """The capabilities of `connection`'s database (default: the default database's), or of
    `vendor`'s."""
    vendor = vendor or (connection or connections["default"]).vendor
    return POSTGRESQL if vendor == "postgresql" else PORTABLE
