"""The delivery worker (`manage.py run_webhooks`): every endpoint is sent the active deployment's
change log, in order, each change until it answers 2xx (docs/api.md, Webhooks).

- **Which endpoints**: those with changes after their position, enabled, due (no retry
  pending), and not leased by another worker. A worker leases up to BOUNTY_WEBHOOKS_CONCURRENCY of
  them (`Ledger.claim`: `SELECT … FOR UPDATE SKIP LOCKED`, then a lease of
  BOUNTY_WEBHOOKS_LEASE_SECONDS that it renews while it holds them), so several workers on several
  machines share them and one endpoint is never sent two changes at once. A worker killed outright leaves its leases to
  expire; one stopped (SIGTERM) hands them back at once.
- **What**: the changes after the endpoint's position, read once for every endpoint from a
  window of the newest changes (`Window`), or from the database for an endpoint further behind.
  A position this history cannot vouch for (a restore, a promoted standby, another active
  deployment) or no longer holds (pruned) gets a `resync` event and the endpoint continues from
  the newest position. The endpoint's filters skip changes it does not want; `resync` always goes.
- **When it fails**: the endpoint waits (webhooks.schedule) and is sent the same change again,
  with the same `webhook-id`; `410 Gone` or failing longer than BOUNTY_WEBHOOKS_DISABLE_AFTER_HOURS
  disables it (staff are told: webhooks.notices). Its position stays where it was.
- **What is written**: positions and attempts are written together every FLUSH_SECONDS (`Ledger`),
  so a worker stopped between two flushes sends those changes again: at least once. The leases
  are renewed every RENEW_SECONDS, and looked at every CHECK_SECONDS for those staff took back.
"""

from __future__ import annotations

import asyncio
import logging
import math
import os
import socket
import time
from collections import deque
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any, NamedTuple, cast

from django.conf import settings
from django.db import DatabaseError, connection, transaction
from django.db.models import F, Q
from django.utils import timezone

from indexer.models import ChangeLogEntry
from records.changes import MessageType
from records.history import Position
from records.selectors import (
    Change,
    active_deployment_id,
    changes_after,
    changes_between,
    genesis_position,
    head_position,
)
from records.ws.messages import LiveMessage, encode
from webhooks import notices, schedule
from webhooks.database_thread import DatabaseThread
from webhooks.delivery import Outcome, Request, Sender
from webhooks.metrics import METRICS
from webhooks.models import ATTEMPTS_KEPT, RESPONSE_HEAD_CHARS, Endpoint, WorkerBeat
from webhooks.selection import wants

logger = logging.getLogger(__name__)

FLUSH_SECONDS = 0.1  # between two writes of positions and attempts
# Between two renewals of the leases held: a lease (BOUNTY_WEBHOOKS_LEASE_SECONDS, at least
# 2 x the timeout + 1 s) keeps more than a delivery's time left (Held.lease_lasts) between them.
RENEW_SECONDS = 5.0
# Between two looks at the leases held for those staff took back (webhooks.endpoints.TAKE_BACK_SECONDS):
# one is dropped well before another worker may claim it. A read: renewing every held row this often
# was most of what a worker wrote.
CHECK_SECONDS = 0.5
BEAT_SECONDS = 5.0  # between two heartbeats (and observations of every endpoint's backlog)
LINGER_SECONDS = 5.0  # an endpoint at the head is held this long for the next change
WINDOW = 10_000  # the newest changes held in memory for every endpoint
READ_CHUNK = 500  # changes read at once for one endpoint behind the window


def worker_name() -> str:
    return f"{socket.gethostname()}:{os.getpid()}"


# ---------------------------------------------------------------------------- what is sent


