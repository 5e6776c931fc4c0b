"""`manage.py run_indexer`: mirror the configured deployment, backfill then follow."""

from __future__ import annotations

import signal
import threading
from typing import Any

from django.core.management.base import BaseCommand, CommandError

from indexer.locks import LockWaitInterrupted
from indexer.rpc import RpcError
from indexer.sync import Indexer, IndexerConfig, IndexerError


class Command(BaseCommand):
    help = "Index the bounty contract's events from BOUNTY_START_BLOCK, then follow the chain head (SIGTERM stops)."

    def handle(self, *args: Any, **options: Any) -> None:
        stop = threading.Event()
        for signum in (signal.SIGINT, signal.SIGTERM):
            signal.signal(signum, lambda *_: stop.set())
        try:
            indexer = Indexer(IndexerConfig.from_settings(), stop=stop)
            indexer.run()
        except LockWaitInterrupted:
            return
        except (IndexerError, RpcError) as exc:
            raise CommandError(str(exc)) from exc
