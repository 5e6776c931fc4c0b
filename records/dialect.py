"""Where the two databases differ, said once: what each one can do, by the name of the capability
the code asks about, not by the vendor's. `dialect(connection)` answers for a connection.

PostgreSQL is production's; SQLite the embedded default (one machine, one indexer). The settings
accept no other database (bountysite.settings), and any other would be answered as SQLite is.

It is a data module of `records` (no model, no read side) because both apps ask it: records'
fields, search and read snapshots, and the indexer's writes, locks and indexes; the indexer may
import records' data modules, never the other way round (tests/test_import_graph.py).
"""

from __future__ import annotations

from dataclasses import dataclass

from django.db import connections
from django.db.backends.base.base import BaseDatabaseWrapper


@dataclass(frozen=True)
class Dialect:
    # Text compares and sorts byte-wise only with this collation named on the column ("C");
    # None: the default collation already does (SQLite's BINARY). Asked by records.fields.
    bytewise_collation: str | None
    # `q` is a LIKE that a trigram GIN index per record table serves, deferred with the other
    # indexes in a bulk backfill (records.search, indexer.indexes), and whose pending list a batch
    # enlarges (indexer.bulk.batch_session); otherwise instr(), which SQLite's LIKE needs (it
    # refuses patterns over 50,000 bytes, and inline metadata makes long search terms legitimate).
    trigram_search: bool
    # A read-only REPEATABLE READ transaction sees one snapshot from its first read, without
    # blocking writers; otherwise a deferred BEGIN, one WAL snapshot on SQLite (records.snapshot).
    repeatable_read_snapshot: bool
    # The writer lock is a session advisory lock the server drops with the session (indexer.locks);
    # otherwise a lock file beside the database.
    advisory_locks: bool
    # Rows are inserted with COPY, and a batch's updates are COPYed into a temporary table joined
    # by one UPDATE (indexer.bulk); otherwise executemany.
    copy_rows: bool
    # The COPYs run from a thread of their own, and a bulk backfill commits its batches from a
    # writer thread, so that the server's work on one overlaps the next (indexer.bulk.RowStream,
    # indexer.historical); otherwise in the caller's thread.
    writes_in_the_background: bool
    # The bulk writes hand datetimes over as naive text in the connection's zone, converted by
    # indexer.bulk itself as SQLite's adapter would (without its per-value settings look-ups);
    # otherwise as aware datetimes, which psycopg sends as they are.
    datetimes_as_text: bool
    # The connection's page cache and how many pages its write-ahead log holds before a checkpoint
    # are PRAGMAs, set for each batch (indexer.bulk.batch_session).
    page_cache_pragmas: bool
    # A transaction may commit without waiting for its WAL to reach the disk (synchronous_commit
    # off): a bulk backfill's batches do (indexer.bulk.batch_session).
    asynchronous_commit: bool
    # Secondary indexes are built on connections of their own beside the indexing, readers never
    # blocked, and builds in progress show in the server's catalog (indexer.indexes,
    # indexer.index_build); otherwise in one transaction in the indexer's own loop.
    builds_beside_writes: bool
    # The catalog says whether each index is valid (pg_index): a concurrent build cut short leaves
    # an INVALID one behind, which indexer.indexes drops and builds again; otherwise every index
    # listed (sqlite_master) is whole.
    index_validity: bool
    # JSON documents read back whole are stored as `json` text, not parsed into `jsonb` (indexer.models).
    json_text_column: bool


POSTGRESQL = Dialect(
    bytewise_collation="C", trigram_search=True, repeatable_read_snapshot=True, advisory_locks=True, copy_rows=True,
    writes_in_the_background=True, datetimes_as_text=False, page_cache_pragmas=False, asynchronous_commit=True,
    builds_beside_writes=True, index_validity=True, json_text_column=True,
)
SQLITE = Dialect(
    bytewise_collation=None, trigram_search=False, repeatable_read_snapshot=False, advisory_locks=False,
    copy_rows=False, writes_in_the_background=False, datetimes_as_text=True, page_cache_pragmas=True,
    asynchronous_commit=False, builds_beside_writes=False, index_validity=False, json_text_column=False,
)


def dialect(connection: BaseDatabaseWrapper | None = None) -> Dialect:
    """The capabilities of `connection`'s database (default: the default database's)."""
    return POSTGRESQL if (connection or connections["default"]).vendor == "postgresql" else SQLITE