@dataclass(frozen=True)
class Event:
    """A change as an endpoint is sent it: its envelope (the websocket's live message) and where
    the endpoint stands after it."""

    type: str
    body: bytes
    after: Position
    payload: Any
    id_part: str  # what names it in webhook-id, with the endpoint
    committed: datetime | None = None

    @classmethod
    def of(cls, change: Change) -> Event:
        body = encode(LiveMessage(type=cast(MessageType, change.type), payload=change.payload, seq=change.seq,
                                  position=str(change.position)))
        return cls(change.type, body, change.position, change.payload, f"{change.seq}_{change.digest[:16]}",
                   change.committed)

    @classmethod
    def resync(cls, head: Position, reason: str) -> Event:
        """Sent when the endpoint's position is of another history, or no longer held: the records
        are to be read anew (GET /bounties, /submissions, /disputes), and changes follow from `head`."""
        payload = {"reason": reason, "position": str(head)}
        body = encode(LiveMessage(type=MessageType.RESYNC, payload=payload, seq=head.seq, position=str(head)))
        return cls(MessageType.RESYNC, body, head, payload, f"resync_{head.seq}_{head.digest[:16]}")


class Window:
    """The newest changes of the active deployment, read once for every endpoint."""

    def __init__(self, size: int = WINDOW) -> None:
        self.deployment_id: int | None = None
        self._events: deque[Event] = deque(maxlen=size)
        self._base: Position | None = None  # the position before the first of them

    def refresh(self, deployment_id: int, head: Position) -> None:
        """Reads the changes through `head` (in the database thread)."""
        if deployment_id != self.deployment_id or self._base is None:
            self._restart(deployment_id, head)
            return
        last = self._events[-1].after if self._events else self._base
        if last == head:
            return
        while last.seq < head.seq:
            changes = changes_after(deployment_id, last, head.seq, READ_CHUNK)
            if changes is None:  # another history: start again from the newest
                self._restart(deployment_id, head)
                return
            if not changes:
                break
            for change in changes:
                if len(self._events) == self._events.maxlen:
                    self._base = self._events[0].after
                self._events.append(Event.of(change))
            last = self._events[-1].after
        if last.seq > head.seq:
            self._restart(deployment_id, head)

    def _restart(self, deployment_id: int, head: Position) -> None:
        self.deployment_id = deployment_id
        self._events.clear()
        self._base = head

    def after(self, position: Position, limit: int) -> list[Event] | None:
        """The events after `position`, at most `limit`, when the window vouches for it; None when
        it does not hold it (the database is asked)."""
        if self._base is None:
            return None
        if position == self._base:
            start = 0
        else:
            first = self._events[0].after.seq if self._events else None
            if first is None or not first <= position.seq <= self._events[-1].after.seq:
                return None
            start = position.seq - first + 1
            if self._events[start - 1].after != position:
                return None
        return [self._events[i] for i in range(start, min(len(self._events), start + limit))]


# ---------------------------------------------------------------------------- what is written


@dataclass
class Held:
    """An endpoint this worker holds, as it stands."""

    pk: int
    url: str
    secrets: list[str]
    event_types: frozenset[str]
    bounty_id: int | None
    actor: str | None
    position: Position | None
    deployment_id: int | None
    failing_since: datetime | None
    failures: int
    attempts_made: int
    renewed: float = field(default_factory=time.monotonic)  # when its lease was last renewed (monotonic)
    dirty: bool = False
    released: bool = False
    next_attempt_at: datetime | None = None
    delivered_at: datetime | None = None
    disabled_reason: str = ""
    lost: bool = False  # its lease was taken back
    task: asyncio.Task[None] | None = None

    def lease_lasts(self) -> bool:
        """Whether its lease surely outlasts one more delivery: past it, another worker may take
        the endpoint (a margin of a second for the clocks)."""
        left = settings.BOUNTY_WEBHOOKS_LEASE_SECONDS - (time.monotonic() - self.renewed)
        return left > settings.BOUNTY_WEBHOOKS_TIMEOUT_SECONDS + 1


@dataclass(frozen=True)
class Attempt:
    endpoint: int
    number: int
    webhook_id: str
    type: str
    seq: int | None
    at: datetime
    outcome: Outcome


