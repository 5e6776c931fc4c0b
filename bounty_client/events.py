"""The websocket `/ws/events`: a snapshot of every record, then every change, resumed after a
dropped connection from an opaque position (docs/api.md, The websocket).

`EventFold` is the bookkeeping, without any I/O: fed the decoded messages of one connection after
another, it hands over each complete snapshot and each live message once, in order, and says
where to resume from (`resume_from`, a position) and so which URL to connect to next
(`next_url`). `watch_events` runs it over real connections with the `websockets` package
(`pip install "./bounty_client[events]"`), reconnecting after a drop with a doubling backoff, or
within a short random window after the server restarts and while it starts again (`Backoff`).

A position is opaque: it is only ever stored and sent back, never built or parsed (one looks like
`41.3f9a…` today). `seq` still orders the messages of one history, so repeats are dropped by seq,
kept apart from the position. The TypeScript client's `watchEvents` does the same bookkeeping;
both are held to the `events` vectors of clients/test-vectors.json.
"""

from __future__ import annotations

import asyncio
import inspect
import json
import random
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, TypeGuard, cast
from urllib.parse import quote, urlsplit, urlunsplit

from bounty_client.errors import ResponseError
from bounty_client.schema import BountyRecord, DisputeRecord, SubmissionRecord

Record = BountyRecord | SubmissionRecord | DisputeRecord

# Close codes after which the service wants a longer pause: a limit was exceeded (1008), or no
# snapshot slot was free (1013).
LIMIT_CLOSE_CODES = frozenset({1008, 1013})
# Close codes of a server going away on purpose (1001) or restarting (1012): not a failure, so the
# client comes back within a short random window instead of on a grown backoff.
RESTART_CLOSE_CODES = frozenset({1001, 1012})
NO_CLOSE_CODE = 1006  # the connection ended without a close frame (or never opened)

_KINDS = ("bounty", "submission", "dispute")


@dataclass(frozen=True, slots=True)
class Snapshot:
    """Every record of the active deployment, current at change `seq`: replace what you hold.

    `position` is where to resume from (`since=`) once it is applied.
    """

    bounties: list[BountyRecord]
    submissions: list[SubmissionRecord]
    disputes: list[DisputeRecord]
    seq: int
    position: str


@dataclass(frozen=True, slots=True)
class LiveEvent:
    """A live message: a record as it was right after the change numbered `seq`.

    `*.removed` deletes the record of its `kind` and id, every other type replaces it. `position`
    is where to resume from (`since=`) once it is applied.
    """

    type: str
    payload: Record
    seq: int
    position: str

    @property
    def kind(self) -> str:
        """The record kind: `bounty`, `submission` or `dispute`."""
        return self.type.partition(".")[0]

    @property
    def removed(self) -> bool:
        """Whether the record is gone (`bounty.removed` and the like)."""
        return self.type.endswith(".removed")


@dataclass
class _Building:
    """A snapshot being received: its records by kind."""

    records: dict[str, list[Any]] = field(default_factory=lambda: {kind: [] for kind in _KINDS})


def events_url(base_url: str, since: str | None = None) -> str:
    """The `/ws/events` URL of a service given by its `http(s)://` or `ws(s)://` base address,
    with `?since=<position>` percent-encoded as JavaScript's `encodeURIComponent` encodes it."""
    parts = urlsplit(base_url.rstrip("/") + "/ws/events")
    scheme = {"http": "ws", "https": "wss"}.get(parts.scheme, parts.scheme)
    query = "" if since is None else "since=" + quote(since, safe="!'()*")
    return urlunsplit((scheme, parts.netloc, parts.path, query, ""))


