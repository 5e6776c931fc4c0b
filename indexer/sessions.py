"""The indexer's sessions with the database, and how a stop lets go of them when the database does
not answer (a server killed, a host gone silent, a failover under way): SIGTERM stops `run_indexer`
within a second all the same.

A connection attempt of the main thread (`connecting`: the reconnection after an outage, the
writer lock's session, the first connection) waits in the pool or in the server's handshake,
where only an exception raised by the SIGTERM handler ends it (`interrupt_connecting`, as
indexer.rpc's `interrupt_wait` for the node's answer).

What is under way on an open session when the stop comes (a query, a commit, a COPY, on any thread)
is given DATABASE_STOP_PATIENCE to end. Past it, `let_go_on_stop` shuts down the sockets of the
process's sessions, Django's of every thread and the ones opened beside it (`own_session`): every
wait on them ends at once with an OperationalError, and a thread still waiting for the database
otherwise (`join_or_let_go`) is left to end with the process. Nothing is lost: each batch is one
transaction, and one not committed by then is written again at the next start.
"""

from __future__ import annotations

import contextlib
import logging
import os
import socket
import threading
import weakref
from collections.abc import Iterator
from typing import Any, TypeVar

import psycopg
from django.db.backends.base.base import BaseDatabaseWrapper
from django.db.backends.signals import connection_created

from indexer.errors import Stopped

logger = logging.getLogger(__name__)

DATABASE_STOP_PATIENCE = 0.5  # seconds a stop waits for the database's answers before letting go of it


# ---------------------------------------------------------------- connection attempts

_connecting = False  # the main thread waits for a connection to the database (see interrupt_connecting)


def interrupt_connecting() -> None:
    """For the SIGTERM handler: raises Stopped if the main thread is waiting for a connection to
    the database (`connecting`), ending the wait at once instead of at the pool's or the
    connection's timeout."""
    global _connecting
    if _connecting:
        _connecting = False  # once: a second signal must not raise again in the clean-up
        raise Stopped("stopped while connecting to the database")


@contextlib.contextmanager
def connecting(stop: threading.Event) -> Iterator[None]:
    """Around a connection attempt: on the main thread a stop request ends it (Stopped), one
    made just before it included."""
    if threading.current_thread() is not threading.main_thread():  # signals reach the main thread only
        yield
        return
    global _connecting
    try:
        _connecting = True
        if stop.is_set():  # set just before the flag was
            raise Stopped("stopped before connecting to the database")
        yield
    finally:
        _connecting = False


# ---------------------------------------------------------------- the sessions, and letting go of them

_Session = TypeVar("_Session", bound="psycopg.Connection[Any]")
_registry = threading.Lock()
_sessions: weakref.WeakSet[psycopg.Connection[Any]] = weakref.WeakSet()  # opened beside Django's
_wrappers: weakref.WeakSet[BaseDatabaseWrapper] = weakref.WeakSet()  # Django's connections, of every thread
_let_go = threading.Event()  # set once a stop has let go of the database


def own_session(session: _Session) -> _Session:
    """A session opened beside Django's (the writer lock's), for `let_go_of_the_database`."""
    with _registry:
        _sessions.add(session)
    return session


def _connection_created(sender: object, connection: BaseDatabaseWrapper, **kwargs: object) -> None:
    with _registry:
        _wrappers.add(connection)


connection_created.connect(_connection_created, dispatch_uid="indexer.sessions")


def let_go_of_the_database() -> int:
    """Closes Django's connection pools, and shuts down the socket of each of this process's
    PostgreSQL sessions, Django's (of every thread) and the ones `own_session` registered: a wait
    on one ends at once with an OperationalError, and so does any later use, a new connection
    included. Returns how many of the sessions were waiting for the server's answer."""
    _let_go.set()
    with _registry:
        wrappers = list(_wrappers)
        sessions = [*_sessions, *(wrapper.connection for wrapper in wrappers)]
    _close_pools(wrappers)
    return sum(_shut_down(session) for session in sessions if isinstance(session, psycopg.Connection))


class _WorkersLeftBehind(logging.Filter):
    """psycopg_pool's warning that it could not stop a pool's threads within the 0 s it was given:
    they are left to end with the process, one perhaps connecting to the server that is gone."""

    def filter(self, record: logging.LogRecord) -> bool:
        return not record.getMessage().startswith("couldn't stop thread")


def _close_pools(wrappers: list[BaseDatabaseWrapper]) -> None:
    """A connection asked of a closed pool fails at once (PoolClosed, an OperationalError), and so
    does one waited for: none waits for the server's handshake, nor for an idle connection's check
    on a socket that is not answered."""
    pools = {id(pool): pool for wrapper in wrappers if (pool := getattr(wrapper, "pool", None)) is not None}
    if pools:
        logging.getLogger("psycopg.pool").addFilter(_WorkersLeftBehind())
    for pool in pools.values():
        with contextlib.suppress(Exception):
            pool.close(timeout=0)


def _shut_down(session: psycopg.Connection[Any]) -> bool:
    """Whether the session, shut down, was waiting for the server's answer (a command under way)."""
    try:
        descriptor = session.pgconn.socket
        duplicate = socket.socket(fileno=os.dup(descriptor))
    except (psycopg.Error, OSError):  # closed or broken already
        return False
    with duplicate:
        try:
            # Still the session's socket: it was open all along (a session never reopens), so the
            # descriptor duplicated was not another file's under the same number.
            if session.closed or session.pgconn.socket != descriptor:
                return False
            waiting = session.pgconn.transaction_status == psycopg.pq.TransactionStatus.ACTIVE
            duplicate.shutdown(socket.SHUT_RDWR)
        except (psycopg.Error, OSError):
            return False
    return waiting


def let_go_on_stop(stop: threading.Event, done: threading.Event,
                   patience: float = DATABASE_STOP_PATIENCE) -> threading.Thread:
    """For a process that is an indexer: starts a daemon thread that, once `stop` is set, waits
    `patience` seconds for `done` (the indexer has stopped), then lets go of the database."""

    def watch() -> None:
        stop.wait()
        if not done.wait(patience) and let_go_of_the_database():
            logger.warning("no answer from the database %.1f s after the stop request: its sessions are cut "
                           "(a batch not committed is written again at the next start)", patience)

    thread = threading.Thread(target=watch, name="indexer-database-let-go", daemon=True)
    thread.start()
    return thread


def database_let_go() -> bool:
    """Whether a stop has let go of the database (the process is about to end)."""
    return _let_go.is_set()


def join_or_let_go(thread: threading.Thread) -> None:
    """Waits for `thread` to end, or for a stop to let go of the database: a thread that still waits
    for it then (a connection attempt, which no shut-down socket ends) is left to end with the
    process. It must be a daemon."""
    while thread.is_alive() and not _let_go.is_set():
        thread.join(0.05)