class Ledger:
    """The worker's reads and writes of the endpoints' rows, in its one database thread."""

    def __init__(self, owner: str) -> None:
        self.owner = owner
        self.held: dict[int, Held] = {}
        self.share = 0  # counted at the first beat (count_share)
        self._attempts: list[Attempt] = []
        self._renewed = 0.0  # when the leases were last renewed (monotonic)
        self._checked = 0.0  # when they were last looked at for those taken back

    def claim(self, deployment_id: int, head: Position, room: int, holding: set[int]) -> list[Held]:
        """Leases up to `room` endpoints that have changes to be sent, are due, and no worker holds,
        and no more than this worker's share of the enabled endpoints (divided among the workers
        seen lately), so that the workers share them."""
        now = timezone.now()
        room = min(room, self.share - len(holding))
        if room <= 0:
            return []
        at_head = Q(deployment_id=deployment_id, position_seq=head.seq, position_digest=head.digest)
        with transaction.atomic():
            rows = list(Endpoint.objects.select_for_update(skip_locked=True)
                        .filter(Q(next_attempt_at__isnull=True) | Q(next_attempt_at__lte=now), enabled=True)
                        .filter(Q(lease_until__isnull=True) | Q(lease_until__lt=now))
                        .exclude(at_head).exclude(pk__in=holding)
                        .order_by(F("next_attempt_at").asc(nulls_first=True), "pk")[:room])
            if not rows:
                return []
            Endpoint.objects.filter(pk__in=[row.pk for row in rows]).update(
                lease_owner=self.owner, lease_until=now + timedelta(seconds=settings.BOUNTY_WEBHOOKS_LEASE_SECONDS))
        claimed = []
        for row in rows:
            secrets = [row.secret]
            if row.previous_secret and row.previous_secret_until and row.previous_secret_until > now:
                secrets.append(row.previous_secret)
            position = (Position(row.position_seq, row.position_digest) if row.position_seq is not None
                        and row.deployment_id is not None else None)
            held = Held(row.pk, row.url, secrets, frozenset(row.event_types or ()), row.bounty_id, row.actor,
                        position, row.deployment_id, row.failing_since, row.failures, row.attempts_made)
            claimed.append(held)
        return claimed

    def count_share(self, now: datetime) -> None:
        """This worker's share of the enabled endpoints: as many as each of the workers seen lately."""
        others = (WorkerBeat.objects.filter(last_seen__gte=now - timedelta(seconds=3 * BEAT_SECONDS))
                  .exclude(name=self.owner).count())
        self.share = max(1, math.ceil(Endpoint.objects.filter(enabled=True).count() / (others + 1)))

    def attempted(self, held: Held, webhook_id: str, event: Event, at: datetime, outcome: Outcome) -> None:
        self._attempts.append(Attempt(held.pk, held.attempts_made, webhook_id, event.type,
                                      event.after.seq if event.type != MessageType.RESYNC else None, at, outcome))
        held.attempts_made += 1
        held.dirty = True

    def hold(self, claimed: list[Held]) -> None:
        for held in claimed:
            self.held[held.pk] = held

    def take(self) -> Writes:
        """What to write (on the event loop, so that no endpoint changes while it is copied):
        the endpoints changed since the last take, the attempts, and the leases to renew (every
        RENEW_SECONDS) or to look at (every CHECK_SECONDS)."""
        now = time.monotonic()
        writes = Writes(self._attempts, [], [], [], renew=now - self._renewed >= RENEW_SECONDS)
        self._attempts = []
        check = writes.renew or now - self._checked >= CHECK_SECONDS
        for pk, held in list(self.held.items()):
            if held.dirty or held.released:
                position = held.position
                writes.rows.append(Row(
                    pk, position.seq if position else None, position.digest if position else "",
                    held.deployment_id, held.failing_since, held.failures, held.attempts_made, held.next_attempt_at,
                    held.delivered_at, held.disabled_reason, held.released))
                held.dirty = False
                writes.changed.append(held)
            if held.released:
                del self.held[pk]
            elif check:
                writes.kept.append(pk)
        return writes

    def write(self, writes: Writes) -> set[int]:
        """Writes them in one transaction (in the database thread); the endpoints of `kept` whose
        lease another took meanwhile (staff: webhooks.endpoints) are returned, to be dropped."""
        now, lease = timezone.now(), timedelta(seconds=settings.BOUNTY_WEBHOOKS_LEASE_SECONDS)
        lost: set[int] = set()
        with transaction.atomic():
            if writes.rows:
                _update_endpoints(self.owner, writes.rows)
            if writes.attempts:
                _record_attempts(_newest_per_slot(writes.attempts))
            if writes.kept:
                held = ", ".join(["%s"] * len(writes.kept))
                with connection.cursor() as cursor:
                    if writes.renew:
                        cursor.execute(_RENEW.format(held=held), [moment(now + lease), self.owner, *writes.kept])
                    else:
                        cursor.execute(_STILL_HELD.format(held=held), [self.owner, *writes.kept])
                    lost = set(writes.kept) - {pk for (pk,) in cursor.fetchall()}
        return lost

    def restore(self, writes: Writes) -> None:
        """What a failed write held, to be written at the next take (on the event loop)."""
        self._attempts[:0] = writes.attempts
        for held in writes.changed:
            held.dirty = True
            self.held.setdefault(held.pk, held)

    def renewed(self, writes: Writes, at: float) -> None:
        """The leases of `writes.kept` were looked at, and renewed when `writes.renew`, at `at` (or before)."""
        if writes.kept:
            self._checked = at
        if not writes.renew:
            return
        self._renewed = at
        for pk in writes.kept:
            held = self.held.get(pk)
            if held is not None:
                held.renewed = at

    def drop(self, lost: set[int]) -> None:
        """Stops serving the endpoints whose lease was taken back (on the event loop)."""
        for pk in lost:
            held = self.held.pop(pk, None)
            if held is not None and held.task is not None:
                held.task.cancel()

    def release_all(self) -> Writes:
        for held in self.held.values():
            held.released = True
        return self.take()