class EventFold:
    """The bookkeeping of a client of `/ws/events`, fed one decoded message at a time.

    Start it with `since`, a position handed over earlier (of a `Snapshot` or a `LiveEvent`), to
    resume from there; or without, to start with a snapshot. Then, for each connection: connect
    to `next_url(base_url)`, `feed` it every message in order, and call `connection_lost()` when
    the connection ends.
    """

    def __init__(self, since: str | None = None) -> None:
        """A fold that resumes from `since` (None: it starts with a snapshot)."""
        self._resume_from = since
        self._last_seq: int | None = None  # of the last message applied: a repeat has no greater one
        self._building: _Building | None = None

    @property
    def resume_from(self) -> str | None:
        """The position of the last message fully applied, or None while a snapshot is incomplete
        (or none came yet): the next connection then asks for a snapshot."""
        return self._resume_from

    def next_url(self, base_url: str) -> str:
        """The URL to connect to next: with `?since=<resume_from>` when there is a position."""
        return events_url(base_url, self._resume_from)

    def connection_lost(self) -> None:
        """Forgets a snapshot the connection did not complete (the next connection asks for one)."""
        self._building = None

    def feed(self, message: object) -> Snapshot | LiveEvent | None:
        """Applies one decoded message; returns the snapshot it completes or the live event it
        is, or None (a snapshot's record, `resync`, a repeat). A message not of the documented
        shape raises `ResponseError` and changes nothing (reconnect: the fold resumes)."""
        if not isinstance(message, Mapping):
            raise ResponseError("/ws/events: a message is not a JSON object")
        type_, seq = message.get("type"), message.get("seq")
        if not isinstance(type_, str) or not _is_int(seq):
            raise ResponseError("/ws/events: a message has no string type and integer seq")
        if message.get("snapshot") is True:
            self._snapshot_record(type_, message.get("payload"))
            return None
        position = message.get("position")
        if not isinstance(position, str):
            raise ResponseError(f"/ws/events: a {type_} message has no string position")
        if type_ == "snapshot.complete":
            building = self._building or _Building()
            self._building = None
            # The snapshot may be of another history, whose seqs run lower: what it says replaces all.
            self._resume_from, self._last_seq = position, seq
            return Snapshot(bounties=building.records["bounty"], submissions=building.records["submission"],
                            disputes=building.records["dispute"], seq=seq, position=position)
        if type_ == "resync":  # a new snapshot follows on this connection
            self._building = None
            self._resume_from = self._last_seq = None
            return None
        payload = message.get("payload")
        if not isinstance(payload, Mapping) or not _is_int(payload.get("id")):
            raise ResponseError(f"/ws/events: a {type_} message has no record with an integer id")
        if self._last_seq is not None and seq <= self._last_seq:
            return None  # a repeat
        self._resume_from, self._last_seq = position, seq
        return LiveEvent(type=type_, payload=cast(Record, dict(payload)), seq=seq, position=position)

    def _snapshot_record(self, type_: str, payload: object) -> None:
        if not isinstance(payload, Mapping):
            raise ResponseError(f"/ws/events: a snapshot message of type {type_} has no record")
        if self._building is None:
            self._building = _Building()
        kind = type_.partition(".")[0]
        if kind in self._building.records:  # a kind this client does not know yet is left out
            self._building.records[kind].append(dict(payload))
        self._resume_from = self._last_seq = None  # incomplete until snapshot.complete


def _is_int(value: object) -> TypeGuard[int]:
    return isinstance(value, int) and not isinstance(value, bool)


@dataclass
class Backoff:
    """The pause before each reconnect: `initial` seconds, doubling with every connection in a row
    that ends without delivering a message, up to `ceiling`; `limit_factor` times as long after a
    1008 or 1013 close (a limit, or no snapshot slot free), within the same ceiling. Each pause is
    drawn at random between half of that and all of it (jitter), so clients that lost their
    connections together do not come back together. `reset()` starts again from `initial`.

    A 1012 or 1001 close (the server restarts, or goes away) is not a failure: the pause is drawn
    uniformly between 0 and `restart_window` seconds (within the ceiling), and the doubling does
    not grow for it, so the clients of a restarted process come back at once, spread over the
    window. The new process may take seconds to listen: until a message is delivered again, a
    connection that fails without a close frame from the server (1006: refused, reset, timed out,
    a failed handshake) is retried after a pause drawn uniformly between half of `restart_window`
    and all of it (within the ceiling), for at most `restart_tries` such failures in a row (by
    default 30: about half a minute of a server restarting), again without growing the doubling,
    so the clients are back within a second of its listening. After those tries, or after a close
    the server sent with any other code (it is up again), the doubling pause applies as before.

    That quick return is taken once until a message is delivered again (`reset()`): a second 1012
    or 1001 without one in between waits the doubling pause, as any other close, so a server that
    keeps restarting is not hammered.
    """

    initial: float = 1.0
    ceiling: float = 60.0
    limit_factor: float = 5.0
    restart_window: float = 1.0
    restart_tries: int = 30
    rng: Callable[[], float] = random.random  # a number in [0, 1)
    _failures: int = field(default=0, init=False)
    _restart_taken: bool = field(default=False, init=False)  # a quick return since the last message
    _restart_tries_left: int = field(default=0, init=False)  # quick retries left while the server restarts

    def next_delay(self, close_code: int) -> float:
        """The seconds to wait before the next connection, after one that closed with `close_code`
        (`NO_CLOSE_CODE`, 1006, when there was no close frame or no connection)."""
        window = min(self.restart_window, self.ceiling)
        if close_code in RESTART_CLOSE_CODES and not self._restart_taken:
            self._restart_taken = True
            self._restart_tries_left = self.restart_tries
            return self.rng() * window
        if close_code == NO_CLOSE_CODE and self._restart_tries_left > 0:
            self._restart_tries_left -= 1
            return window / 2 + self.rng() * window / 2
        self._restart_tries_left = 0  # the tries are used up, or a close frame says the server is up
        delay = self.initial * 2.0 ** min(self._failures, 62)
        if close_code in LIMIT_CLOSE_CODES:
            delay *= self.limit_factor
        self._failures += 1
        delay = min(delay, self.ceiling)
        return delay / 2 + self.rng() * delay / 2

    def reset(self) -> None:
        """The next pause is `initial` again, or the restart window after a 1012 or 1001 (a
        connection delivered messages); the retries of a restart end."""
        self._failures = 0
        self._restart_taken = False
        self._restart_tries_left = 0


