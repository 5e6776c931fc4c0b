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
from collections.abc import Iterable, Mapping
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from typing import Literal, NamedTuple, TypedDict, TypeVar

from django.conf import settings
from django.db import DatabaseError, connections
from psycopg_pool import PoolTimeout

from bountysite.databases import PRIMARY, reading_from, replica_aliases
from indexer.models import ChangeLogEntry, SyncState
from records.lanes import CONNECTION_LOST, READS, Lane
from records.metrics import REPLICA_FALLBACKS, REPLICA_IN_USE, REPLICA_LAG

logger = logging.getLogger(__name__)

T = TypeVar("T")
Floor = Mapping[int, int]  # the change-log seq a read needs at least, by deployment (its pk)

PROBE_SECONDS = 0.05  # how often a read waiting for its replica asks it again
RECOVERY_CONFLICT = "40001"  # a standby cancelled a query that replay had to overtake (SQLSTATE)


class ReplicaHealth(TypedDict):
    """A replica as /health shows it (docs/api.md, GET /health)."""

    name: str
    host: str
    status: Literal["in_use", "set_aside"]
    reason: str | None
    lag_seconds: float | None
    checked_at: str | None


@dataclass(frozen=True)
class Verdict:
    """What the last judgement of a replica found (`judge`): replaced whole, never edited."""

    in_use: bool = False
    reason: str | None = "not checked yet"
    lag_seconds: float | None = None
    behind_since: float | None = None  # when a check first found it behind the primary (monotonic)


@dataclass
class Replica:
    """A replica and what is known of it. `verdict` and `seqs` are replaced whole, under the
    lock of its ReplicaSet, by whichever thread learns something: the checks' thread,
    a request's or a lane's, the event loop."""

    alias: str
    host: str
    verdict: Verdict = field(default_factory=Verdict)
    checked_at: datetime | None = None
    seqs: Mapping[int, int] = field(default_factory=dict)  # the change-log seqs it is known to hold
    check: Future[Checked] | None = None  # the check in flight (the checks' thread alone)
    check_against: PrimaryState | None = None  # the primary as it was when `check` started
    probe: threading.Lock = field(default_factory=threading.Lock)  # one question at a time, shared by waiters
    probed_at: float = -1.0  # when it was last asked what it holds (monotonic)
    probe_answered: bool = False

    @property
    def in_use(self) -> bool:
        return self.verdict.in_use

    @property
    def reason(self) -> str | None:
        return self.verdict.reason

    @property
    def lag_seconds(self) -> float | None:
        return self.verdict.lag_seconds

    def holds(self, floor: Floor) -> bool:
        seqs = self.seqs
        return all(seqs.get(deployment, -1) >= seq for deployment, seq in floor.items())


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
        self._state = threading.Lock()  # replacing a replica's verdict or seqs
        self._heads_lock = threading.Lock()  # the primary's heads
        self.streamed: dict[int, int] = {}  # what the process's live feed has sent, by deployment
        # The primary's newest changes, as its last check or a read since found them, and when.
        self._primary_heads: dict[int, Head] | None = None
        self._primary_asked_at: float | None = None
        self._monitor: threading.Thread | None = None
        self._checkers: dict[str, ThreadPoolExecutor] = {}  # a thread for each replica's checks (_checker)
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
            found = self._holding(floor, ask=wait > 0)  # a wait of 0 asks nothing: known, or the primary
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
            if found is None and wait > 0:  # a wait of 0 asks nothing: known, or the primary
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
        if (replica := self._named(alias)) is not None and not replica.holds(seqs):
            with self._state:
                known = replica.seqs
                replica.seqs = {**known, **{deployment: seq for deployment, seq in seqs.items()
                                            if seq > known.get(deployment, -1)}}

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
        if sqlstate is not None and not sqlstate.startswith(CONNECTION_LOST):
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

    def _checker(self, alias: str) -> ThreadPoolExecutor:
        """The replica's check thread, made at its first check (the rounds run one at a time)."""
        if (checker := self._checkers.get(alias)) is None:
            checker = self._checkers[alias] = ThreadPoolExecutor(1, thread_name_prefix=f"check-{alias}")
        return checker

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
                replica.check = self._checker(replica.alias).submit(_check, replica.alias, primary)
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
                self.check_came_back(replica, checked, replica.check_against)
            except DatabaseError:  # the primary went away between its reads: judged next round
                logger.warning("could not judge read replica %s: the primary did not answer", replica.alias)

    def check_came_back(self, replica: Replica, checked: Checked, primary: PrimaryState | None) -> None:
        """Applies the judgement (`judge`) of a check that came back, and what it found held."""
        digests = {} if primary is None else {  # the primary's, at the replica's newest changes
            deployment: _digest_at(deployment, head.seq, primary) for deployment, head in checked.heads.items()
            if head.digest and head.seq <= primary.heads.get(deployment, Head(-1, "", 0)).seq}
        verdict = judge(checked, primary, replica.verdict, digests, now=time.monotonic(),
                        max_lag=settings.BOUNTY_REPLICA_MAX_LAG_SECONDS)
        with self._state:
            # What it holds now, in place of what reads learnt: a replica made again from another
            # primary may hold less than before.
            replica.seqs = {deployment: head.seq for deployment, head in checked.heads.items()}
            replica.checked_at = datetime.now(UTC)
        self._apply(replica, verdict)

    def _set_aside(self, replica: Replica, reason: str) -> None:
        self._apply(replica, replace(replica.verdict, in_use=False, reason=reason))

    def _apply(self, replica: Replica, verdict: Verdict) -> None:
        """Replaces the replica's verdict, saying so when it changes."""
        with self._state:
            before, replica.verdict = replica.verdict, verdict
        if verdict.lag_seconds is not None:
            REPLICA_LAG.labels(replica.alias).set(verdict.lag_seconds)
        REPLICA_IN_USE.labels(replica.alias).set(1 if verdict.in_use else 0)
        if verdict.in_use and not before.in_use and before.reason != Verdict.reason:
            logger.warning("read replica %s (%s) is read again (it %s)", replica.alias, replica.host, before.reason)
        elif not verdict.in_use and (before.in_use or before.reason != verdict.reason):
            logger.warning("read replica %s (%s) %s; reads go to the other replicas or the primary until it is well",
                           replica.alias, replica.host, verdict.reason)

    def _ask(self, replica: Replica) -> bool:
        """Asks the replica the seqs it holds now (on this thread's connection to it, given back
        to its pool at once); whether it answered. Waiters share one question: one asking while
        another's is in flight, or was answered less than PROBE_SECONDS ago, takes that answer."""
        with replica.probe:
            if time.monotonic() - replica.probed_at < PROBE_SECONDS:
                return replica.probe_answered
            try:
                with reading_from(replica.alias):
                    self.learnt(replica.alias, {deployment: head.seq for deployment, head in _heads().items()})
                replica.probe_answered = True
            except DatabaseError as error:
                self.failed(replica.alias, error)
                replica.probe_answered = False
            finally:
                connections[replica.alias].close()
                replica.probed_at = time.monotonic()
            return replica.probe_answered


