"""Every per-client and per-process limit of the web processes, in one place.

Who a client is follows one rule (bountysite/client_address.py: X-Forwarded-For believed only from
BOUNTY_TRUSTED_PROXIES, an IPv6 client counted by its /64), with one adapter for HTTP requests
(`request_address`, `request_client`) and one for websocket scopes (`scope_address`,
`scope_client`). Settings are read when a limit is applied, never kept from the process's start.

Each limit, its settings, how it is counted, and what a client past it gets:

- HTTP requests: BOUNTY_RATE_LIMIT per BOUNTY_RATE_WINDOW_SECONDS; per client, across processes;
  429 (bountysite.ratelimit applies it).
- The admin's password forms: BOUNTY_ADMIN_LOGIN_RATE_LIMIT per its window; per client, across
  processes; 429.
- New response-cache entries: BOUNTY_API_CACHE_ENTRIES_PER_CLIENT per BOUNTY_API_CACHE_SECONDS;
  per client, across processes; the answer is not stored.
- Unpaged lists taken at once: BOUNTY_HTTP_MAX_STREAMS_PER_CLIENT; per client, per process; 429.
- Unpaged lists read from the database at once: BOUNTY_HTTP_MAX_STREAMS; per process
  (records.spools); a wait, then 503.
- Websocket connections: BOUNTY_WS_MAX_CONNECTIONS per process, BOUNTY_WS_MAX_CONNECTIONS_PER_CLIENT
  per client across processes; 1008.
- Websocket connects: BOUNTY_WS_CONNECTS_PER_MINUTE; per client, across processes; 429 before
  the upgrade.
- Snapshots sent at once: BOUNTY_WS_SNAPSHOT_READERS_PER_CLIENT; per client, per process; a wait,
  then 1013.
- Snapshots read from the database at once: BOUNTY_WS_SNAPSHOT_READERS; per process
  (records.spools); a wait, then 1013.
- Messages from a client: BOUNTY_WS_MAX_MESSAGES per BOUNTY_WS_MESSAGE_WINDOW_SECONDS, each at
  most BOUNTY_WS_MAX_MESSAGE_BYTES; per connection; 1008.
- Spool disk: BOUNTY_SPOOL_MAX_BYTES; per process (records.spools); 503, 1013.
- Spool files: MAX_SPOOL_FILES (1,000) open at once; per process (records.spools); 503, 1013.
- A full read from the database: BOUNTY_FULL_READ_SECONDS (and each statement the web's statement
  timeout); per read; 503, 1013.
- Live messages queued for a client: BOUNTY_WS_MAX_BACKLOG; per connection; 1008.
- Snapshot pace: BOUNTY_WS_SNAPSHOT_BASE_SECONDS plus its bytes at
  BOUNTY_WS_SNAPSHOT_MIN_BYTES_PER_SECOND; per connection; 1008.
- Waits: an unpaged list waits BOUNTY_HTTP_LIST_WAIT_SECONDS for its spool (503), a snapshot
  BOUNTY_WS_SNAPSHOT_WAIT_SECONDS for its slot and spool (1013).
- The live feed's memory: BOUNTY_WS_RECENT_MESSAGES messages of at most BOUNTY_WS_RECENT_BYTES in
  all; per process; older resumes are asked of the database.
- The websocket's database reads at once: BOUNTY_WS_READ_THREADS; per process; they wait their turn.

The modules that apply a limit elsewhere (records.spools, records.ws.snapshot, records.api.unpaged,
bountysite.ratelimit, records.ws.consumer, records.ws.outbox, records.ws.feed, records.lanes) take
its number from the functions below, and so does every message that names it.

"Across processes" means in Redis, shared by every web process; without Redis, or while it cannot
be reached (bountysite/redis_reach.py), each process counts alone. Nothing here is given back by
a finaliser: what a request or connection holds is released where it ends, or stops counting by
itself (a claim never started, an entry in Redis not renewed).

**Counting in windows** (`spend`): fixed windows of a budget's length that start at multiples of
it in Unix time, one counter per client and window, incremented in one round trip.

**Websocket connections** are capped by counting the open connections themselves, never a
counter that a lost or missed decrement would leave too high:

- Each process keeps its open connections, by client, in memory; they are added and removed
  without an await in between, so concurrent connections cannot race. They answer the
  per-process cap, and the per-client cap when there is no Redis.
- With Redis, a client's connections are the members of a sorted set (`ws:connections:<client>`),
  each scored with the time it expires at. One Lua script admits a connection: it drops the
  expired members, counts the others and adds the new one if the count is under the cap. The
  connection's process removes it when it closes, and renews the expiry of all its connections
  every RENEW_SECONDS (adding back any a flush of Redis lost), so the members of a process that
  died without removing them stop counting within ENTRY_SECONDS.
- Calls to Redis run on REDIS_THREADS threads, a client's calls always on the same one, in the
  order they are made: a removal never overtakes its connection's admission, nor a renewal that
  still lists the connection; other clients' calls go on meanwhile, so a slow Redis does not
  serialise every handshake. A handshake waits for Redis at most twice REDIS_TIMEOUT_MS, then
  decides as without Redis; the connections admitted so join the shared count at the next
  renewal.
- At the process's exit, what it still holds in Redis is removed (daphne may stop without ending
  its applications).
"""

