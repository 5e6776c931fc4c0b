"""Read replicas (DATABASE_REPLICA_URLS): which database a web process reads, so that replica lag
never shows (docs/operations.md, "Read replicas").

A streaming replica replays the primary's WAL some time after the primary commits it, so a reader
may be told of change N (the indexer's wake-up, a client's position, an ETag) before its replica
holds N. Every read that depends on such a change says so with a floor, the change-log seq it
needs of each deployment, and is given a replica that holds it (`ReplicaSet.at_least`): one known
to hold it, or one that does once asked again, within BOUNTY_REPLICA_WAIT_MS; otherwise the
primary, which always does. A read with no floor takes the replicas in turn (`ReplicaSet.any`).
The seqs a replica holds are learnt from every read of its change log and its data version, from
its checks, and by asking it while a read waits.

Each web process checks its replicas every BOUNTY_REPLICA_CHECK_SECONDS, each within
BOUNTY_REPLICA_TIMEOUT_MS, on a thread of its own: whether it answers, whether it is still a
standby, whether it holds the primary's history (its newest change has the primary's digest at that
seq: records.history), and how far behind it is (`lag`). A replica that does not answer, has been
promoted, holds another history or is more than BOUNTY_REPLICA_MAX_LAG_SECONDS behind is set aside:
no read goes to it until a check finds it well again. A read whose replica stops answering under it
sets it aside at once and is read again on the primary. /health and the metrics show each one.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Literal, NamedTuple, TypedDict, TypeVar

from django.conf import settings
from django.db import DatabaseError, connections
from psycopg_pool import PoolTimeout

from bountysite.databases import PRIMARY, read_alias, reading_from, replica_aliases
from indexer.models import ChangeLogEntry, SyncState
from records.lanes import READS, Lane
from records.metrics import REPLICA_FALLBACKS, REPLICA_IN_USE, REPLICA_LAG

logger = logging.getLogger(__name__)

T = TypeVar("T")
Floor = Mapping[int, int]  # the change-log seq a read needs at least, by deployment (its pk)

PROBE_SECONDS = 0.05  # how often a read waiting for its replica asks it again
RECOVERY_CONFLICT = "40001"  # a standby cancelled a query that replay had to overtake (SQLSTATE)
# SQLSTATE classes of a server that does not answer: a connection exception (08), or one shutting
# down, crashed or starting (57P01-57P03: "operator intervention", but not 57014, a statement
# cancelled by its timeout).
NOT_ANSWERING = ("08", "57P")


class OnPrimary(Exception):
    """A read's replica failed under it: read it again on the primary (`read_on_replica`)."""


class ReplicaHealth(TypedDict):
    """A replica as /health shows it (docs/api.md, GET /health)."""

    name: str
    host: str
    status: Literal["in_use", "set_aside"]
    reason: str | None
    lag_seconds: float | None
    checked_at: str | None


@dataclass
class Replica:
    alias: str
    host: str
    in_use: bool = False
    reason: str | None = "not checked yet"
    lag_seconds: float | None = None
    checked_at: datetime | None = None
    seqs: dict[int, int] = field(default_factory=dict)  # the change-log seqs it is known to hold
    check: Future[Checked] | None = None
    check_against: PrimaryState | None = None  # the primary as it was when `check` started
    behind_since: float | None = None  # when a check first found it behind the primary (monotonic)

    def holds(self, floor: Floor) -> bool:
        return all(self.seqs.get(deployment, -1) >= seq for deployment, seq in floor.items())

    def learnt(self, seqs: Mapping[int, int]) -> None:
        for deployment, seq in seqs.items():
            if seq > self.seqs.get(deployment, -1):
                self.seqs[deployment] = seq


class Head(NamedTuple):
    """A deployment's newest change (its seq and digest) and last indexed block, as one database holds them."""

    seq: int
    digest: str
    block: int


@dataclass(frozen=True)
class Checked:
    """What a check read of a replica."""

    recovering: bool
    replay_lsn: int | None
    since_replay: float | None  # seconds since the last transaction it replayed was committed
    heads: dict[int, Head]
    # Where it is ahead of the primary: its digest of the primary's newest change (None: not held).
    digests_at_primary_heads: dict[int, str | None] = field(default_factory=dict)


@dataclass(frozen=True)
class PrimaryState:
    lsn: int
    heads: dict[int, Head]


