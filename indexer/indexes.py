"""The record tables' secondary indexes, which a bulk backfill builds after it has caught up.

Every sort key but the long texts (records.kinds: `unindexed_sort_fields`) has a B-tree index and,
on PostgreSQL, `q` has a trigram GIN index per table.
Kept up to date row by row they are most of a backfill's database time; built once from the
finished tables they cost a fraction of that (how Ponder and Envio backfill too). So a backfill
that will add more rows than the tables already hold drops them first (`defer`) and builds
them when it has caught up with the safe head (`build`). Primary keys and the unique (deployment,
ID) keys stay: exactly-once and the indexer's own look-ups rely on them, and the API still
answers every query meanwhile, only slower.

`secondary_indexes()` is the one list: the record models' `Meta.indexes` and the trigram indexes
of migration records/0002. A test checks it against what the migrations create.

On PostgreSQL the build runs on connections of its own with a larger `maintenance_work_mem`; the
API keeps reading the tables. Beside other deployments' records it is `CREATE INDEX
CONCURRENTLY`, so that their indexers keep writing; a crash during such a build leaves an
INVALID index behind, which PostgreSQL maintains on writes but never uses for reads: `repair`
drops those, and the next build creates them again.
"""

from __future__ import annotations

import logging
import os
import queue
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

import psycopg
from django.conf import settings
from django.db import OperationalError, connection, connections, models, transaction
from django.db.backends.base.schema import BaseDatabaseSchemaEditor
from django.db.models import Sum
from django.utils import timezone

from indexer.models import IndexState, IndexStateChoice
from records.dialect import dialect
from records.kinds import KINDS
from records.models import Deployment

logger = logging.getLogger(__name__)

RECORD_MODELS: tuple[type[models.Model], ...] = tuple(kind.model for kind in KINDS)
# Connections of a plain (not concurrent) build on PostgreSQL: one per core, at least two.
BUILD_CONNECTIONS = max(2, os.cpu_count() or 2)
TRIGRAM_SUFFIX = "_search_trgm"


@dataclass(frozen=True)
class SecondaryIndex:
    """One deferrable index: a Django index of a record model, or a table's trigram index."""

    model: type[models.Model]
    index: models.Index | None  # None: the trigram index of `search_text` (PostgreSQL only)

    @property
    def table(self) -> str:
        return str(self.model._meta.db_table)

    @property
    def name(self) -> str:
        return str(self.index.name) if self.index is not None else f"{self.table}{TRIGRAM_SUFFIX}"

    def create_sql(self, editor: BaseDatabaseSchemaEditor, *, concurrently: bool) -> str:
        """The CREATE INDEX statement, from the default database's schema editor."""
        if self.index is None:
            how = " CONCURRENTLY" if concurrently else ""
            return (f"CREATE INDEX{how} IF NOT EXISTS {self.name} ON {self.table} "
                    "USING gin (search_text gin_trgm_ops)")
        if concurrently:  # PostgreSQL's schema editor only
            return str(self.index.create_sql(self.model, editor, concurrently=True))
        return str(self.index.create_sql(self.model, editor))


def create_statements(indexes: list[SecondaryIndex], *, concurrently: bool) -> list[str]:
    """The indexes' CREATE INDEX statements, from one schema editor (on SQLite each one checks
    every foreign key of the database when it closes)."""
    with connection.schema_editor(collect_sql=True, atomic=False) as editor:
        return [index.create_sql(editor, concurrently=concurrently) for index in indexes]


def secondary_indexes() -> list[SecondaryIndex]:
    """The deferrable indexes on the default database."""
    indexes = [SecondaryIndex(model, index) for model in RECORD_MODELS for index in model._meta.indexes]
    if dialect().trigram_search:
        indexes += [SecondaryIndex(model, None) for model in RECORD_MODELS]
    return indexes


def existing_indexes() -> dict[str, bool]:
    """Index name -> valid, for every index on the record tables but the primary keys."""
    tables = [str(model._meta.db_table) for model in RECORD_MODELS]
    with connection.cursor() as cursor:
        if dialect(connection).index_validity:
            cursor.execute(
                "SELECT c.relname, i.indisvalid FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid "
                "JOIN pg_class t ON t.oid = i.indrelid "
                "WHERE t.relname = ANY(%s) AND NOT i.indisprimary AND t.relnamespace = 'public'::regnamespace",
                [tables],
            )
            return {name: bool(valid) for name, valid in cursor.fetchall()}
        cursor.execute(
            f"SELECT name FROM sqlite_master WHERE type = 'index' AND tbl_name IN ({', '.join(['%s'] * len(tables))})",
            tables,
        )
        return {name: True for (name,) in cursor.fetchall()}


