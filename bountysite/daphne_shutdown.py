"""Where the service bends how daphne 4.2 stops (SIGTERM, as systemd stops a unit): every bend of
daphne's stop lives here, with its reason beside its code; the websocket side's bends live in
bountysite/daphne_ws.py and the HTTP side's in bountysite/daphne_http.py. `bountysite.asgi` calls
`install()`, so `daphne bountysite.asgi:application` and `manage.py runserver` both get it; it is
idempotent.

**Upstream.** On SIGTERM, Twisted stops the reactor; before it stops, daphne's
`kill_all_applications` cancels every application and waits for them. Its listening socket stays
open meanwhile; no websocket is told anything (the reactor then drops each TCP connection, which
a client sees as 1006, an abnormal closure that grows its backoff); and an HTTP request whose
Django handler is running on a thread is cut wherever it is. Worse, once the reactor has stopped,
the interpreter's exit joins every worker thread of asgiref's executors: a request that was inside
a synchronous middleware calling the asynchronous layers within (`AsyncToSync`) waits for an event
loop that no longer runs, so the process hung until systemd's SIGKILL 30 s later (about one
restart in five under load), and its clients' backoffs grew meanwhile.

**What we need.** A restart that clients barely notice (docs/operations.md, Restarts): the
process stops taking connections, tells every websocket client at once that the service restarts
(close code 1012, which the clients answer by reconnecting within a short random spread, not a
grown backoff), lets HTTP requests in flight finish within `GRACE_SECONDS`, and is gone within
`GRACE_SECONDS + EXIT_SECONDS` whatever its clients and threads do.

**The bend.** `kill_all_applications` first stops listening, sends every open websocket a close
frame with 1012, and waits until no HTTP request is in flight or `GRACE_SECONDS` have passed;
then daphne's own runs. Once the reactor has stopped, the process ends at once (its exit functions
run, then `os._exit(0)` after flushing the logs): no thread still running a request is waited for, and neither is the
interpreter's own teardown, which took 1-3 s after a process had served a few dozen websockets
(every record of the process's memory freed one by one); nothing is left to write then, as every
write of a web process is committed by the request that made it. A daemon watchdog started with
the stop does the same if the process is still there `GRACE_SECONDS + EXIT_SECONDS` after the
signal, wherever it is stuck.

tests/deployment/test_restart.py stops real daphne processes with requests and websockets in flight,
many times over, and checks each of these; its canary fails once daphne sends websocket clients a
close frame of its own at shutdown (then see whether this bend can go).
"""

from __future__ import annotations

import asyncio
import atexit
import contextlib
import logging
import os
import sys
import threading
import time
from typing import Any, cast

from daphne.http_protocol import WebRequest
from daphne.server import Server
from daphne.ws_protocol import WebSocketProtocol
from twisted.internet import defer
from twisted.internet import reactor as twisted_reactor
from twisted.internet.tcp import Port

SERVICE_RESTART = 1012  # RFC 6455's registry: the service is restarting; reconnect
RESTART_REASON = "the service is restarting; reconnect"
GRACE_SECONDS = 1.0  # what HTTP requests in flight have to finish
EXIT_SECONDS = 1.0  # then the rest of the stop, before the process ends whatever its threads do
POLL_SECONDS = 0.05

logger = logging.getLogger(__name__)
reactor = cast(Any, twisted_reactor)  # the installed reactor: typed as the module it is imported from


class Upstream:
    """daphne's own method, as it was before `install()`."""

    kill_all_applications = Server.kill_all_applications


def _kill_all_applications(self: Any) -> defer.Deferred[Any]:
    started = time.monotonic()
    _exit_by(started + GRACE_SECONDS + EXIT_SECONDS)
    reactor.addSystemEventTrigger("after", "shutdown", _exit_now)
    listeners: list[Any] = [reader for reader in reactor.getReaders() if isinstance(reader, Port)]
    for listener in listeners:  # new connections go to another process (nginx) or wait for the next
        listener.stopListening()
    closed = 0
    for protocol in list(self.connections):
        if isinstance(protocol, WebSocketProtocol) and protocol.state == protocol.STATE_OPEN:
            protocol.serverClose(code=SERVICE_RESTART, reason=RESTART_REASON)  # daphne_ws's bend sends 1012
            closed += 1
    logger.info("Stopping: closed %d websockets with %d, waiting up to %s s for %d HTTP requests",
                closed, SERVICE_RESTART, GRACE_SECONDS, len(_requests_in_flight(self)))
    return defer.Deferred.fromFuture(asyncio.ensure_future(_after_requests(self, started + GRACE_SECONDS)))


async def _after_requests(server: Any, deadline: float) -> None:
    """daphne's own `kill_all_applications`, once no HTTP request is in flight or at `deadline`."""
    while _requests_in_flight(server) and time.monotonic() < deadline:
        await asyncio.sleep(POLL_SECONDS)
    await Upstream.kill_all_applications(server).asFuture(asyncio.get_running_loop())


def _requests_in_flight(server: Any) -> list[Any]:
    return [protocol for protocol, details in server.connections.items()
            if isinstance(protocol, WebRequest) and not protocol.finished
            and (instance := details.get("application_instance")) is not None and not instance.done()]


def _exit_by(deadline: float) -> None:
    """Ends the process at `deadline` unless it has ended by then."""
    def watch() -> None:
        time.sleep(max(0.0, deadline - time.monotonic()))
        logger.warning("Stopping: still running %.1f s after the signal; exiting", GRACE_SECONDS + EXIT_SECONDS)
        _exit_now()
    threading.Thread(target=watch, name="exit-watchdog", daemon=True).start()


class Exit:
    """Whether the process has begun to end (`_exit_now`)."""

    begun = False


def _exit_now() -> None:
    """Ends the process with its logs written, waiting for no thread. The exit functions run first
    (`atexit`: records.limits takes the process's connections out of Redis's counts), unless they
    are what the watchdog found stuck."""
    if not Exit.begun:
        Exit.begun = True
        busy = [thread.name for thread in threading.enumerate()
                if thread is not threading.current_thread() and not thread.daemon and thread.is_alive()]
        if busy:
            logger.info("Stopping: not waiting for %d threads (%s)", len(busy), ", ".join(busy[:5]))
        atexit._run_exitfuncs()
    for handler in logging.getLogger().handlers:
        with contextlib.suppress(Exception):  # the process ends either way
            handler.flush()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)


def install() -> None:
    """Applies the stop's bend (idempotent)."""
    Server.kill_all_applications = _kill_all_applications
