"""`manage.py run_indexer`: mirror the configured deployment, backfill then follow."""

from __future__ import annotations

import gc
import logging
import threading
from typing import Any

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.db import DatabaseError, connection
from django.db.migrations.executor import MigrationExecutor

from bountysite.stopping import SignalStop
from indexer.config import IndexerConfig
from indexer.errors import IndexerError, RpcError, Stopped
from indexer.rpc import interrupt_wait
from indexer.sessions import connecting, interrupt_connecting, let_go_on_stop
from indexer.sync import Indexer

logger = logging.getLogger(__name__)


class Command(BaseCommand):
    help = ("Index the bounty contract's events from BOUNTY_START_BLOCK, then follow the chain head "
            "(SIGTERM or SIGINT stops it within a second, with exit code 0).")

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--metrics-port", type=int, default=None,
                            help="serve the Prometheus metrics on this port (overrides BOUNTY_INDEXER_METRICS_PORT)")

    def handle(self, *args: Any, **options: Any) -> None:
        # Every wait of the indexer watches `stop`, except a wait for the node's answer and a
        # connection attempt to the database, which only an exception raised in the signal handler
        # ends (indexer.rpc, interrupt_wait; indexer.sessions, interrupt_connecting).
        stop = SignalStop(then=interrupt_waits)
        stopped = threading.Event()
        # What is under way on the database when a stop comes gets DATABASE_STOP_PATIENCE to end:
        # then the sessions are cut, so that a database that does not answer holds nothing up.
        let_go_on_stop(stop, stopped)
        try:
            require_migrated_database(stop)
            indexer = Indexer(IndexerConfig.from_settings(), stop=stop)
            port: int | None = options["metrics_port"] or settings.BOUNTY_INDEXER_METRICS_PORT
            if port is not None:  # served by a daemon thread, which ends with the process
                address: str = settings.BOUNTY_INDEXER_METRICS_ADDRESS
                try:
                    indexer.metrics.serve(port, address)
                except OSError as exc:
                    raise CommandError(f"cannot serve the metrics on {address} port {port}: {exc}") from exc
            indexer.run()
        except Stopped as stopped_early:  # before the indexer ran: connecting to the database
            logger.info("%s", stopped_early)
            logger.info("indexer stopped")
        except (IndexerError, RpcError) as exc:
            raise CommandError(str(exc)) from exc
        finally:
            stopped.set()
        # The process exits now: the interpreter's last garbage collection would walk the whole
        # heap (Django, web3: 0.5-1 s of a stop's second) to free what the exit frees anyway.
        gc.freeze()


def require_migrated_database(stop: threading.Event) -> None:
    """Stops with what to do when the database cannot be reached or lacks the service's tables,
    instead of the first query's traceback."""
    try:
        with connecting(stop):
            connection.ensure_connection()
        executor = MigrationExecutor(connection)
        unapplied = executor.migration_plan(executor.loader.graph.leaf_nodes())
    except DatabaseError as exc:
        raise CommandError(f"cannot use the database of DATABASE_URL: {exc}".strip()) from exc
    if unapplied:
        names = ", ".join(f"{migration.app_label}.{migration.name}" for migration, _ in unapplied[:3])
        more = f" and {len(unapplied) - 3} more" if len(unapplied) > 3 else ""
        raise CommandError(f"the database is not migrated ({names}{more} not applied): "
                           "run `manage.py migrate` first")


def interrupt_waits() -> None:
    """In the signal handler: ends a wait for the node's answer or a database connection under way."""
    interrupt_wait()
    interrupt_connecting()
