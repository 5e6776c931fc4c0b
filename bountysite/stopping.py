"""A stop that SIGTERM and SIGINT ask for: a `threading.Event` every wait of the process watches
(run_indexer, devchain).

The signal handler never sets the Event itself. Python runs a handler in the main thread between
two of its bytecodes, and `Event.wait` holds the lock of the Event's condition for a moment on
its way in and out of each wait: a handler that called `Event.set` there waited for ever for a
lock its own thread held. run_indexer hung on SIGTERM so, now and then, holding its deployment's
writer lock (tests/test_signal_stop.py makes it happen within seconds, and fails once
CPython's Event no longer can). Here the handler marks the stop, which `is_set` and `wait` see
at once, and writes a byte to a pipe, neither of which takes a lock; a thread of its own reads
the byte and sets the Event, which wakes the waits under way.
"""

from __future__ import annotations

import contextlib
import os
import signal
import threading
from collections.abc import Callable
from types import FrameType

STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM)


class SignalStop(threading.Event):
    """Set by the first of `signals` (the handlers are installed here, so make it in the main
    thread), or by `set`. `then` runs in the handler after the stop is marked, once: where only
    an exception raised in the main thread ends a wait (indexer.rpc's `interrupt_wait`)."""

    def __init__(self, signals: tuple[signal.Signals, ...] = STOP_SIGNALS,
                 then: Callable[[], None] = lambda: None) -> None:
        super().__init__()
        self._asked = False  # by a signal: seen by is_set and wait before the thread sets the Event
        self._then = then
        self._pid = os.getpid()
        read, self._pipe = os.pipe()
        os.set_blocking(self._pipe, False)
        threading.Thread(target=self._set_when_asked, args=(read,), name="stop-on-signal", daemon=True).start()
        for signum in signals:
            signal.signal(signum, self._on_signal)

    def is_set(self) -> bool:
        return self._asked or super().is_set()

    def wait(self, timeout: float | None = None) -> bool:
        return self._asked or super().wait(timeout)

    def _on_signal(self, signum: int, frame: FrameType | None) -> None:
        if self._asked:  # once: a second signal must not interrupt the clean-up
            return
        self._asked = True
        # A process forked from this one (indexer.pipeline's readers) has the handler but not the
        # thread: its stop is the mark alone, and the pipe stays this process's.
        if os.getpid() == self._pid:
            with contextlib.suppress(BlockingIOError):
                os.write(self._pipe, b"\0")
        self._then()

    def _set_when_asked(self, read: int) -> None:
        os.read(read, 1)
        os.close(read)
        self.set()
