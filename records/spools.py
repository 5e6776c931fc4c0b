"""Full reads produced once, delivered at each client's pace (docs/operations.md, Full reads).

A snapshot (records.ws.snapshot) or an unpaged list (records.api.unpaged) is read from the
database once per data version and answer, at the database's speed, into a spool: an immutable
file. Its database connection is then free, and every client asking for the same answer while it
is current reads the same spool at its own pace, holding a descriptor and a bounded buffer only.

- **Producing is the scarce step.** A process produces at most a set number of spools of a kind
  at once (`Producers`, first come first served), each within BOUNTY_FULL_READ_SECONDS. A
  request waits for its spool up to its own bound and is then refused (503, 1013); the spool it
  waited for is still made, for the next request.
- **Spools are unnamed.** Each is a temporary file unlinked at its creation (in BOUNTY_SPOOL_DIR),
  so the kernel frees its disk once its last reader closes it, and a process that stops, even
  killed, leaves none behind.
- **Disk is bounded.** The spools a process holds open (those being produced, the current ones,
  and superseded ones still read) take at most BOUNTY_SPOOL_MAX_BYTES. Past it, idle spools are
  dropped first, then the readers of superseded spools are cut off at their next piece; a
  production that still finds no room fails (`SpoolsFull`: 503, 1013). A current spool's readers
  are never cut off for room.
- **Unused spools go.** A spool is superseded as soon as one for a newer version of its answer is
  made, and dropped once its last reader is done; a current one nobody has read for
  SPOOL_IDLE_SECONDS is dropped too.
"""

from __future__ import annotations

import itertools
import logging
import os
import tempfile
import threading
import time
from collections import deque
from collections.abc import Callable, Hashable, Iterator
from concurrent.futures import Future
from concurrent.futures import TimeoutError as FutureTimeout
from dataclasses import dataclass, field
from typing import IO, Any

from django.conf import settings
from django.db import OperationalError

from bountysite.databases import PRIMARY, read_alias, read_connection
from records.history import NO_DATA, DataVersion
from records.limits import HANDOVER_SECONDS, MAX_SPOOL_FILES, full_read_seconds, spool_max_bytes
from records.metrics import SPOOL_BYTES, SPOOLS_OPEN, SPOOLS_PRODUCED

SPOOL_IDLE_SECONDS = 60.0  # a current spool nobody reads for this long is dropped
PIECE_BYTES = 64 * 1024  # what a reader takes from a spool at a time

logger = logging.getLogger(__name__)


class SpoolUnavailable(Exception):
    """No spool for the request: `reason` says why and what to change."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


class SpoolsFull(SpoolUnavailable):
    """The process's spools take BOUNTY_SPOOL_MAX_BYTES, and none could be dropped."""


class SpoolLate(SpoolUnavailable):
    """The spool was not made within the request's wait."""


class SpoolCutOff(Exception):
    """A superseded spool's disk was needed: its readers stop (their clients reconnect)."""


@dataclass(eq=False)
class Spool:
    """An immutable answer on disk: `size` bytes, cut only at `marks` (the offsets where a message
    or a chunk ends, each with the number of messages before it), read at `version` (the data
    version, records.selectors.data_version), with what its producer says of it in `about`."""

    answer: Hashable
    version: DataVersion
    about: Any
    size: int
    marks: list[tuple[int, int]]
    file: IO[bytes] = field(repr=False)
    readers: int = 0
    last_read: float = field(default_factory=time.monotonic)
    handed: int = 0  # handed to requests that have not begun to read it (`open_reading`)
    last_handed: float = 0.0
    superseded: bool = False
    cut_off: bool = False
    closed: bool = False
    asked_at: DataVersion = NO_DATA  # the version the request that made it had read (older than `version` or equal)
    number: int = 0  # productions are numbered as they start: a higher number read newer data

    def pieces(self, size: int = PIECE_BYTES, *, at_marks: bool = True) -> Iterator[tuple[int, int, int]]:
        """(offset, length, messages) of each piece, each about `size` bytes and cut at a mark
        (`at_marks`: where a message ends; otherwise anywhere, `size` bytes each, messages 0)."""
        if not at_marks:
            for offset in range(0, self.size, size):
                yield offset, min(size, self.size - offset), 0
            return
        start, start_count = 0, 0
        for offset, count in self.marks:
            if offset - start >= size or offset == self.size:
                if offset > start:
                    yield start, offset - start, count - start_count
                start, start_count = offset, count

    def read(self, offset: int, length: int) -> bytes:
        """The piece's bytes; SpoolCutOff once its disk was taken back."""
        if self.cut_off or self.closed:
            raise SpoolCutOff
        return os.pread(self.file.fileno(), length, offset)