class ReplicaSet:
    """A web process's replicas, their state and the choice of one for each read."""

    def __init__(self, aliases: Iterable[str]) -> None:
        self.replicas = [Replica(alias, _host(alias)) for alias in aliases]
        self._turn = itertools.count()
        self._lock = threading.Lock()  # starting the checks
        self._heads_lock = threading.Lock()  # the primary's heads
        self.streamed: dict[int, int] = {}  # what the process's live feed has sent, by deployment
        # The primary's newest changes, as its last check or a read since found them, and when.
        self._primary_heads: dict[int, Head] | None = None
        self._primary_asked_at: float | None = None
        self._monitor: threading.Thread | None = None
        self._checkers = {replica.alias: ThreadPoolExecutor(1, thread_name_prefix=f"check-{replica.alias}")
                          for replica in self.replicas}
        for replica in self.replicas:
            REPLICA_IN_USE.labels(replica.alias).set(0)

    def any(self) -> str:
        """A replica in use, each in turn; the primary when none is."""
        if not self.replicas:
            return PRIMARY
        self.start()
        usable = self._usable()
        if not usable:
            REPLICA_FALLBACKS.labels("none_in_use").inc()
            return PRIMARY
        return usable[0].alias

    def at_least(self, floor: Floor, wait: float, *, or_primary: bool = True, trusted: bool = False) -> str | None:
        """A replica in use that holds `floor`, waiting up to `wait` seconds (on this thread) for
        one to replay it; then the primary (`or_primary`), or None. Unless `trusted` (the feed's own
        floors), a floor no database holds (a deployment not indexed, a seq past the primary's
        newest change: a client's tag or position of another history, or a forged one) asks for
        nothing."""
        if not floor or not self.replicas:
            return self.any()
        self.start()
        floor = floor if trusted else self._trimmed(floor)
        end = time.monotonic() + wait
        while True:
            found = self._holding(floor, ask=True)
            if found is not None or (left := end - time.monotonic()) <= 0 or not self._usable():
                return self._chosen(found, or_primary)
            time.sleep(min(PROBE_SECONDS, left))

    async def at_least_async(self, floor: Floor, wait: float, *, or_primary: bool = True,
                             trusted: bool = False, lane: Lane = READS) -> str | None:
        """`at_least` for the event loop: the wait is the loop's, and each question to a replica
        a short call on a thread of `lane` (records.lanes), so that no other client's database
        work waits behind it."""
        if not floor or not self.replicas:
            return self.any()
        self.start()
        if not trusted:
            floor = await lane.run(self._trimmed, floor)
        end = time.monotonic() + wait
        while True:
            found = self._holding(floor, ask=False)
            if found is None:
                found = await lane.run(self._holding, floor, ask=True)
            if found is not None or (left := end - time.monotonic()) <= 0 or not self._usable():
                return self._chosen(found, or_primary)
            await asyncio.sleep(min(PROBE_SECONDS, left))

    def _usable(self) -> list[Replica]:
        """The replicas in use, each in turn first."""
        usable = [replica for replica in self.replicas if replica.in_use]
        if usable:
            first = next(self._turn) % len(usable)
            usable = usable[first:] + usable[:first]
        return usable

    def _holding(self, floor: Floor, *, ask: bool) -> str | None:
        """A replica in use known to hold `floor`, or (`ask`) found to hold it when asked now."""
        usable = self._usable()
        for replica in usable:
            if replica.holds(floor):
                return replica.alias
        for replica in usable if ask else ():
            if self._ask(replica) and replica.holds(floor):
                return replica.alias
        return None

    def _chosen(self, found: str | None, or_primary: bool) -> str | None:
        if found is not None or not or_primary:
            return found
        REPLICA_FALLBACKS.labels("behind" if self._usable() else "none_in_use").inc()
        return PRIMARY

    def _trimmed(self, floor: Floor) -> dict[int, int]:
        """The part of a client's `floor` that some database holds: a deployment the primary does
        not index, or a seq past its newest change (asked now, at most every PROBE_SECONDS, when
        the floor is past what was seen before), asks for nothing. Until the primary has been
        asked, a seq past what was seen stands: the reader waits for it, then reads the primary."""
        known = self._primary_heads or {}
        if all(deployment in known and seq <= known[deployment].seq for deployment, seq in floor.items()):
            return dict(floor)
        heads = self._primary_heads_now()
        if heads is None:  # not asked now: only what it cannot be is left out
            return {deployment: seq for deployment, seq in floor.items() if not known or deployment in known}
        return {deployment: seq for deployment, seq in floor.items()
                if deployment in heads and seq <= heads[deployment].seq}

    def _primary_heads_now(self) -> dict[int, Head] | None:
        """The primary's newest changes, asked now; None when it was asked less than PROBE_SECONDS
        ago or does not answer."""
        with self._heads_lock:
            if self._primary_asked_at is not None and time.monotonic() - self._primary_asked_at < PROBE_SECONDS:
                return None
            self._primary_asked_at = time.monotonic()
        try:
            with reading_from(PRIMARY):
                heads = _heads()
        except DatabaseError:
            return None  # the primary does not answer: the floor stands
        with self._heads_lock:
            self._primary_heads = heads
        return heads

    def streaming(self, deployment: int, seq: int) -> None:
        """The process's live feed has told its clients of the changes through `seq`: its HTTP
        reads must not answer from data older than that (`for_request`)."""
        self.streamed[deployment] = seq

    def for_request(self, floor: Floor, wait: float) -> str:
        """Where an HTTP request reads: a replica that holds `floor` (its tags'; waiting for one
        up to `wait`) and what this process's live feed has sent (not waited for: the feed moved
        ahead of the replicas only by reading the primary, so the primary is where it is now)."""
        alias = self.at_least(floor, wait)
        replica = self._named(alias)
        if replica is None or replica.holds(self.streamed):
            return alias or PRIMARY
        both = {deployment: max(seq, floor.get(deployment, 0)) for deployment, seq in self.streamed.items()}
        return self.at_least({**floor, **both}, 0) or PRIMARY

    def _named(self, alias: str | None) -> Replica | None:
        """The replica of that alias; None for the primary."""
        return next((replica for replica in self.replicas if replica.alias == alias), None)

    def learnt(self, alias: str, seqs: Mapping[int, int]) -> None:
        """A read of `alias` found these seqs: it holds them."""
        if (replica := self._named(alias)) is not None:
            replica.learnt(seqs)

    def failed(self, alias: str, error: BaseException) -> bool:
        """A read on `alias` failed with `error`: whether to read it again on the primary. A
        replica that does not answer (no connection, a connection lost, the server shutting down
        or starting) is set aside until a check finds it well; a query the standby cancelled for
        its replay (a recovery conflict), or a pool with no connection free in time, is read
        again with the replica kept. An error the primary would meet too (a statement timeout) is
        the answer's."""
        if alias == PRIMARY:
            return False
        cause = error.__cause__ or error
        sqlstate = getattr(cause, "sqlstate", None)
        if sqlstate == RECOVERY_CONFLICT or isinstance(cause, PoolTimeout):
            return True
        if sqlstate is not None and not sqlstate.startswith(NOT_ANSWERING):
            return False
        if (replica := self._named(alias)) is not None:
            self._set_aside(replica, f"did not answer a read: {type(cause).__name__}")
        return True

    def health(self) -> list[ReplicaHealth]:
        self.start()
        return [ReplicaHealth(name=replica.alias, host=replica.host,
                              status="in_use" if replica.in_use else "set_aside", reason=replica.reason,
                              lag_seconds=None if replica.lag_seconds is None else round(replica.lag_seconds, 3),
                              checked_at=None if replica.checked_at is None else
                              replica.checked_at.isoformat().replace("+00:00", "Z"))
                for replica in self.replicas]

    # ------------------------------------------------------------------------ the checks

    def start(self, *, checked_first: bool = False) -> None:
        """Starts the process's checks, once: `checked_first`, after a first round here (a web
        process's entry point, so that no read goes to the primary while its replicas are
        unchecked); otherwise with a first round at once on their thread."""
        if self._monitor is None and self.replicas:
            with self._lock:
                if self._monitor is None:
                    if checked_first:
                        self._check_logged()
                    self._monitor = threading.Thread(target=self._watch, args=(not checked_first,),
                                                     name="replica-checks", daemon=True)
                    self._monitor.start()

    def _watch(self, check_now: bool) -> None:
        while True:
            if check_now:
                self._check_logged()
            check_now = True
            time.sleep(settings.BOUNTY_REPLICA_CHECK_SECONDS)

    def _check_logged(self) -> None:
        try:
            self.check()
        except Exception:
            logger.exception("checking the read replicas failed; checking again in %s s",
                             settings.BOUNTY_REPLICA_CHECK_SECONDS)

    def check(self) -> None:
        """One round: every replica checked, each within BOUNTY_REPLICA_TIMEOUT_MS, on its own
        thread. A check that has not come back is not started again; when it does come back it is
        judged against the primary as it was when it started."""
        primary = _primary_state()
        if primary is not None:
            with self._heads_lock:
                self._primary_heads, self._primary_asked_at = primary.heads, time.monotonic()
        timeout: float = settings.BOUNTY_REPLICA_TIMEOUT_SECONDS
        for replica in self.replicas:
            if replica.check is None:
                replica.check = self._checkers[replica.alias].submit(_check, replica.alias, primary)
                replica.check_against = primary
        end = time.monotonic() + timeout
        for replica in self.replicas:
            assert replica.check is not None
            try:
                checked = replica.check.result(timeout=max(0.0, end - time.monotonic()))
            except TimeoutError:
                self._set_aside(replica, f"did not answer its check within {timeout:g} s (BOUNTY_REPLICA_TIMEOUT_MS)")
                continue
            except Exception as error:  # DatabaseError, or the pool's own: it did not give a connection
                replica.check = None
                self._set_aside(replica, f"did not answer its check: {type(error.__cause__ or error).__name__}")
                continue
            replica.check = None
            try:
                self._judge(replica, checked, replica.check_against)
            except DatabaseError:  # the primary went away between its reads: judged next round
                logger.warning("could not judge read replica %s: the primary did not answer", replica.alias)

    def _judge(self, replica: Replica, checked: Checked, primary: PrimaryState | None) -> None:
        replica.checked_at = datetime.now(UTC)
        # What it holds now, in place of what reads learnt: a replica made again from another
        # primary may hold less than before.
        replica.seqs = {deployment: head.seq for deployment, head in checked.heads.items()}
        if not checked.recovering:
            return self._set_aside(replica, "is not a standby (pg_is_in_recovery() is false: promoted?); take it "
                                            "out of DATABASE_REPLICA_URLS or make it a standby of the primary")
        if primary is None:  # the primary does not answer: what it decided before stands
            return None
        for deployment, head in checked.heads.items():
            primary_head = primary.heads.get(deployment)
            if primary_head is not None and head.seq > primary_head.seq:
                # Ahead of the primary (a standby that followed the primary before a failover, say):
                # its change at the primary's newest seq must be the primary's.
                at = primary_head.seq
                differs = at > 0 and bool(primary_head.digest) and \
                    checked.digests_at_primary_heads.get(deployment) != primary_head.digest
            else:
                at = head.seq
                differs = bool(head.digest) and _digest_at(deployment, head.seq, primary) not in (head.digest, None)
            if differs:
                return self._set_aside(replica, f"holds another history than the primary (its change {at} differs): "
                                                "make it a standby of the primary again")
        current = (checked.replay_lsn is not None and checked.replay_lsn >= primary.lsn) or all(
            (checked.heads[deployment].seq, checked.heads[deployment].block) >= (head.seq, head.block)
            if deployment in checked.heads else False for deployment, head in primary.heads.items())
        now = time.monotonic()
        replica.behind_since = None if current else (replica.behind_since or now)
        if current:
            lag = 0.0
        elif checked.since_replay is not None:
            lag = max(0.0, checked.since_replay)
        else:  # it has replayed no transaction since it started: behind for as long as it has been seen so
            lag = now - (replica.behind_since or now)
        limit: int = settings.BOUNTY_REPLICA_MAX_LAG_SECONDS
        if lag > limit:
            return self._set_aside(replica, f"is {lag:.1f} s behind the primary, more than "
                                            f"BOUNTY_REPLICA_MAX_LAG_SECONDS ({limit})", lag)
        return self._take(replica, lag)

    def _take(self, replica: Replica, lag: float | None) -> None:
        replica.lag_seconds = lag
        if lag is not None:
            REPLICA_LAG.labels(replica.alias).set(lag)
        if not replica.in_use:
            if replica.reason != "not checked yet":
                logger.warning("read replica %s (%s) is read again (it %s)", replica.alias, replica.host,
                               replica.reason)
            replica.in_use, replica.reason = True, None
            REPLICA_IN_USE.labels(replica.alias).set(1)

    def _set_aside(self, replica: Replica, reason: str, lag: float | None = None) -> None:
        if lag is not None:
            replica.lag_seconds = lag
            REPLICA_LAG.labels(replica.alias).set(lag)
        if replica.in_use or replica.reason != reason:
            logger.warning("read replica %s (%s) %s; reads go to the other replicas or the primary until it is well",
                           replica.alias, replica.host, reason)
        replica.in_use, replica.reason = False, reason
        REPLICA_IN_USE.labels(replica.alias).set(0)

    def _ask(self, replica: Replica) -> bool:
        """Asks the replica the seqs it holds now (on this thread's connection to it, given back
        to its pool at once)."""
        try:
            with reading_from(replica.alias):
                replica.learnt({deployment: head.seq for deployment, head in _heads().items()})
        except DatabaseError as error:
            self.failed(replica.alias, error)
            return False
        finally:
            connections[replica.alias].close()
        return True