class Row(NamedTuple):
    """An endpoint's columns as a worker writes them."""

    pk: int
    position_seq: int | None
    position_digest: str
    deployment_id: int | None
    failing_since: datetime | None
    failures: int
    attempts_made: int
    next_attempt_at: datetime | None
    delivered_at: datetime | None  # None: as it was
    disabled_reason: str  # "": enabled as it was; else disabled, saying why
    released: bool  # handed back: no worker holds it


# One statement for every endpoint a write changes, sent as one batch (executemany): a worker
# writes up to BOUNTY_WEBHOOKS_CONCURRENCY of them ten times a second, which the ORM's
# statement per endpoint cannot keep up with. Only while this worker still holds the endpoint.
_UPDATE = """
UPDATE webhooks_endpoint SET position_seq = %s, position_digest = %s, deployment_id = %s, failing_since = %s,
    failures = %s, attempts_made = %s, next_attempt_at = %s, delivered_at = COALESCE(%s, delivered_at),
    enabled = CASE WHEN %s = '' THEN enabled ELSE %s END,
    disabled_reason = CASE WHEN %s = '' THEN disabled_reason ELSE %s END,
    lease_owner = CASE WHEN %s THEN '' ELSE lease_owner END,
    lease_until = CASE WHEN %s THEN NULL ELSE lease_until END
WHERE id = %s AND lease_owner = %s
"""


# The leases of the endpoints this worker still holds, renewed in one statement; those it no
# longer holds (staff took them back) are not returned.
_RENEW = "UPDATE webhooks_endpoint SET lease_until = %s WHERE lease_owner = %s AND id IN ({held}) RETURNING id"
_STILL_HELD = "SELECT id FROM webhooks_endpoint WHERE lease_owner = %s AND id IN ({held})"

# Attempts into their slots of the endpoints' rings, in place of those there: a statement of up to
# ATTEMPTS_A_STATEMENT rows (the ORM's bulk_create makes a model instance of each, at thousands a second).
_RECORD_ATTEMPTS = """
INSERT INTO webhooks_deliveryattempt (endpoint_id, slot, number, webhook_id, type, seq, at, status, latency_ms, outcome,
    response_head)
VALUES {rows}
ON CONFLICT (endpoint_id, slot) DO UPDATE SET number = excluded.number, webhook_id = excluded.webhook_id,
    type = excluded.type, seq = excluded.seq, at = excluded.at, status = excluded.status,
    latency_ms = excluded.latency_ms, outcome = excluded.outcome, response_head = excluded.response_head
"""
ATTEMPTS_A_STATEMENT = 1_000  # 11,000 parameters: within PostgreSQL's and SQLite's bounds


def moment(value: datetime | None) -> Any:
    return connection.ops.adapt_datetimefield_value(value)