def missing_indexes() -> list[SecondaryIndex]:
    """The deferrable indexes that do not exist or are invalid."""
    present = existing_indexes()
    return [index for index in secondary_indexes() if not present.get(index.name, False)]


def index_state() -> IndexStateChoice:
    row = IndexState.objects.filter(pk=IndexState.SINGLETON).values_list("state", flat=True).first()
    return IndexStateChoice(row) if row else IndexStateChoice.READY


def deferred_by() -> int | None:
    """The deployment whose backfill deferred the indexes, if any."""
    return IndexState.objects.filter(pk=IndexState.SINGLETON).values_list("deployment_id", flat=True).first()


def _set_state(state: IndexStateChoice, deployment: Deployment | None) -> None:
    IndexState.objects.update_or_create(pk=IndexState.SINGLETON, defaults={
        "state": state, "deployment": deployment, "changed_at": timezone.now()})


def _builds_in_progress() -> int:
    """Index builds running on the record tables now (PostgreSQL; SQLite's hold its write lock)."""
    if not dialect().builds_beside_writes:
        return 0
    with connection.cursor() as cursor:
        cursor.execute("SELECT count(*) FROM pg_stat_progress_create_index p JOIN pg_class t ON t.oid = p.relid "
                       "WHERE t.relname = ANY(%s)", [[str(model._meta.db_table) for model in RECORD_MODELS]])
        row = cursor.fetchone()
    return int(row[0]) if row else 0


def _drop_invalid() -> list[str]:
    """Drops the INVALID indexes on the record tables (an interrupted concurrent build's), which
    then count as missing; returns their names."""
    invalid = [name for name, valid in existing_indexes().items() if not valid]
    with connection.cursor() as cursor:
        for name in invalid:
            logger.warning("index %s was left invalid by an interrupted build; dropping it to build it again", name)
            cursor.execute(f"DROP INDEX IF EXISTS {connection.ops.quote_name(name)}")
    return invalid


def _wait_for_builds(stop: threading.Event, patience: float = 30.0) -> None:
    """Waits until no build runs on the tables: the server cancels the build of a process that
    died within a second (client_connection_check_interval)."""
    deadline = time.monotonic() + patience
    while _builds_in_progress() and time.monotonic() < deadline and not stop.wait(0.2):
        pass


def repair() -> list[str]:
    """After a crash during a build: drops the indexes it left INVALID (PostgreSQL) and marks the
    build as not running; returns the names dropped. Leaves everything as it is while a build
    runs (another deployment's indexer may be building)."""
    if _builds_in_progress():
        return []
    invalid = _drop_invalid()
    if index_state() == IndexStateChoice.BUILDING:
        _set_state(IndexStateChoice.DEFERRED, None)
    return invalid


def defer(deployment: Deployment) -> int:
    """Drops the deferrable indexes for `deployment`'s backfill; returns how many it dropped."""
    present = existing_indexes()
    dropped = [index for index in secondary_indexes() if index.name in present]
    with transaction.atomic(), connection.cursor() as cursor:
        for index in dropped:
            cursor.execute(f"DROP INDEX IF EXISTS {connection.ops.quote_name(index.name)}")
        if index_state() == IndexStateChoice.READY:  # else another backfill deferred them: it builds them
            _set_state(IndexStateChoice.DEFERRED, deployment)
    return len(dropped)


class BuildStopped(Exception):
    """The build was cancelled because the indexer stops; the next start builds the rest."""


def _build_on_sqlite(statements: list[str], stop: threading.Event) -> None:
    """Builds in one transaction; when `stop` is set a watcher interrupts the statement under way
    (sqlite3's `interrupt`, made to be called from another thread) and nothing is kept."""
    with transaction.atomic(), connection.cursor() as cursor:
        raw = connection.connection
        finished = threading.Event()

        def watch() -> None:
            while not finished.wait(0.1):
                if stop.is_set():
                    raw.interrupt()
                    return

        watcher = threading.Thread(target=watch, name="index-build-watch", daemon=True)
        watcher.start()
        try:
            for statement in statements:
                if stop.is_set():
                    raise BuildStopped("the index build was cancelled: the indexer is stopping")
                cursor.execute(statement)
        except OperationalError as exc:
            if stop.is_set():
                raise BuildStopped("the index build was cancelled: the indexer is stopping") from exc
            raise
        finally:
            finished.set()
            watcher.join()