from __future__ import annotations

import asyncio
import atexit
import itertools
import logging
import math
import threading
import time
import uuid
import zlib
from collections import defaultdict, deque
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any, TypeVar

from django.conf import settings
from django.core.cache import caches
from django.http import HttpRequest

from bountysite.cache import RedisCache, count_here, count_in
from bountysite.client_address import client_address, client_key
from records.metrics import WS_SNAPSHOTS_WAITING
from records.ws.closes import TRY_AGAIN_LATER, Refusal

logger = logging.getLogger(__name__)
T = TypeVar("T")


# ---------------------------------------------------------------------------- the numbers

MAX_SPOOL_FILES = 1_000  # spools a process holds open at once, each a descriptor (the units allow 32,768)
# A spool handed to a request is kept this long for it to start reading, even if superseded
# meanwhile, and a list's claim not started within it stops counting.
HANDOVER_SECONDS = 10.0


@dataclass(frozen=True)
class Budget:
    """A budget counted in fixed windows: `limit` per `window` seconds (0: no limit)."""

    limit: int
    window: int


def api_rate() -> Budget:
    return Budget(settings.BOUNTY_RATE_LIMIT, settings.BOUNTY_RATE_WINDOW_SECONDS)


def admin_login_rate() -> Budget:
    return Budget(settings.BOUNTY_ADMIN_LOGIN_RATE_LIMIT, settings.BOUNTY_ADMIN_LOGIN_RATE_WINDOW_SECONDS)


def ws_connects_per_minute() -> int:
    return int(settings.BOUNTY_WS_CONNECTS_PER_MINUTE)


def ws_backlog() -> int:
    """Live messages queued for one client before it counts as too slow."""
    return int(settings.BOUNTY_WS_MAX_BACKLOG)


def snapshot_readers() -> int:
    """Snapshots a process reads from the database at once."""
    return int(settings.BOUNTY_WS_SNAPSHOT_READERS)


def snapshot_wait_seconds() -> int:
    return int(settings.BOUNTY_WS_SNAPSHOT_WAIT_SECONDS)


def snapshot_pace() -> tuple[int, int]:
    """A snapshot's deadline: its base seconds, and the bytes a second it must be taken at past them."""
    return int(settings.BOUNTY_WS_SNAPSHOT_BASE_SECONDS), int(settings.BOUNTY_WS_SNAPSHOT_MIN_BYTES_PER_SECOND)