def _record_attempts(attempts: list[Attempt]) -> None:
    """At most one attempt per (endpoint, slot) (_newest_per_slot): a statement may not name a row twice."""
    with connection.cursor() as cursor:
        for start in range(0, len(attempts), ATTEMPTS_A_STATEMENT):
            chunk = attempts[start:start + ATTEMPTS_A_STATEMENT]
            cursor.execute(_RECORD_ATTEMPTS.format(rows=", ".join(["(%s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s)"]
                                                                  * len(chunk))), [
                value for attempt in chunk for value in (
                    attempt.endpoint, attempt.number % ATTEMPTS_KEPT, attempt.number, attempt.webhook_id, attempt.type,
                    attempt.seq, moment(attempt.at), attempt.outcome.status, round(attempt.outcome.latency * 1000),
                    attempt.outcome.outcome[:300], attempt.outcome.response_head[:RESPONSE_HEAD_CHARS])])


def _update_endpoints(owner: str, rows: list[Row]) -> None:
    with connection.cursor() as cursor:
        cursor.executemany(_UPDATE, [
            (row.position_seq, row.position_digest, row.deployment_id, moment(row.failing_since), row.failures,
             row.attempts_made, moment(row.next_attempt_at), moment(row.delivered_at), row.disabled_reason, False,
             row.disabled_reason, row.disabled_reason, row.released, row.released, row.pk, owner)
            for row in rows])


@dataclass
class Writes:
    attempts: list[Attempt]
    rows: list[Row]
    kept: list[int]  # whose leases to renew or look at
    changed: list[Held]
    renew: bool = False


def _newest_per_slot(attempts: list[Attempt]) -> list[Attempt]:
    """One attempt per (endpoint, slot), the newest: an upsert may not name a row twice."""
    newest: dict[tuple[int, int], Attempt] = {}
    for attempt in attempts:
        newest[(attempt.endpoint, attempt.number % ATTEMPTS_KEPT)] = attempt
    return list(newest.values())


# ---------------------------------------------------------------------------- the worker