def _build_on_postgresql(jobs: list[list[str]], workers: int, stop: threading.Event) -> None:
    """Runs the jobs (each a list of statements, run in order) on `workers` connections of their
    own, in autocommit (CONCURRENTLY refuses a transaction), each taking the next job as it is
    free, with the larger maintenance_work_mem for those sessions only. When `stop` is set the
    server cancels the statements under way (an index a concurrent build leaves INVALID is
    repaired at the next start; a plain build leaves nothing)."""
    params = {k: v for k, v in connections["default"].get_connection_params().items()
              if k not in {"cursor_factory", "context"}}
    failures: list[BaseException] = []
    backends: list[int] = []
    waiting = queue.SimpleQueue[list[str]]()
    for job in jobs:
        waiting.put(job)

    def run() -> None:
        try:
            with psycopg.connect(**params, autocommit=True) as conn:
                backends.append(conn.info.backend_pid)
                conn.execute(f"SET maintenance_work_mem = '{int(settings.BOUNTY_INDEX_BUILD_MEMORY_MB)}MB'".encode())
                # Should this process die, the server notices within a second and cancels the build
                # (which leaves an INVALID index for `repair`) instead of finishing it unattended.
                conn.execute(b"SET client_connection_check_interval = '1s'")
                while not failures and not stop.is_set():
                    try:
                        job = waiting.get_nowait()
                    except queue.Empty:
                        return
                    for statement in job:
                        if stop.is_set():
                            return
                        conn.execute(statement.encode())
        except BaseException as exc:  # raised in the caller's thread
            failures.append(exc)

    # Daemons: one still waiting for a database that does not answer when the indexer stops must
    # not hold up the process's exit (the server cancels its build once the process is gone).
    threads = [threading.Thread(target=run, name=f"index-build-{n}", daemon=True)
               for n in range(min(workers, len(jobs)))]
    for thread in threads:
        thread.start()
    while any(thread.is_alive() for thread in threads):
        if stop.wait(0.1):
            with psycopg.connect(**params, autocommit=True) as conn:
                for pid in backends:
                    conn.execute("SELECT pg_cancel_backend(%s)", (pid,))
            for thread in threads:
                thread.join()
            raise BuildStopped("the index build was cancelled: the indexer is stopping")
    if failures:
        raise failures[0]


def _postgresql_jobs(missing: list[SecondaryIndex], *, concurrently: bool) -> list[list[str]]:
    """The build's jobs, the longest first: the trigram indexes by table size, then the B-trees.
    Concurrent builds on one table wait for each other, so then a table's statements are one
    job; plain builds of one table run side by side, so then each statement is a job."""
    sizes = Deployment.objects.aggregate(**{str(kind.model._meta.db_table): Sum(kind.total_field) for kind in KINDS})
    statements = sorted(zip(missing, create_statements(missing, concurrently=concurrently), strict=True),
                        key=lambda pair: (pair[0].index is not None, -(sizes.get(pair[0].table) or 0)))
    if not concurrently:
        return [[statement] for _, statement in statements]
    by_table: dict[str, list[str]] = {}
    for index, statement in statements:
        by_table.setdefault(index.table, []).append(statement)
    return list(by_table.values())


def build(deployment: Deployment | None = None, *, report: Callable[[str], None] = logger.info,
          stop: threading.Event | None = None, concurrently: bool = True) -> float:
    """Creates every missing deferrable index; returns the seconds it took.

    On PostgreSQL, `concurrently` builds them without blocking writes to the tables (one table
    at a time each, a third slower); otherwise they are built side by side on as many connections
    as there are cores, and writes to the record tables wait until each is done (reads do not)."""
    started = time.monotonic()
    missing = missing_indexes()
    if not missing:
        if index_state() != IndexStateChoice.READY:
            _set_state(IndexStateChoice.READY, None)
        return 0.0
    _set_state(IndexStateChoice.BUILDING, deployment)
    report(f"index build: creating {len(missing)} indexes on the record tables")
    _wait_for_builds(stop or threading.Event())
    _drop_invalid()
    try:
        if dialect().builds_beside_writes:
            jobs = _postgresql_jobs(missing, concurrently=concurrently)
            _build_on_postgresql(jobs, len(jobs) if concurrently else BUILD_CONNECTIONS, stop or threading.Event())
        else:
            _build_on_sqlite(create_statements(missing, concurrently=False), stop or threading.Event())
    except BaseException:
        _set_state(IndexStateChoice.DEFERRED, deployment)
        raise
    seconds = time.monotonic() - started
    _set_state(IndexStateChoice.READY, None)
    report(f"index build: done, {len(missing)} indexes in {seconds:.1f} s")
    return seconds
