"""The limits of the websocket `/ws/events` (docs/api.md, Limits and close codes), each closing
with 1008, but for a snapshot's wait for a slot (1013, try again later).

How often a client opens connections is limited (BOUNTY_WS_CONNECTS_PER_MINUTE, in fixed windows
of a minute), counted as the HTTP rate limits count requests (bountysite.ratelimit.spend): in
Redis, shared by every process, or per process without it. Past it the handshake is answered as
an HTTP request past the rate limit is, 429 with Retry-After (bountysite/daphne_bend.py, 6), or,
under a server without that extension, accepted and closed with 1008 and the same detail.

Connections are capped per process (BOUNTY_WS_MAX_CONNECTIONS) and per client address
(BOUNTY_WS_MAX_CONNECTIONS_PER_CLIENT, shared by every process with Redis). Both caps count the
open connections themselves, never a counter that a lost or missed decrement would leave too high:

- Each process keeps its open connections, by client address, in memory; they are added and
  removed without an await in between, so concurrent connections cannot race. They answer the
  per-process cap, and the per-client cap when there is no Redis (each process then counts alone).
- With Redis, a client's connections are the members of a sorted set (`ws:connections:<address>`),
  each scored with the time it expires at. One Lua script admits a connection: it drops the
  expired members, counts the others and adds the new one if the count is under the cap. The
  connection's process removes it when it closes, and renews the expiry of all its connections
  every RENEW_SECONDS (adding back any a flush of Redis lost), so the members of a process that
  died without removing them (killed, its host lost) stop counting within ENTRY_SECONDS.
- While Redis cannot be reached (bountysite/redis_reach.py), the per-client cap is counted per
  process, as without Redis; the connections admitted meanwhile join the shared count at the
  first renewal after Redis answers again, and removals missed meanwhile expire.

A slot is given back however the connection ends: the client's close, the server's 1008 (a
refusal, a flood of messages, a client too slow to read), a dropped TCP connection, or daphne
cancelling the application. The release is synchronous, so no cancellation can interrupt it: it
drops the connection from memory and queues its removal from Redis, which one thread makes in
order behind the connection's admission. At the process's exit, what it still holds in Redis is
removed (daphne may stop without ending its applications).

A client address is sent at most BOUNTY_WS_SNAPSHOT_READERS_PER_CLIENT snapshots at once per
process (`SnapshotSlot`); a snapshot waiting longer than BOUNTY_WS_SNAPSHOT_WAIT_SECONDS for its
slot is closed with 1013 (try again later). Snapshots are sent from spools (records.spools,
records.ws.snapshot), so a slow reader holds no database connection that another client needs.

Messages from a client are limited in number per window and in size. The client address is found
as for HTTP (bountysite/client_address.py): X-Forwarded-For is believed only from trusted proxies,
and the caps count an IPv6 client by its /64, as the HTTP rate limit does.
"""

from __future__ import annotations

import asyncio
import atexit
import itertools
import logging
import time
import uuid
from collections import defaultdict, deque
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any

from django.conf import settings
from django.core.cache import caches

from bountysite.cache import RedisCache
from bountysite.client_address import client_address, client_key
from bountysite.ratelimit import spend
from records.metrics import WS_SNAPSHOTS_WAITING

logger = logging.getLogger(__name__)

POLICY_VIOLATION = 1008
INTERNAL_ERROR = 1011
TRY_AGAIN_LATER = 1013
RENEW_SECONDS = 20.0  # how often a process renews its connections' entries in Redis
ENTRY_SECONDS = 60.0  # how long an entry counts without being renewed: its process died

_PROCESS = uuid.uuid4().hex[:12]  # connection IDs are unique across processes and hosts
_connection_ids = itertools.count(1)


def scope_client_address(scope: dict[str, Any]) -> str:
    """The client's address from an ASGI scope, by the rule HTTP requests follow too."""
    peer = str((scope.get("client") or ("", 0))[0])
    forwarded = [value.decode("latin1") for name, value in scope.get("headers", []) if name == b"x-forwarded-for"]
    return client_address(peer, ",".join(forwarded) or None, trusted=settings.BOUNTY_TRUSTED_PROXIES)


CONNECTS_WINDOW_SECONDS = 60