class Worker:
    def __init__(self, *, concurrency: int | None = None, poll_seconds: float | None = None,
                 owner: str | None = None) -> None:
        self.concurrency = concurrency or settings.BOUNTY_WEBHOOKS_CONCURRENCY
        self.poll_seconds = poll_seconds or settings.BOUNTY_WEBHOOKS_POLL_SECONDS
        self.ledger = Ledger(owner or worker_name())
        self.window = Window()
        self._db = DatabaseThread("webhooks-db", "webhooks wait for it")
        self._wake = asyncio.Event()
        self._tasks: set[asyncio.Task[None]] = set()
        self._head: tuple[int, Position] | None = None
        self._head_moved = asyncio.Event()
        self._others_wait = False  # the last claim filled every place: endpoints may wait for one

    def wake(self) -> None:
        """The indexer committed changes (its announcement, through Redis)."""
        self._wake.set()

    async def run(self, stop: asyncio.Event) -> None:
        sender = Sender()
        flusher = asyncio.create_task(self._flush_every(stop))
        try:
            while not stop.is_set():
                if not self.ledger.share:  # the first beat, which counts this worker's share
                    try:
                        await self._db.run(self._beat)
                    except DatabaseError as error:
                        self._db.down(error)
                self._wake.clear()  # a wake during the round is kept for the next
                try:
                    await self._round(sender, stop)
                except DatabaseError as error:
                    self._db.down(error)
                waiting = asyncio.create_task(self._wake.wait())
                stopping = asyncio.create_task(stop.wait())
                await asyncio.wait({waiting, stopping}, timeout=self.poll_seconds,
                                   return_when=asyncio.FIRST_COMPLETED)
                waiting.cancel()
                stopping.cancel()
        finally:
            for task in self._tasks:
                task.cancel()  # an interrupted delivery is sent again: its position did not move
            await asyncio.gather(*self._tasks, return_exceptions=True)
            flusher.cancel()
            await asyncio.gather(flusher, return_exceptions=True)
            try:
                await self._db.run(self.ledger.write, self.ledger.release_all())
                await self._db.run(lambda: WorkerBeat.objects.filter(name=self.ledger.owner).delete())
            except DatabaseError:
                logger.warning("could not hand back the endpoints this worker held; other workers take "
                               "them when their leases end (%d s)", settings.BOUNTY_WEBHOOKS_LEASE_SECONDS)
            await sender.close()
            self._db.shutdown()

    async def _round(self, sender: Sender, stop: asyncio.Event) -> None:
        head = await self._db.run(_active_head)
        self._db.back()
        if head is None:
            return
        deployment_id, position = head
        await self._db.run(self.window.refresh, deployment_id, position)
        if head != self._head:
            self._head = head
            self._head_moved.set()  # the endpoints waiting at the old head go on
            self._head_moved = asyncio.Event()
        METRICS.window_seq.set(position.seq)
        room = self.concurrency - len(self._tasks)
        if room <= 0:
            self._others_wait = True  # as far as this worker knows: it claims no more
            return
        claimed = await self._db.run(self.ledger.claim, deployment_id, position, room, set(self.ledger.held))
        self._others_wait = len(claimed) == room
        self.ledger.hold(claimed)
        for held in claimed:
            task = held.task = asyncio.create_task(self._serve(held, sender, stop))
            self._tasks.add(task)
            task.add_done_callback(self._ended)

    def _ended(self, task: asyncio.Task[None]) -> None:
        self._tasks.discard(task)
        if self._others_wait:
            self._wake.set()  # a place for an endpoint that waits: claim again

    async def _flush_every(self, stop: asyncio.Event) -> None:
        last_beat = 0.0
        while not stop.is_set():
            await asyncio.sleep(FLUSH_SECONDS)
            await self.flush()
            if time.monotonic() - last_beat >= BEAT_SECONDS:
                last_beat = time.monotonic()
                try:
                    await self._db.run(self._beat)
                except DatabaseError as error:
                    self._db.down(error)

    def _beat(self) -> None:
        """The worker's heartbeat (GET /health) and the endpoints' gauges (webhooks.metrics)."""
        now = timezone.now()
        WorkerBeat.objects.update_or_create(name=self.ledger.owner,
                                            defaults={"last_seen": now}, create_defaults={"last_seen": now,
                                                                                         "started_at": now})
        METRICS.beat()
        self.ledger.count_share(now)
        if self._head is not None:
            observe_endpoints(*self._head, now)

    async def flush(self) -> None:
        writes = self.ledger.take()
        started = time.monotonic()
        try:
            self.ledger.drop(await self._db.run(self.ledger.write, writes))
            self.ledger.renewed(writes, started)
        except DatabaseError as error:  # written again at the next flush
            self.ledger.restore(writes)
            self._db.down(error)

    async def _serve(self, held: Held, sender: Sender, stop: asyncio.Event) -> None:
        """Sends the endpoint its changes until it is at the head, fails, or its lease runs short."""
        try:
            while not stop.is_set() and self._head is not None:
                events = await self._events_for(held)
                if not events:
                    # At the head: it waits here for the next change while no other endpoint
                    # waits for a place (claiming and handing back every endpoint at every change
                    # would cost the database more than the deliveries), and is handed back after
                    # LINGER_SECONDS without one, at once when others wait, or when this worker
                    # holds more than its share (another worker started).
                    if (self._others_wait or len(self.ledger.held) > self.ledger.share
                            or not await self._next_change(LINGER_SECONDS)):
                        break
                    continue
                for event in events:
                    if event.type != MessageType.RESYNC and not wants(held, event):
                        held.position = event.after
                        held.dirty = True
                        continue
                    if not held.lease_lasts():  # its renewals fail (the database is away): let it go
                        return
                    if not await self._deliver(held, event, sender):
                        return
        finally:
            held.released = True

    async def _next_change(self, seconds: float) -> bool:
        """Whether the head moved within `seconds`."""
        try:
            async with asyncio.timeout(seconds):
                await self._head_moved.wait()
        except TimeoutError:
            return False
        return True

    async def _events_for(self, held: Held) -> list[Event]:
        assert self._head is not None
        deployment_id, head = self._head
        if held.deployment_id != deployment_id or held.position is None:
            if held.position is None and held.deployment_id is None:  # created before anything was indexed
                held.deployment_id, held.position = deployment_id, await self._db.run(genesis_position, deployment_id)
                held.dirty = True
            else:
                return [Event.resync(head, "deployment_changed")]
        position = held.position
        assert position is not None
        if position == head:
            return []
        events = self.window.after(position, READ_CHUNK)
        if events is not None:
            return events
        changes = await self._db.run(changes_after, deployment_id, position, head.seq, READ_CHUNK)
        if changes is None:
            held_there = position.seq > head.seq or await self._db.run(_holds_seq, deployment_id, position.seq)
            return [Event.resync(head, "history_changed" if held_there else "pruned")]
        return [Event.of(change) for change in changes]

    async def _deliver(self, held: Held, event: Event, sender: Sender) -> bool:
        """Sends one event; True when it was delivered and the endpoint moved past it."""
        webhook_id = f"msg_{held.pk}_{event.id_part}"
        at = timezone.now()
        outcome = await sender.send(Request(held.url, webhook_id, event.body, held.secrets))
        self.ledger.attempted(held, webhook_id, event, at, outcome)
        METRICS.deliveries.labels(outcome=_outcome_label(outcome)).inc()
        if outcome.delivered:
            if event.type == MessageType.RESYNC:
                assert self._head is not None
                held.deployment_id = self._head[0]
            held.position = event.after
            held.failing_since, held.failures, held.next_attempt_at = None, 0, None
            held.delivered_at = timezone.now()
            METRICS.observe_delivered(event)
            return True
        held.failures += 1
        held.failing_since = held.failing_since or at
        failing_for = (at - held.failing_since).total_seconds()
        if outcome.gone:
            held.disabled_reason = "the endpoint answered 410 Gone"
        elif failing_for >= settings.BOUNTY_WEBHOOKS_DISABLE_AFTER_HOURS * 3600:
            held.disabled_reason = (f"failing for {failing_for / 3600:.1f} h (BOUNTY_WEBHOOKS_DISABLE_AFTER_HOURS="
                                    f"{settings.BOUNTY_WEBHOOKS_DISABLE_AFTER_HOURS}): {outcome.outcome}")[:300]
        if held.disabled_reason:
            METRICS.disabled.inc()
            notices.endpoint_disabled(held.pk, held.url, held.disabled_reason)
        else:
            held.next_attempt_at = at + timedelta(seconds=schedule.delay(held.failures, outcome.retry_after))
        held.dirty = True
        return False