def judge(checked: Checked, primary: PrimaryState | None, was: Verdict, primary_digests: Mapping[int, str | None],
          *, now: float, max_lag: float) -> Verdict:
    """Whether a replica is read, from what its check found (`checked`) against the primary as it
    was when the check started (`primary`, and its digests of the replica's newest changes where
    the replica is not ahead, None where it holds them no longer; `primary` None: it did not
    answer, and what was decided stands):
    set aside when it is no standby, holds another history than the primary, or lags more than
    `max_lag` seconds; its lag is 0 when it has replayed the primary's WAL or holds every change
    and indexed block, otherwise the time since the last transaction it replayed (or, having
    replayed none since it started, since it was first seen behind: `was.behind_since`)."""
    if not checked.recovering:
        return replace(was, in_use=False, reason="is not a standby (pg_is_in_recovery() is false: promoted?); take "
                                                 "it out of DATABASE_REPLICA_URLS or make it a standby of the primary")
    if primary is None:
        return was
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
            differs = bool(head.digest) and primary_digests.get(deployment) not in (head.digest, None)
        if differs:
            return replace(was, in_use=False, reason=f"holds another history than the primary (its change {at} "
                                                     "differs): make it a standby of the primary again")
    current = (checked.replay_lsn is not None and checked.replay_lsn >= primary.lsn) or all(
        (checked.heads[deployment].seq, checked.heads[deployment].block) >= (head.seq, head.block)
        if deployment in checked.heads else False for deployment, head in primary.heads.items())
    behind_since = None if current else (was.behind_since or now)
    if current:
        lag = 0.0
    elif checked.since_replay is not None:
        lag = max(0.0, checked.since_replay)
    else:  # it has replayed no transaction since it started: behind for as long as it has been seen so
        lag = now - (behind_since or now)
    if lag > max_lag:
        return Verdict(False, f"is {lag:.1f} s behind the primary, more than BOUNTY_REPLICA_MAX_LAG_SECONDS "
                              f"({max_lag:g})", lag, behind_since)
    return Verdict(True, None, lag, behind_since)


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