async def connects_too_often(address: str) -> int | None:
    """Counts a connection the client at `address` opens: when the client opened more than
    BOUNTY_WS_CONNECTS_PER_MINUTE this minute, the whole seconds until it may again; else None."""
    limit: int = settings.BOUNTY_WS_CONNECTS_PER_MINUTE
    if not limit:
        return None
    spent = await asyncio.get_running_loop().run_in_executor(
        _redis_calls, spend, "ws-connects", client_key(address), CONNECTS_WINDOW_SECONDS)
    return spent.retry_after if spent.count > limit else None


class ConnectionSlot:
    """One connection's place under the per-process and per-client caps."""

    def __init__(self, address: str) -> None:
        self.address = client_key(address)  # what the caps count the client by: an IPv6 client's /64
        self.key = f"ws:connections:{self.address}"  # the client's set in Redis
        self.member = f"{_PROCESS}:{next(_connection_ids)}"
        self.shared: RedisCache | None = None  # where the connection is being admitted or is counted
        self.admitted = False

    async def acquire(self) -> bool:
        """Takes the slot; False when a cap is reached (nothing is then held). `release()` gives
        back whatever was taken, also when the acquisition is interrupted."""
        shared = _shared_count()
        if len(_open) >= settings.BOUNTY_WS_MAX_CONNECTIONS or (
                shared is None and _open.of(self.address) >= settings.BOUNTY_WS_MAX_CONNECTIONS_PER_CLIENT):
            return False
        _open.add(self)
        if shared is None:
            self.admitted = True
            return True
        self.shared = shared
        _renewal.start()
        cap: int = settings.BOUNTY_WS_MAX_CONNECTIONS_PER_CLIENT
        admitted = await asyncio.get_running_loop().run_in_executor(
            _redis_calls, shared.add_capped, self.key, self.member, cap, ENTRY_SECONDS)
        # Without Redis, this process's own count decides; the renewal adds the connection to the
        # shared count once Redis answers again.
        self.admitted = admitted if admitted is not None else _open.of(self.address) <= cap
        if not self.admitted:
            _open.discard(self)
        return self.admitted

    def release(self) -> None:
        """Gives the slot back (nothing if none is held). Synchronous, so that no cancellation can
        interrupt it: the removal from Redis is queued behind the admission and any renewal
        already queued, so it reaches Redis after them."""
        if not _open.discard(self) or self.shared is None:
            return
        _redis_calls.submit(self.shared.remove_members, {self.key: [self.member]}).add_done_callback(
            _log_failed_removal)


def _shared_count() -> RedisCache | None:
    """The cache the processes share the per-client count through; None without Redis."""
    shared = caches["default"]
    return shared if isinstance(shared, RedisCache) else None


def _log_failed_removal(removal: Future[None]) -> None:
    if not removal.cancelled() and (error := removal.exception()) is not None:
        logger.warning("could not remove a websocket connection from the shared count; it stops counting "
                       "within %s s", ENTRY_SECONDS, exc_info=error)


class _OpenConnections:
    """This process's open connections (admitted, or being admitted), by client address."""

    def __init__(self) -> None:
        self._by_address: defaultdict[str, set[ConnectionSlot]] = defaultdict(set)
        self._count = 0

    def __len__(self) -> int:
        return self._count

    def of(self, address: str) -> int:
        slots = self._by_address.get(address)
        return len(slots) if slots else 0

    def add(self, slot: ConnectionSlot) -> None:
        self._by_address[slot.address].add(slot)
        self._count += 1

    def discard(self, slot: ConnectionSlot) -> bool:
        """Removes the slot; False if it was not there."""
        slots = self._by_address.get(slot.address)
        if slots is None or slot not in slots:
            return False
        slots.remove(slot)
        if not slots:
            del self._by_address[slot.address]
        self._count -= 1
        return True

    def shared_members(self) -> dict[str, list[str]]:
        """The members in Redis of the connections admitted there, by key."""
        members: dict[str, list[str]] = {}
        for slots in self._by_address.values():
            for slot in slots:
                if slot.admitted and slot.shared is not None:
                    members.setdefault(slot.key, []).append(slot.member)
        return members