async def watch_events(
    base_url: str,
    on_snapshot: Callable[[Snapshot], Awaitable[object] | object],
    on_event: Callable[[LiveEvent], Awaitable[object] | object],
    *,
    since: str | None = None,
    on_disconnect: Callable[[int, float], Awaitable[object] | object] | None = None,
    backoff: Backoff | None = None,
    open_timeout: float | None = 10.0,
) -> None:
    """Follows `/ws/events` of the service at `base_url` (`http(s)://` or `ws(s)://`) until
    cancelled.

    `on_snapshot` gets every complete snapshot (replace every record you hold with it) and
    `on_event` every live message after it, once each, in order (`*.removed` deletes the record,
    every other type replaces it); either may be a coroutine function. Store the `position` of the
    last one applied to resume from it later (`since=`). When the connection drops, or the service
    closes it, it connects again with `?since=<the last position applied>` after a pause
    (`backoff`, a `Backoff()` by default: 1 s doubling to 60 s, five times as long after a 1008 or
    1013, with jitter; between 0 and 1 s after a 1012 or 1001, a restart, once until a message
    comes again, and then every 0.5 to 1 s for up to 30 connections in a row that fail without a
    close frame while the new server process starts); `on_disconnect(close_code, pause)` is called
    first (1006 when there was no close frame or no connection). A message that does not parse,
    or is not of the documented shape, ends the connection the same way; the fold goes on from
    the last message applied. If the service cannot vouch for the position, it sends a snapshot,
    handed over as such. Messages of any size are accepted (a record's metadata URI may be long).
    An exception of a handler ends the watch.

    Needs the `websockets` package (`pip install "./bounty_client[events]"`).
    """
    from websockets.asyncio.client import connect
    from websockets.exceptions import ConnectionClosed, InvalidHandshake

    fold = EventFold(since)
    backoff = backoff or Backoff()
    while True:
        close_code = NO_CLOSE_CODE
        try:
            async with connect(fold.next_url(base_url), open_timeout=open_timeout, max_size=None) as socket:
                try:
                    async for raw in socket:
                        delivered = fold.feed(json.loads(raw))
                        backoff.reset()
                        if isinstance(delivered, Snapshot):
                            await _call(on_snapshot, delivered)
                        elif delivered is not None:
                            await _call(on_event, delivered)
                except (ValueError, RecursionError, ResponseError):
                    await socket.close(4000)  # a message we cannot apply: resume on a new connection
                close_code = socket.close_code or NO_CLOSE_CODE
        except ConnectionClosed as closed:
            close_code = closed.rcvd.code if closed.rcvd is not None else NO_CLOSE_CODE
        except (OSError, InvalidHandshake, TimeoutError):
            pass  # no connection: refused, rate limited (429), timed out
        fold.connection_lost()
        pause = backoff.next_delay(close_code)
        if on_disconnect is not None:
            await _call(on_disconnect, close_code, pause)
        await asyncio.sleep(pause)


async def _call(handler: Callable[..., Awaitable[object] | object], *args: Any) -> None:
    result = handler(*args)
    if inspect.isawaitable(result):
        await result
