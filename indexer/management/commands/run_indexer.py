"""`manage.py run_indexer`: mirror the configured deployment, backfill then follow."""

from __future__ import annotations

import gc
import signal
import threading
from typing import Any

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.db import DatabaseError, connection
from django.db.migrations.executor import MigrationExecutor

from indexer.config import IndexerConfig
from indexer.errors import IndexerError, RpcError
from indexer.rpc import interrupt_wait
from indexer.sync import Indexer


class Command(BaseCommand):
    help = ("Index the bounty contract's events from BOUNTY_START_BLOCK, then follow the chain head "
            "(SIGTERM or SIGINT stops it within a second, with exit code 0).")

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--metrics-port", type=int, default=None,
                            help="serve the Prometheus metrics on this port (overrides BOUNTY_INDEXER_METRICS_PORT)")

    def handle(self, *args: Any, **options: Any) -> None:
        stop = threading.Event()

        def on_signal(signum: int, frame: object) -> None:
            # Every wait of the indexer watches `stop`, except a wait for the node's answer,
            # which only an exception raised here ends (indexer.rpc, interrupt_wait). Once set,
            # `stop` is not set again: Event.set takes a lock the interrupted code may hold.
            if stop.is_set():
                return
            stop.set()
            interrupt_wait()

        for signum in (signal.SIGINT, signal.SIGTERM):
            signal.signal(signum, on_signal)
        require_migrated_database()
        try:
            indexer = Indexer(IndexerConfig.from_settings(), stop=stop)
            port: int | None = options["metrics_port"] or settings.BOUNTY_INDEXER_METRICS_PORT
            if port is not None:  # served by a daemon thread, which ends with the process
                address: str = settings.BOUNTY_INDEXER_METRICS_ADDRESS
                try:
                    indexer.metrics.serve(port, address)
                except OSError as exc:
                    raise CommandError(f"cannot serve the metrics on {address} port {port}: {exc}") from exc
            indexer.run()
        except (IndexerError, RpcError) as exc:
            raise CommandError(str(exc)) from exc
        # The process exits now: the interpreter's last garbage collection would walk the whole
        # heap (Django, web3: 0.5-1 s of a stop's second) to free what the exit frees anyway.
        gc.freeze()


def require_migrated_database() -> None:
    """Stops with what to do when the database cannot be reached or lacks the service's tables,
    instead of the first query's traceback."""
    try:
        executor = MigrationExecutor(connection)
        unapplied = executor.migration_plan(executor.loader.graph.leaf_nodes())
    except DatabaseError as exc:
        raise CommandError(f"cannot use the database of DATABASE_URL: {exc}".strip()) from exc
    if unapplied:
        names = ", ".join(f"{migration.app_label}.{migration.name}" for migration, _ in unapplied[:3])
        more = f" and {len(unapplied) - 3} more" if len(unapplied) > 3 else ""
        raise CommandError(f"the database is not migrated ({names}{more} not applied): "
                           "run `manage.py migrate` first")