def list_streams() -> int:
    """Unpaged lists a process reads from the database at once."""
    return int(settings.BOUNTY_HTTP_MAX_STREAMS)


def list_streams_per_client() -> int:
    return int(settings.BOUNTY_HTTP_MAX_STREAMS_PER_CLIENT)


def list_wait_seconds() -> int:
    return int(settings.BOUNTY_HTTP_LIST_WAIT_SECONDS)


def spool_max_bytes() -> int:
    return int(settings.BOUNTY_SPOOL_MAX_BYTES)


def full_read_seconds() -> int:
    return int(settings.BOUNTY_FULL_READ_SECONDS)


def recent_messages() -> tuple[int, int]:
    """The live feed's memory: at most this many messages, of at most these bytes."""
    return int(settings.BOUNTY_WS_RECENT_MESSAGES), int(settings.BOUNTY_WS_RECENT_BYTES)


def ws_read_threads() -> int:
    return int(settings.BOUNTY_WS_READ_THREADS)


# ---------------------------------------------------------------------------- who the client is


def request_address(request: HttpRequest) -> str:
    """An HTTP request's client address (the access lines, the admin's record of sign-in attempts)."""
    return client_address(request.META.get("REMOTE_ADDR", ""), request.META.get("HTTP_X_FORWARDED_FOR"),
                          trusted=settings.BOUNTY_TRUSTED_PROXIES)


def request_client(request: HttpRequest) -> str:
    """What an HTTP request's client is counted as: its address, an IPv6 client's /64."""
    return client_key(request_address(request))


def scope_address(scope: dict[str, Any]) -> str:
    """A websocket's client address, from its ASGI scope."""
    peer = str((scope.get("client") or ("", 0))[0])
    forwarded = [value.decode("latin1") for name, value in scope.get("headers", []) if name == b"x-forwarded-for"]
    return client_address(peer, ",".join(forwarded) or None, trusted=settings.BOUNTY_TRUSTED_PROXIES)


def scope_client(scope: dict[str, Any]) -> str:
    """What a websocket's client is counted as: its address, an IPv6 client's /64."""
    return client_key(scope_address(scope))


# ---------------------------------------------------------------------------- counting in windows


def _shared() -> RedisCache | None:
    """The cache the processes share their counts through; None without Redis."""
    shared = caches["default"]
    return shared if isinstance(shared, RedisCache) else None


def increment_shared_count(key: str, timeout: int, *, here: bool = False) -> int:
    """Adds one to the counter at `key` (of `timeout` seconds) in the shared cache (`here`: in this
    process's own, as while Redis cannot be reached); returns it."""
    if here:
        return count_here(key, timeout)
    shared = _shared()
    if shared is not None:
        return shared.count(key, timeout)  # this process's own count while Redis cannot be reached
    return count_in(caches["default"], key, timeout)  # a process-local cache: no other process counts


@dataclass(frozen=True)
class Spent:
    """One unit spent of a client's current window of a budget."""

    count: int  # its number in the window
    reset: int  # Unix time when the window ends
    retry_after: int  # whole seconds until then, at least 1