class SpoolWriter:
    """Where a producer writes its answer; each write takes its bytes from the process's disk bound."""

    def __init__(self, deadline: float) -> None:
        self.deadline = deadline  # monotonic: the production fails past it
        # Each statement of the read, as a web request's (BOUNTY_STATEMENT_TIMEOUT_MS; 0: none).
        self.statements_within: float | None = settings.BOUNTY_STATEMENT_TIMEOUT_MS / 1000 or None
        self.number = next(_productions)
        directory: str = settings.BOUNTY_SPOOL_DIR or tempfile.gettempdir()
        _disk.take_file()
        try:
            self.file: IO[bytes] = tempfile.TemporaryFile(dir=directory, prefix="bounty-spool-")  # noqa: SIM115
        except OSError as error:
            _disk.give_back_file()
            raise SpoolUnavailable(f"a spool could not be made in BOUNTY_SPOOL_DIR ({directory}): "
                                   f"{error.strerror}; try again shortly") from None
        self.size = 0
        self.count = 0
        self.marks: list[tuple[int, int]] = []
        self._buffer: list[bytes] = []
        self._buffered = 0

    def write(self, data: bytes, messages: int = 0) -> None:
        """Appends `data` (`messages` complete messages) and marks its end as a place to cut."""
        _disk.take(len(data))
        self.size += len(data)
        self.count += messages
        self.marks.append((self.size, self.count))
        self._buffer.append(data)
        self._buffered += len(data)
        if self._buffered >= PIECE_BYTES:
            self._flush()
            if time.monotonic() > self.deadline:
                raise SpoolLate(f"a full read took longer than BOUNTY_FULL_READ_SECONDS "
                                f"({full_read_seconds()} s)")

    def _flush(self) -> None:
        try:
            self.file.write(b"".join(self._buffer))
            self.file.flush()  # to the file itself: readers pread it
        except OSError as error:
            raise SpoolUnavailable(f"a spool could not be written in BOUNTY_SPOOL_DIR: {error.strerror}; "
                                   "try again shortly") from None
        self._buffer, self._buffered = [], 0

    def finish(self, answer: Hashable, version: DataVersion, about: Any) -> Spool:
        self._flush()
        return Spool(answer=answer, version=version, about=about, size=self.size, marks=self.marks, file=self.file,
                     number=self.number)

    def discard(self) -> None:
        self.file.close()
        _disk.give_back(self.size)
        _disk.give_back_file()


Produce = Callable[[SpoolWriter], tuple[DataVersion, Any]]  # writes the answer; returns its data version and `about`


class Producers:
    """At most `size()` productions at once in this process, served first come, first served."""

    def __init__(self, size: Callable[[], int]) -> None:
        self.size = size
        self._running = 0
        self._queue: deque[object] = deque()
        self._changed = threading.Condition()

    def take(self, timeout: float) -> bool:
        """Waits for a turn (False after `timeout` seconds, holding nothing)."""
        ticket = object()
        end = time.monotonic() + timeout
        with self._changed:
            self._queue.append(ticket)
            try:
                while self._queue[0] is not ticket or self._running >= self.size():
                    left = end - time.monotonic()
                    if left <= 0:
                        return False
                    self._changed.wait(left)
                self._running += 1
                return True
            finally:
                self._queue.remove(ticket)
                self._changed.notify_all()

    def give_back(self) -> None:
        with self._changed:
            self._running -= 1
            self._changed.notify_all()

    def busy(self) -> bool:
        """Whether a request would wait for a turn now."""
        with self._changed:
            return bool(self._queue) or self._running >= self.size()


class SpoolReading:
    """One reader's hold on a spool, from `open_reading` to `close()` (idempotent)."""

    def __init__(self, spool: Spool) -> None:
        self.spool = spool
        self._open = True

    def close(self) -> None:
        if self._open:
            self._open = False
            _registry.leave(self.spool)


def hand(spool: Spool) -> bool:
    """Takes a spool another request made (`Spools.pending`) for this one; False if it is gone."""
    return _registry.hand(spool)


def open_reading(spool: Spool) -> SpoolReading:
    """A hold on a spool `Spools.get` handed out, while its client reads it; SpoolCutOff if its
    disk was taken back meanwhile (only past HANDOVER_SECONDS, or when the disk bound needed it)."""
    return _registry.join(spool)