def _host(alias: str) -> str:
    """Where the replica is (host:port/name), without its credentials."""
    database = connections.settings[alias]
    return f"{database.get('HOST') or 'localhost'}:{database.get('PORT') or 5432}/{database.get('NAME')}"


def _heads() -> dict[int, Head]:
    """Each deployment's newest change and last indexed block, on the database reads go to."""
    return {deployment: Head(seq, digest or "", block or 0) for deployment, seq, digest, block in
            SyncState.objects.values_list("deployment_id", "last_seq", "last_digest", "last_indexed_block")}


def _lsn(text: str | None) -> int | None:
    if not text:
        return None
    high, low = text.split("/")
    return (int(high, 16) << 32) + int(low, 16)


def _check(alias: str, primary: PrimaryState | None) -> Checked:
    """Reads a replica's state (on the replica's checking thread)."""
    try:
        with connections[alias].cursor() as cursor:
            cursor.execute("SELECT pg_is_in_recovery(), pg_last_wal_replay_lsn()::text, "
                           "EXTRACT(EPOCH FROM clock_timestamp() - pg_last_xact_replay_timestamp())::float8")
            recovering, replay_lsn, since_replay = cursor.fetchone()
        with reading_from(alias):
            heads = _heads()
            ahead = {deployment: primary.heads[deployment].seq for deployment, head in heads.items()
                     if primary is not None and deployment in primary.heads
                     and head.seq > primary.heads[deployment].seq}
            digests = {deployment: _digest_here(deployment, seq) for deployment, seq in ahead.items()}
        return Checked(bool(recovering), _lsn(replay_lsn), since_replay, heads, digests)
    finally:
        connections[alias].close()  # back to its pool: a check is seconds apart