class _Renewal:
    """Renews this process's entries in Redis every RENEW_SECONDS, from its first admission on."""

    def __init__(self) -> None:
        self._task: asyncio.Task[None] | None = None

    def start(self) -> None:
        if self._task is None or self._task.done() or self._task.get_loop() is not asyncio.get_running_loop():
            self._task = asyncio.create_task(self._run())

    async def _run(self) -> None:
        loop = asyncio.get_running_loop()
        while True:
            await asyncio.sleep(RENEW_SECONDS)
            shared = _shared_count()
            members = _open.shared_members()
            if shared is None or not members:
                continue
            try:
                await loop.run_in_executor(_redis_calls, shared.renew_members, members, ENTRY_SECONDS)
            except Exception:
                logger.warning("could not renew the websocket connections in the shared count; retrying in %s s",
                               RENEW_SECONDS, exc_info=True)


_open = _OpenConnections()
_renewal = _Renewal()
# One thread makes every call to Redis, in the order they are made: a removal then never
# overtakes its connection's admission, nor a renewal that still lists the connection. (It
# also keeps admissions first come, first served.)
_redis_calls = ThreadPoolExecutor(max_workers=1, thread_name_prefix="ws-connection-count")


@atexit.register
def _remove_all_shared() -> None:
    """Removes this process's entries from Redis at its exit, for the connections it did not end
    (daphne may stop without ending its applications)."""
    shared = _shared_count()
    members = _open.shared_members()
    if shared is not None and members:
        try:
            shared.remove_members(members)
        except Exception:
            logger.warning("could not remove this process's websocket connections from the shared count; they "
                           "stop counting within %s s", ENTRY_SECONDS, exc_info=True)


class Refusal(Exception):
    """The stream ends and the server closes the connection with `code` and `reason` (at most 123
    bytes of UTF-8, what a close frame holds)."""

    def __init__(self, code: int, reason: str) -> None:
        super().__init__(reason)
        self.code = code
        self.reason = reason


class SnapshotSlot:
    """A snapshot's place among its client address's (BOUNTY_WS_SNAPSHOT_READERS_PER_CLIENT at
    once, in this process), held inside `async with`."""

    def __init__(self, address: str) -> None:
        self.address = client_key(address)  # as the connection caps count the client: an IPv6 client's /64
        self._held: asyncio.Semaphore | None = None

    async def __aenter__(self) -> SnapshotSlot:
        """Waits for the address's slot: Refusal (1013) past BOUNTY_WS_SNAPSHOT_WAIT_SECONDS,
        holding nothing."""
        wait: int = settings.BOUNTY_WS_SNAPSHOT_WAIT_SECONDS
        semaphore = _snapshot_slots.join(self.address)
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
        _snapshot_slots.leave(self.address)


class _SnapshotSlots:
    """This process's snapshot semaphores, one per client address for as long as a snapshot of the
    address holds it or waits for it."""

    def __init__(self) -> None:
        self._by_address: dict[str, asyncio.Semaphore] = {}
        self._users: defaultdict[str, int] = defaultdict(int)

    def join(self, address: str) -> asyncio.Semaphore:
        """The address's semaphore, for one more snapshot (`leave` when it is done with it)."""
        self._users[address] += 1
        if address not in self._by_address:
            self._by_address[address] = asyncio.Semaphore(settings.BOUNTY_WS_SNAPSHOT_READERS_PER_CLIENT)
        return self._by_address[address]

    def leave(self, address: str) -> None:
        self._users[address] -= 1
        if self._users[address] <= 0:
            del self._users[address], self._by_address[address]


_snapshot_slots = _SnapshotSlots()


class MessageBudget:
    """What a client may send: BOUNTY_WS_MAX_MESSAGES per BOUNTY_WS_MESSAGE_WINDOW_SECONDS (a
    sliding window), each at most BOUNTY_WS_MAX_MESSAGE_BYTES."""

    def __init__(self) -> None:
        self._times: deque[float] = deque()

    def allows(self, size: int) -> bool:
        if size > settings.BOUNTY_WS_MAX_MESSAGE_BYTES:
            return False
        now = time.monotonic()
        window: int = settings.BOUNTY_WS_MESSAGE_WINDOW_SECONDS
        while self._times and self._times[0] <= now - window:
            self._times.popleft()
        self._times.append(now)
        return len(self._times) <= settings.BOUNTY_WS_MAX_MESSAGES
