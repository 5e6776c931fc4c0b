"""A database thread of its own for an event loop's reads and writes (the delivery worker, the
moderators' watcher): Django's connections belong to a thread, and this one's is closed after a
DatabaseError so that the next call connects anew (PostgreSQL restarted). The outage and the
return are each logged once, with what waits meanwhile."""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any, TypeVar

from django.db import DatabaseError, close_old_connections, connection

logger = logging.getLogger(__name__)

T = TypeVar("T")


class DatabaseThread:
    def __init__(self, name: str, waiting: str) -> None:
        """`name` names the thread; `waiting` says what waits while the database is away."""
        self._executor = ThreadPoolExecutor(1, thread_name_prefix=name)
        self._waiting = waiting
        self._down_since: float | None = None

    async def run(self, call: Callable[..., T], *args: Any) -> T:
        def run() -> T:
            close_old_connections()
            try:
                return call(*args)
            except DatabaseError:
                connection.close()  # a new one next time (PostgreSQL restarted)
                raise
        return await asyncio.get_running_loop().run_in_executor(self._executor, run)

    def down(self, error: DatabaseError) -> None:
        if self._down_since is None:
            self._down_since = time.monotonic()
            logger.warning("the database is unreachable (%s); %s", type(error).__name__, self._waiting)

    def back(self) -> None:
        if self._down_since is not None:
            logger.warning("the database is back after %.0f s", time.monotonic() - self._down_since)
            self._down_since = None

    def shutdown(self) -> None:
        self._executor.shutdown(wait=False)