class Spools:
    """The spools of one kind of full read, by answer and version."""

    def __init__(self, kind: str, producers: Producers) -> None:
        self.kind = kind
        self.producers = producers

    def ready(self, answer: Hashable, version: DataVersion, *, to_read: bool = True) -> Spool | None:
        """The current spool of the answer at `version`, if one is made; no waiting. `to_read`:
        handed to a request that will read it (`open_reading`); otherwise only looked at."""
        return _registry.ready((self.kind, answer), version, to_read)

    def pending(self, answer: Hashable, version: DataVersion) -> Future[Spool] | None:
        """The production of the answer at `version` under way, if any."""
        return _registry.pending((self.kind, answer), version)

    def get(self, answer: Hashable, version: DataVersion, produce: Produce, wait: float) -> Spool:
        """The answer's spool at `version` (or newer), produced here (in the calling thread, with
        its database connection) if no other thread is making it. SpoolUnavailable past `wait`
        seconds, or when the process's spools have no room."""
        key = (self.kind, answer)
        end = time.monotonic() + wait
        while True:
            if (spool := _registry.ready(key, version)) is not None:
                return spool
            future, mine = _registry.produce_or_join(key, version)
            if mine:
                return self._produce(key, version, produce, future, end, wait)
            try:
                spool = future.result(timeout=max(0.0, end - time.monotonic()))
            except FutureTimeout:
                raise SpoolLate(f"no {self.kind} was made within {wait:g} s; try again shortly") from None
            if _registry.hand(spool):
                return spool

    def _produce(self, key: tuple[str, Hashable], version: DataVersion, produce: Produce, future: Future[Spool],
                 end: float, wait: float) -> Spool:
        """Makes the spool, handed to this request; a failure is the waiting requests' too: the
        database's and the disk's as SpoolUnavailable (503, 1013), with what to change."""
        try:
            if not self.producers.take(0):
                # Waiting, the request gives its database connection back: on PostgreSQL the
                # productions' turns would otherwise hold the pool's connections.
                read_connection().close()
                if not self.producers.take(max(0.0, end - time.monotonic())):
                    raise SpoolLate(f"this server is reading as many {self.kind}s from the database as it may; "
                                    f"none was free within {wait:g} s; try again shortly")
            try:
                writer = SpoolWriter(time.monotonic() + full_read_seconds())
                try:
                    version_read, about = produce(writer)
                    spool = writer.finish(key, version_read, about)
                except BaseException:
                    writer.discard()
                    raise
            except OperationalError:
                if read_alias() != PRIMARY:  # a replica's failure: records.reads judges it
                    raise
                logger.warning("reading a %s into its spool failed", self.kind, exc_info=True)
                raise SpoolLate(f"the database did not give the {self.kind} within BOUNTY_FULL_READ_SECONDS "
                                f"({full_read_seconds()} s) or the statement timeout; try again "
                                "shortly") from None
            finally:
                self.producers.give_back()
            SPOOLS_PRODUCED.labels(self.kind).inc()
            _registry.made(key, version, spool, future)
            return spool
        except BaseException as error:
            _registry.failed(key, version, future, error)
            raise


class _Disk:
    """The bytes of the process's open spools, against BOUNTY_SPOOL_MAX_BYTES, and their files,
    against MAX_SPOOL_FILES (each holds a descriptor, however small)."""

    def __init__(self) -> None:
        self.used = 0
        self.files = 0
        self._lock = threading.Lock()

    def take_file(self) -> None:
        with self._lock:
            if self.files < MAX_SPOOL_FILES:
                self.files += 1
                return
        _registry.make_room()
        with self._lock:
            if self.files >= MAX_SPOOL_FILES:
                raise SpoolsFull(f"this server holds {self.files} spools, as many as it may; try again shortly, "
                                 "or read pages")
            self.files += 1

    def give_back_file(self) -> None:
        with self._lock:
            self.files -= 1

    def take(self, size: int) -> None:
        with self._lock:
            if self.used + size <= spool_max_bytes():
                self.used += size
                SPOOL_BYTES.set(self.used)
                return
        _registry.make_room()
        with self._lock:
            if self.used + size > spool_max_bytes():
                raise SpoolsFull(f"this server's spools hold {self.used:,} bytes of BOUNTY_SPOOL_MAX_BYTES "
                                 f"({spool_max_bytes():,}); try again shortly, or read pages")
            self.used += size
            SPOOL_BYTES.set(self.used)

    def give_back(self, size: int) -> None:
        with self._lock:
            self.used -= size
            SPOOL_BYTES.set(self.used)