def spend(budget: str, client: str, window: int, *, here: bool = False) -> Spent:
    """Spends one unit of `client`'s `budget`, in windows of `window` seconds (`here`: counted in
    this process only)."""
    now = time.time()
    window_start = int(now // window) * window
    reset = window_start + window
    count = increment_shared_count(f"ratelimit:{budget}:{client}:{window_start}", timeout=window + 1, here=here)
    return Spent(count, reset, max(1, math.ceil(reset - now)))


def spend_cache_budget(request: HttpRequest, size: int) -> bool:
    """Whether a rendered body of `size` bytes may go in the response cache, spending one of its
    client's entries when it may: not past BOUNTY_API_CACHE_MAX_BODY_BYTES, and while the client
    has added at most BOUNTY_API_CACHE_ENTRIES_PER_CLIENT entries in the current window of
    BOUNTY_API_CACHE_SECONDS (so one client adds at most twice that many at once, two windows'
    worth outliving their window, each of a bounded size)."""
    lifetime: int = settings.BOUNTY_API_CACHE_SECONDS
    if size > settings.BOUNTY_API_CACHE_MAX_BODY_BYTES or not lifetime:
        return False
    added = spend("cache-budget", request_client(request), lifetime).count
    return added <= settings.BOUNTY_API_CACHE_ENTRIES_PER_CLIENT


# ---------------------------------------------------------------------------- full reads taken at once

PRUNE_PAST = 10_000  # clients with claims past which the expired ones are dropped


class Claim:
    """One full read's place among its client's, until `release()` (idempotent)."""

    def __init__(self, claims: Claims, client: str) -> None:
        self.claims = claims
        self.client = client
        self.taken = time.monotonic()
        self.answering = True  # its request is still being answered (a spool waited for, or made)
        self.started = False
        self.held = True

    def answered(self) -> None:
        """The response is made: its body should begin within HANDOVER_SECONDS."""
        self.taken = time.monotonic()
        self.answering = False

    def start(self) -> None:
        """The body began: the claim counts until released, however long the client takes."""
        self.started = True

    def expired(self, now: float) -> bool:
        """A claim whose body never began (its request was cancelled first) stops counting."""
        return not self.started and not self.answering and now - self.taken > HANDOVER_SECONDS

    def release(self) -> None:
        if self.held:
            self.held = False
            self.claims.drop(self)


class Claims:
    """At most `limit()` claims per client at once, in this process."""

    def __init__(self, limit: Callable[[], int]) -> None:
        self.limit = limit
        self._lock = threading.Lock()
        self._of: dict[str, set[Claim]] = {}

    def claim(self, client: str) -> Claim | None:
        """A new claim of `client` (`request_client`); None when it holds as many as it may."""
        now = time.monotonic()
        with self._lock:
            if len(self._of) > PRUNE_PAST:  # clients that left only expired claims behind
                self._of = {key: live for key, claims in self._of.items()
                            if (live := {claim for claim in claims if not claim.expired(now)})}
            held = {claim for claim in self._of.get(client, ()) if not claim.expired(now)}
            if len(held) >= self.limit():
                self._of[client] = held
                return None
            claim = Claim(self, client)
            held.add(claim)
            self._of[client] = held
            return claim

    def drop(self, claim: Claim) -> None:
        with self._lock:
            held = self._of.get(claim.client)
            if held is not None:
                held.discard(claim)
                if not held:
                    del self._of[claim.client]


unpaged_list_claims = Claims(lambda: settings.BOUNTY_HTTP_MAX_STREAMS_PER_CLIENT)


# ---------------------------------------------------------------------------- websocket connections

RENEW_SECONDS = 20.0  # how often a process renews its connections' entries in Redis
ENTRY_SECONDS = 60.0  # how long an entry counts without being renewed: its process died
REDIS_THREADS = 8
MAX_QUEUED_CALLS = 64  # calls waiting on one of those threads, past which a handshake decides without Redis
SAID_EVERY_SECONDS = 60.0  # how often handshakes decided without Redis are said in the log
CONNECTS_WINDOW_SECONDS = 60

_PROCESS = uuid.uuid4().hex[:12]  # connection IDs are unique across processes and hosts
_connection_ids = itertools.count(1)


class _RedisCalls:
    """The websocket's calls to Redis, a client's always on the same thread, in order; at most
    MAX_QUEUED_CALLS waiting on a thread."""

    def __init__(self, threads: int) -> None:
        self._threads = [ThreadPoolExecutor(max_workers=1, thread_name_prefix=f"ws-redis-{n}") for n in range(threads)]
        self._queued = [0] * threads
        self._lock = threading.Lock()
        # How many handshakes decided without Redis since it was last said, by why: said at most
        # once every SAID_EVERY_SECONDS (a reconnect storm decides thousands so).
        self._undecided: dict[str, int] = {}
        self._said_at = -SAID_EVERY_SECONDS

    def of(self, client_set: str) -> int:
        return zlib.crc32(client_set.encode()) % len(self._threads)

    def submit(self, client_set: str, call: Callable[..., T], *args: Any) -> Future[T] | None:
        """`call(*args)` queued on the client's thread; None (nothing queued) when that thread
        has MAX_QUEUED_CALLS waiting already."""
        thread = self.of(client_set)
        with self._lock:
            if self._queued[thread] >= MAX_QUEUED_CALLS:
                return None
            self._queued[thread] += 1
        future = self._threads[thread].submit(call, *args)
        future.add_done_callback(lambda _: self._done(thread))
        return future

    def _done(self, thread: int) -> None:
        with self._lock:
            self._queued[thread] -= 1

    async def within_bound(self, client_set: str, call: Callable[..., T], *args: Any) -> tuple[T | None, bool]:
        """`call(*args)` on the client's thread, and whether it was queued at all: (None, True)
        if it has not answered within twice REDIS_TIMEOUT_MS (it still runs, in its turn), (None,
        False) if the thread's queue was full."""
        future = self.submit(client_set, call, *args)
        if future is None:
            self._decided_without(f"found {MAX_QUEUED_CALLS} calls waiting on its thread")
            return None, False
        try:
            async with asyncio.timeout(2 * settings.REDIS_TIMEOUT_SECONDS):
                return await asyncio.shield(asyncio.wrap_future(future)), True
        except TimeoutError:
            self._decided_without(f"was not answered within {2 * settings.REDIS_TIMEOUT_SECONDS:g} s")
            return None, True

    def _decided_without(self, why: str) -> None:
        self._undecided[why] = self._undecided.get(why, 0) + 1
        now = time.monotonic()
        if now - self._said_at >= SAID_EVERY_SECONDS:
            said = "; ".join(f"{count} {why}" for why, count in self._undecided.items())
            logger.warning("websocket calls to Redis decided without it (this process counted them alone) since "
                           "last said: %s", said)
            self._undecided, self._said_at = {}, now


_redis_calls = _RedisCalls(REDIS_THREADS)


async def spend_connect(scope: dict[str, Any]) -> int | None:
    """Spends one of the connects BOUNTY_WS_CONNECTS_PER_MINUTE allows the websocket's client: when
    it has none left this minute, the whole seconds until it has; else None."""
    limit: int = settings.BOUNTY_WS_CONNECTS_PER_MINUTE
    if not limit:
        return None
    client = scope_client(scope)
    spent, _ = await _redis_calls.within_bound(f"ws:connections:{client}", spend, "ws-connects", client,
                                               CONNECTS_WINDOW_SECONDS)
    if spent is None:  # Redis too slow: this process counts the connect, as while Redis is away
        spent = spend("ws-connects", client, CONNECTS_WINDOW_SECONDS, here=True)
    return spent.retry_after if spent.count > limit else None


class ConnectionSlot:
    """One connection's place under the per-process and per-client caps."""

    def __init__(self, scope: dict[str, Any]) -> None:
        self.client = scope_client(scope)  # what the caps count the client by: an IPv6 client's /64
        self.key = f"ws:connections:{self.client}"  # the client's set in Redis
        self.member = f"{_PROCESS}:{next(_connection_ids)}"
        self.shared: RedisCache | None = None  # where the connection is being admitted or is counted
        self.admitted = False

    async def acquire(self) -> bool:
        """Takes the slot; False when a cap is reached (nothing is then held). `release()` gives
        back whatever was taken, also when the acquisition is interrupted."""
        shared = _shared()
        if len(_open) >= settings.BOUNTY_WS_MAX_CONNECTIONS or (
                shared is None and _open.of(self.client) >= settings.BOUNTY_WS_MAX_CONNECTIONS_PER_CLIENT):
            return False
        _open.add(self)
        if shared is None:
            self.admitted = True
            return True
        self.shared = shared
        _renewal.start()
        cap: int = settings.BOUNTY_WS_MAX_CONNECTIONS_PER_CLIENT
        admitted, queued = await _redis_calls.within_bound(self.key, shared.add_capped, self.key, self.member, cap,
                                                           ENTRY_SECONDS)
        # Without Redis, this process's own count decides; the renewal adds the connection to the
        # shared count once Redis answers again.
        self.admitted = admitted if admitted is not None else _open.of(self.client) <= cap
        if not self.admitted:
            _open.discard(self)
            if admitted is None and queued:  # the admission may still reach Redis: take it back after it
                self._remove()
        return self.admitted

    def release(self) -> None:
        """Gives the slot back (nothing if none is held). Synchronous, so that no cancellation can
        interrupt it: the removal from Redis is queued on the client's thread, behind the
        admission and any renewal already queued."""
        if not _open.discard(self) or self.shared is None:
            return
        self._remove()

    def _remove(self) -> None:
        assert self.shared is not None
        removal = _redis_calls.submit(self.key, self.shared.remove_members, {self.key: [self.member]})
        if removal is not None:  # else it expires within ENTRY_SECONDS
            removal.add_done_callback(_log_failed_removal)


def _log_failed_removal(removal: Future[None]) -> None:
    if not removal.cancelled() and (error := removal.exception()) is not None:
        logger.warning("could not remove a websocket connection from the shared count; it stops counting "
                       "within %s s", ENTRY_SECONDS, exc_info=error)


class _OpenConnections:
    """This process's open connections (admitted, or being admitted), by client."""

    def __init__(self) -> None:
        self._by_client: defaultdict[str, set[ConnectionSlot]] = defaultdict(set)
        self._count = 0

    def __len__(self) -> int:
        return self._count

    def of(self, client: str) -> int:
        slots = self._by_client.get(client)
        return len(slots) if slots else 0

    def add(self, slot: ConnectionSlot) -> None:
        self._by_client[slot.client].add(slot)
        self._count += 1

    def discard(self, slot: ConnectionSlot) -> bool:
        """Removes the slot; False if it was not there."""
        slots = self._by_client.get(slot.client)
        if slots is None or slot not in slots:
            return False
        slots.remove(slot)
        if not slots:
            del self._by_client[slot.client]
        self._count -= 1
        return True

    def shared_members(self) -> dict[str, list[str]]:
        """The members in Redis of the connections admitted there, by key."""
        members: dict[str, list[str]] = {}
        for slots in self._by_client.values():
            for slot in slots:
                if slot.admitted and slot.shared is not None:
                    members.setdefault(slot.key, []).append(slot.member)
        return members


class _Renewal:
    """Renews this process's entries in Redis every RENEW_SECONDS, from its first admission on,
    each client's on its own thread (`_RedisCalls`)."""

    def __init__(self) -> None:
        self._task: asyncio.Task[None] | None = None

    def start(self) -> None:
        if self._task is None or self._task.done() or self._task.get_loop() is not asyncio.get_running_loop():
            self._task = asyncio.create_task(self._run())

    async def _run(self) -> None:
        while True:
            await asyncio.sleep(RENEW_SECONDS)
            shared = _shared()
            if shared is None:
                continue
            by_thread: defaultdict[int, dict[str, list[str]]] = defaultdict(dict)
            for key, members in _open.shared_members().items():
                by_thread[_redis_calls.of(key)][key] = members
            queued = [_redis_calls.submit(next(iter(members)), shared.renew_members, members, ENTRY_SECONDS)
                      for members in by_thread.values()]
            renewals = [asyncio.wrap_future(renewal) for renewal in queued if renewal is not None]
            for renewal in await asyncio.gather(*renewals, return_exceptions=True):
                if isinstance(renewal, Exception):
                    logger.warning("could not renew the websocket connections in the shared count; retrying in %s s",
                                   RENEW_SECONDS, exc_info=renewal)


_open = _OpenConnections()
_renewal = _Renewal()


@atexit.register
def _remove_all_shared() -> None:
    """Removes this process's entries from Redis at its exit, for the connections it did not end
    (daphne may stop without ending its applications)."""
    shared = _shared()
    members = _open.shared_members()
    if shared is not None and members:
        try:
            shared.remove_members(members)
        except Exception:
            logger.warning("could not remove this process's websocket connections from the shared count; they "
                           "stop counting within %s s", ENTRY_SECONDS, exc_info=True)


# ---------------------------------------------------------------------------- snapshots sent at once


class SnapshotSlot:
    """A snapshot's place among its client's (BOUNTY_WS_SNAPSHOT_READERS_PER_CLIENT at once, in
    this process), held inside `async with`."""

    def __init__(self, client: str) -> None:
        self.client = client  # `scope_client`
        self._held: asyncio.Semaphore | None = None

    async def __aenter__(self) -> SnapshotSlot:
        """Waits for the client's slot: Refusal (1013) past BOUNTY_WS_SNAPSHOT_WAIT_SECONDS,
        holding nothing."""
        wait: int = settings.BOUNTY_WS_SNAPSHOT_WAIT_SECONDS
        semaphore = _snapshot_slots.join(self.client)
        try:
            with WS_SNAPSHOTS_WAITING.track_inprogress():
                async with asyncio.timeout(wait):
                    await semaphore.acquire()
                    self._held = semaphore
        except BaseException as error:
            self._release()
            if isinstance(error, TimeoutError):
                raise Refusal(TRY_AGAIN_LATER, f"no snapshot slot free within {wait} s; try again later") from None
            raise
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        self._release()

    def _release(self) -> None:
        if self._held is not None:
            self._held.release()
            self._held = None
        _snapshot_slots.leave(self.client)


class _SnapshotSlots:
    """This process's snapshot semaphores, one per client for as long as a snapshot of the client
    holds it or waits for it (each made with the setting as it is then)."""

    def __init__(self) -> None:
        self._by_client: dict[str, asyncio.Semaphore] = {}
        self._users: defaultdict[str, int] = defaultdict(int)

    def join(self, client: str) -> asyncio.Semaphore:
        """The client's semaphore, for one more snapshot (`leave` when it is done with it)."""
        self._users[client] += 1
        if client not in self._by_client:
            self._by_client[client] = asyncio.Semaphore(settings.BOUNTY_WS_SNAPSHOT_READERS_PER_CLIENT)
        return self._by_client[client]

    def leave(self, client: str) -> None:
        self._users[client] -= 1
        if self._users[client] <= 0:
            del self._users[client], self._by_client[client]


_snapshot_slots = _SnapshotSlots()


# ---------------------------------------------------------------------------- messages from a client


class MessageBudget:
    """What a client may send: BOUNTY_WS_MAX_MESSAGES per BOUNTY_WS_MESSAGE_WINDOW_SECONDS (a
    sliding window), each at most BOUNTY_WS_MAX_MESSAGE_BYTES."""

    def __init__(self) -> None:
        self._times: deque[float] = deque()

    def spend(self, size: int) -> bool:
        """Counts a message of `size` bytes; whether the client is still within its budget."""
        if size > settings.BOUNTY_WS_MAX_MESSAGE_BYTES:
            return False
        now = time.monotonic()
        window: int = settings.BOUNTY_WS_MESSAGE_WINDOW_SECONDS
        while self._times and self._times[0] <= now - window:
            self._times.popleft()
        self._times.append(now)
        return len(self._times) <= settings.BOUNTY_WS_MAX_MESSAGES