def _primary_state() -> PrimaryState | None:
    """The primary's WAL position and newest changes, read before the replicas' (so a replica
    that holds them is current); None when the primary does not answer."""
    try:
        with connections[PRIMARY].cursor() as cursor:
            cursor.execute("SELECT pg_current_wal_lsn()::text")
            (lsn,) = cursor.fetchone()
        with reading_from(PRIMARY):
            heads = _heads()
        return PrimaryState(_lsn(lsn) or 0, heads)
    except DatabaseError:
        return None
    finally:
        connections[PRIMARY].close()


def _digest_here(deployment: int, seq: int) -> str | None:
    """The digest of the deployment's change `seq` where reads go; None when not held (pruned,
    or never written there)."""
    digest = (ChangeLogEntry.objects.filter(deployment_id=deployment, seq=seq)
              .values_list("digest", flat=True).first())
    return digest or None


def _digest_at(deployment: int, seq: int, primary: PrimaryState) -> str | None:
    """The primary's digest of the deployment's change `seq`; None when it no longer holds it
    (pruned)."""
    head = primary.heads.get(deployment)
    if head is not None and head.seq == seq:
        return head.digest
    if seq == 0:
        return None
    try:
        with reading_from(PRIMARY):
            return _digest_here(deployment, seq)
    finally:
        connections[PRIMARY].close()


REPLICAS = ReplicaSet(replica_aliases())


def read_on_replica(read: Callable[[], T], floor: Floor | None = None) -> T:
    """An HTTP request's `read()` on a replica that holds `floor` and what the process's feed has
    sent (`ReplicaSet.for_request`), again on the primary if that replica fails under it (`OnPrimary`)."""
    alias = REPLICAS.for_request(floor or {}, settings.BOUNTY_REPLICA_WAIT_SECONDS)
    try:
        with reading_from(alias):
            return read()
    except OnPrimary:
        REPLICA_FALLBACKS.labels("failed").inc()
    with reading_from(PRIMARY):
        return read()


def gives_up(error: BaseException) -> bool:
    """Whether a database error of the current read means it is read again on the primary
    (`ReplicaSet.failed`); False on the primary."""
    alias = read_alias()
    return alias != PRIMARY and REPLICAS.failed(alias, error)