def _outcome_label(outcome: Outcome) -> str:
    if outcome.delivered:
        return "delivered"
    if outcome.status is None:
        return "refused" if outcome.outcome.startswith("refused") else "no_answer"
    return "gone" if outcome.gone else f"{outcome.status // 100}xx"


def _active_head() -> tuple[int, Position] | None:
    deployment_id = active_deployment_id()
    return None if deployment_id is None else (deployment_id, head_position(deployment_id))


def _holds_seq(deployment_id: int, seq: int) -> bool:
    """Whether the change log holds the entry `seq` (a position there whose digest differs is of
    another history; one no longer held was pruned)."""
    return bool(changes_between(deployment_id, seq, seq, 1))


def observe_endpoints(deployment_id: int, head: Position, now: datetime) -> None:
    """Every enabled endpoint's backlog and the age of the oldest change it has not been sent
    (the changes after its position; one of another history or deployment is counted as at the
    head's start, since it gets `resync`), and how many are disabled."""
    rows = list(Endpoint.objects.filter(enabled=True).values_list("pk", "deployment_id", "position_seq"))
    nexts = {seq + 1 for _, deployment, seq in rows if deployment == deployment_id and seq is not None
             and seq < head.seq}
    committed = dict(ChangeLogEntry.objects.filter(deployment_id=deployment_id, seq__in=nexts)
                     .values_list("seq", "created_at")) if nexts else {}
    METRICS.backlog.clear()
    METRICS.oldest.clear()
    for pk, deployment, seq in rows:
        behind = head.seq - seq if deployment == deployment_id and seq is not None else head.seq
        METRICS.backlog.labels(endpoint=str(pk)).set(max(0, behind))
        oldest = committed.get((seq or 0) + 1) if behind > 0 else None
        METRICS.oldest.labels(endpoint=str(pk)).set((now - oldest).total_seconds() if oldest else 0)
    METRICS.endpoints_disabled.set(Endpoint.objects.filter(enabled=False).count())
