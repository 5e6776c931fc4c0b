"""One writer per deployment.

On PostgreSQL a session-level advisory lock, held on a connection of its own (Django may close
and reopen its connection; the lock must outlive that). On SQLite an exclusive `flock` on a
lock file beside the database. Either way a second indexer for the same deployment waits,
saying so, until the first one stops; the operating system releases both kinds of lock when a
process dies, so a crashed indexer never leaves a stale lock behind.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import logging
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import psycopg
from django.db import connections

from indexer.sessions import connecting, own_session
from records.dialect import dialect

logger = logging.getLogger(__name__)


LOCK_SESSION_TIMEOUT = 25  # seconds: how long a dead writer's host keeps the PostgreSQL lock at most


class LockWaitInterrupted(Exception):
    """Stopped while waiting for another indexer to release the deployment."""


def lock_key(chain_id: int, contract_address: str) -> int:
    """A signed 64-bit advisory-lock key for the deployment."""
    digest = hashlib.sha256(f"bounty-indexer:{chain_id}:{contract_address.lower()}".encode()).digest()
    return int.from_bytes(digest[:8], "big", signed=True)


@contextmanager
def deployment_lock(chain_id: int, contract_address: str, stop: threading.Event,
                    poll: float = 2.0, on_wait: Callable[[], None] = lambda: None) -> Iterator[None]:
    """Holds the deployment's writer lock for the duration of the block. While another process
    holds it, this one tries again every `poll` seconds, calling `on_wait` each time (a standby
    indexer announces itself there). So a standby takes over within `poll` seconds of the
    writer's end, however it ended."""
    connection = connections["default"]
    if dialect(connection).advisory_locks:
        with _advisory_lock(connection.get_connection_params(), lock_key(chain_id, contract_address), stop, poll,
                            on_wait):
            yield
    else:
        database = Path(str(connection.settings_dict["NAME"]))
        path = database.with_name(f"{database.name}.indexer-{chain_id}-{contract_address.lower()}.lock")
        with _file_lock(path, stop, poll, on_wait):
            yield


def _wait(stop: threading.Event, poll: float, what: str, first: list[bool], on_wait: Callable[[], None]) -> None:
    if first[0]:
        logger.warning("another indexer holds %s; standing by until it stops", what)
        first[0] = False
    on_wait()
    if stop.wait(poll):
        raise LockWaitInterrupted(f"stopped while waiting for {what}")


@contextmanager
def _advisory_lock(params: dict[str, Any], key: int, stop: threading.Event, poll: float,
                   on_wait: Callable[[], None]) -> Iterator[None]:
    params = {k: v for k, v in params.items() if k not in {"cursor_factory", "context"}}
    with connecting(stop):  # a stop ends the attempt; once open, the session is one a stop may cut
        session = own_session(psycopg.connect(**params, autocommit=True))
    with session as conn:
        # The lock lives as long as this session. If the writer's host dies or is cut off, no FIN
        # reaches PostgreSQL: the server's TCP keepalives and user timeout for this session end
        # it, releasing the lock, within about LOCK_SESSION_TIMEOUT seconds instead of the
        # system's default of two hours.
        conn.execute(f"SET tcp_keepalives_idle = 10; SET tcp_keepalives_interval = 5; SET tcp_keepalives_count = 3; "
                     f"SET tcp_user_timeout = {LOCK_SESSION_TIMEOUT * 1000}")
        first = [True]
        while True:
            row = conn.execute("SELECT pg_try_advisory_lock(%s)", (key,)).fetchone()
            if row is not None and row[0]:
                break
            _wait(stop, poll, f"PostgreSQL advisory lock {key}", first, on_wait)
        try:
            yield
        finally:
            with contextlib.suppress(psycopg.Error):  # a session gone (the server restarted) took its lock along
                conn.execute("SELECT pg_advisory_unlock(%s)", (key,))


@contextmanager
def _file_lock(path: Path, stop: threading.Event, poll: float, on_wait: Callable[[], None]) -> Iterator[None]:
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("a") as handle:
        first = [True]
        while True:
            try:
                fcntl.flock(handle.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                _wait(stop, poll, f"lock file {path}", first, on_wait)
        try:
            yield
        finally:
            fcntl.flock(handle.fileno(), fcntl.LOCK_UN)