class _Registry:
    """Every spool of the process, by (kind, answer): the current one, those in production, and
    the superseded ones still read."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._current: dict[tuple[str, Hashable], Spool] = {}
        self._making: dict[tuple[tuple[str, Hashable], DataVersion], Future[Spool]] = {}
        self._superseded: set[Spool] = set()

    def ready(self, key: tuple[str, Hashable], version: DataVersion, to_read: bool = True) -> Spool | None:
        with self._lock:
            self._sweep()
            spool = self._current.get(key)
            if spool is None or version not in (spool.version, spool.asked_at):
                return None
            if to_read:
                self._hand(spool)
            return spool

    def join(self, spool: Spool) -> SpoolReading:
        with self._lock:
            spool.handed = max(0, spool.handed - 1)
            if spool.closed or spool.cut_off:
                raise SpoolCutOff
            spool.readers += 1
            spool.last_read = time.monotonic()
            return SpoolReading(spool)

    def hand(self, spool: Spool) -> bool:
        """Hands a spool just made to a request; False if it is already gone."""
        with self._lock:
            if spool.closed or spool.cut_off:
                return False
            self._hand(spool)
            return True

    def _hand(self, spool: Spool) -> None:
        spool.handed += 1
        spool.last_read = spool.last_handed = time.monotonic()

    def pending(self, key: tuple[str, Hashable], version: DataVersion) -> Future[Spool] | None:
        with self._lock:
            return self._making.get((key, version))

    def produce_or_join(self, key: tuple[str, Hashable], version: DataVersion) -> tuple[Future[Spool], bool]:
        """The production of the key at `version`, and whether the caller is to make it."""
        with self._lock:
            future = self._making.get((key, version))
            if future is not None:
                return future, False
            future = Future()
            self._making[(key, version)] = future
            return future, True

    def made(self, key: tuple[str, Hashable], version: DataVersion, spool: Spool, future: Future[Spool]) -> None:
        """Publishes a spool just made, handed to the request that made it. It becomes the current
        one of its answer unless a newer one is (made by a production that started later)."""
        spool.asked_at = version
        with self._lock:
            del self._making[(key, version)]
            self._hand(spool)
            SPOOLS_OPEN.inc()
            previous = self._current.get(key)
            if previous is not None and previous.number > spool.number:
                self._supersede(spool)  # read for the requests that waited for it, then closed
            else:
                self._current[key] = spool
                if previous is not None:
                    self._supersede(previous)
        future.set_result(spool)

    def failed(self, key: tuple[str, Hashable], version: DataVersion, future: Future[Spool],
               error: BaseException) -> None:
        with self._lock:
            self._making.pop((key, version), None)
        if not future.done():
            future.set_exception(error if isinstance(error, Exception) else SpoolLate("the production was stopped"))

    def leave(self, spool: Spool) -> None:
        with self._lock:
            spool.readers -= 1
            spool.last_read = time.monotonic()
            self._sweep()

    def make_room(self) -> None:
        """Drops the current spools nobody reads, oldest read first, and cuts off the readers of
        superseded spools (their disk comes back as each stops)."""
        with self._lock:
            for key, spool in list(self._current.items()):
                if not spool.readers and not self._handed_lately(spool):
                    del self._current[key]
                    self._supersede(spool)
            for spool in list(self._superseded):
                if spool.readers:
                    spool.cut_off = True
                elif not self._handed_lately(spool):
                    self._close(spool)

    @staticmethod
    def _handed_lately(spool: Spool) -> bool:
        """Handed to a request that may still begin to read it (within HANDOVER_SECONDS)."""
        return bool(spool.handed) and time.monotonic() - spool.last_handed <= HANDOVER_SECONDS

    def _sweep(self) -> None:
        """Drops the current spools idle for SPOOL_IDLE_SECONDS, and closes the superseded ones
        that nobody reads any longer (past their handover)."""
        now = time.monotonic()
        for key, spool in list(self._current.items()):
            if not spool.readers and now - spool.last_read > SPOOL_IDLE_SECONDS:
                del self._current[key]
                self._supersede(spool)
        for spool in list(self._superseded):
            self._sweep_one(spool)

    def _supersede(self, spool: Spool) -> None:
        spool.superseded = True
        self._superseded.add(spool)
        self._sweep_one(spool)

    def _sweep_one(self, spool: Spool) -> None:
        """Closes a superseded spool once nobody reads it and no request it was handed to may
        still begin to (one that has not within HANDOVER_SECONDS was cancelled)."""
        if not spool.readers and not self._handed_lately(spool):
            self._close(spool)

    def _close(self, spool: Spool) -> None:
        self._superseded.discard(spool)
        if not spool.closed:
            spool.closed = True
            spool.file.close()
            _disk.give_back(spool.size)
            _disk.give_back_file()
            SPOOLS_OPEN.dec()


_disk = _Disk()
_registry = _Registry()
_productions = itertools.count(1)


def spool_bytes() -> int:
    """The bytes of this process's open spools (what BOUNTY_SPOOL_MAX_BYTES bounds)."""
    return _disk.used
