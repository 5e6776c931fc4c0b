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

import itertools
import logging
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Literal, TypedDict, TypeVar

from django.conf import settings
from django.db import DatabaseError, connections

from bountysite.databases import PRIMARY, read_alias, reading_from, replica_aliases
from indexer.models import ChangeLogEntry, SyncState
from records.metrics import REPLICA_FALLBACKS, REPLICA_IN_USE, REPLICA_LAG

logger = logging.getLogger(__name__)

T = TypeVar("T")
Floor = Mapping[int, int]  # the change-log seq a read needs at least, by deployment (its pk)

PROBE_SECONDS = 0.05  # how often a read waiting for its replica asks it again
RECOVERY_CONFLICT = "40001"  # a standby cancelled a query that replay had to overtake (SQLSTATE)


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

    def holds(self, floor: Floor) -> bool:
        return all(self.seqs.get(deployment, -1) >= seq for deployment, seq in floor.items())

    def learnt(self, seqs: Mapping[int, int]) -> None:
        for deployment, seq in seqs.items():
            if seq > self.seqs.get(deployment, -1):
                self.seqs[deployment] = seq


@dataclass(frozen=True)
class Checked:
    """What a check read of a replica."""

    recovering: bool
    replay_lsn: int | None
    since_replay: float | None  # seconds since the last transaction it replayed was committed
    heads: dict[int, tuple[int, str]]  # (seq, digest) of each deployment's newest change


@dataclass(frozen=True)
class PrimaryState:
    lsn: int
    heads: dict[int, tuple[int, str]]


class ReplicaSet:
    """A web process's replicas, their state and the choice of one for each read."""

    def __init__(self, aliases: Iterable[str]) -> None:
        self.replicas = [Replica(alias, _host(alias)) for alias in aliases]
        self._turn = itertools.count()
        self._lock = threading.Lock()
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
        usable = [replica for replica in self.replicas if replica.in_use]
        if not usable:
            REPLICA_FALLBACKS.labels("none_in_use").inc()
            return PRIMARY
        return usable[next(self._turn) % len(usable)].alias

    def at_least(self, floor: Floor, wait: float, *, or_primary: bool = True) -> str | None:
        """A replica in use that holds `floor`, waiting up to `wait` seconds for one to replay it;
        then the primary (`or_primary`), or None."""
        if not floor or not self.replicas:
            return self.any()
        self.start()
        end = time.monotonic() + wait
        while True:
            usable = [replica for replica in self.replicas if replica.in_use]
            first = next(self._turn)
            usable = usable[first % len(usable):] + usable[:first % len(usable)] if usable else []
            for replica in usable:
                if replica.holds(floor):
                    return replica.alias
            for replica in usable:
                if self._ask(replica) and replica.holds(floor):
                    return replica.alias
            left = end - time.monotonic()
            if left <= 0 or not usable:
                if not or_primary:
                    return None
                REPLICA_FALLBACKS.labels("behind" if usable else "none_in_use").inc()
                return PRIMARY
            time.sleep(min(PROBE_SECONDS, left))

    def learnt(self, alias: str, seqs: Mapping[int, int]) -> None:
        """A read of `alias` found these seqs: it holds them."""
        for replica in self.replicas:
            if replica.alias == alias:
                replica.learnt(seqs)

    def failed(self, alias: str, error: BaseException) -> bool:
        """A read on `alias` failed with `error`: whether to read it again on the primary. A
        replica that does not answer is set aside until a check finds it well; a query the
        standby cancelled for its replay (a recovery conflict) is read again, the replica kept."""
        if alias == PRIMARY:
            return False
        sqlstate = getattr(error.__cause__, "sqlstate", None)
        if sqlstate == RECOVERY_CONFLICT:
            return True
        if sqlstate is not None:  # it answered: a statement timeout, say, which the primary would meet too
            return False
        for replica in self.replicas:
            if replica.alias == alias:
                self._set_aside(replica, f"did not answer a read: {type(error.__cause__ or error).__name__}")
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
        """One round: every replica checked, each within BOUNTY_REPLICA_TIMEOUT_MS, on its own thread."""
        primary = _primary_state()
        timeout: float = settings.BOUNTY_REPLICA_TIMEOUT_SECONDS
        for replica in self.replicas:
            if replica.check is None:  # a check that never came back is not started again
                replica.check = self._checkers[replica.alias].submit(_check, replica.alias)
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
            self._judge(replica, checked, primary)

    def _judge(self, replica: Replica, checked: Checked, primary: PrimaryState | None) -> None:
        replica.checked_at = datetime.now(UTC)
        # What it holds now, in place of what reads learnt: a replica made again from another
        # primary may hold less than before.
        replica.seqs = {deployment: seq for deployment, (seq, _) in checked.heads.items()}
        if not checked.recovering:
            return self._set_aside(replica, "is not a standby (pg_is_in_recovery() is false: promoted?); take it "
                                            "out of DATABASE_REPLICA_URLS or make it a standby of the primary")
        if primary is None:  # the primary does not answer: the replica's data is as good as before
            return self._take(replica, replica.lag_seconds)
        for deployment, (seq, digest) in checked.heads.items():
            if digest and _digest_at(deployment, seq, primary) not in (digest, None):
                return self._set_aside(replica, f"holds another history than the primary (its change {seq} differs): "
                                                "make it a standby of the primary again")
        current = (checked.replay_lsn is not None and checked.replay_lsn >= primary.lsn) or all(
            checked.heads.get(deployment, (-1, ""))[0] >= seq for deployment, (seq, _) in primary.heads.items())
        lag = 0.0 if current else max(0.0, checked.since_replay or 0.0)
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
        """Asks the replica the seqs it holds now (on this thread's connection to it)."""
        try:
            with reading_from(replica.alias):
                replica.learnt({deployment: seq for deployment, (seq, _) in _heads().items()})
        except DatabaseError as error:
            self.failed(replica.alias, error)
            return False
        return True


def _host(alias: str) -> str:
    """Where the replica is (host:port/name), without its credentials."""
    database = connections.settings[alias]
    return f"{database.get('HOST') or 'localhost'}:{database.get('PORT') or 5432}/{database.get('NAME')}"


def _heads() -> dict[int, tuple[int, str]]:
    """(seq, digest) of each deployment's newest change, on the database reads go to."""
    return {deployment: (seq, digest or "") for deployment, seq, digest in
            SyncState.objects.values_list("deployment_id", "last_seq", "last_digest")}


def _lsn(text: str | None) -> int | None:
    if not text:
        return None
    high, low = text.split("/")
    return (int(high, 16) << 32) + int(low, 16)


def _check(alias: str) -> Checked:
    """Reads a replica's state (on the replica's checking thread)."""
    try:
        with connections[alias].cursor() as cursor:
            cursor.execute("SELECT pg_is_in_recovery(), pg_last_wal_replay_lsn()::text, "
                           "EXTRACT(EPOCH FROM clock_timestamp() - pg_last_xact_replay_timestamp())::float8")
            recovering, replay_lsn, since_replay = cursor.fetchone()
        with reading_from(alias):
            heads = _heads()
        return Checked(bool(recovering), _lsn(replay_lsn), since_replay, heads)
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


def _digest_at(deployment: int, seq: int, primary: PrimaryState) -> str | None:
    """The primary's digest of the deployment's change `seq`; None when it no longer holds it
    (pruned) or has not written it (the replica may not lag behind a primary that was restored:
    then a later check finds the digests differ)."""
    head = primary.heads.get(deployment)
    if head is not None and head[0] == seq:
        return head[1]
    if seq == 0:
        return None
    with reading_from(PRIMARY):
        digest = (ChangeLogEntry.objects.filter(deployment_id=deployment, seq=seq)
                  .values_list("digest", flat=True).first())
    connections[PRIMARY].close()
    return digest or None


REPLICAS = ReplicaSet(replica_aliases())


def read_on_replica(read: Callable[[], T], floor: Floor | None = None) -> T:
    """`read()` on a replica that holds `floor` (`ReplicaSet.at_least`, or any in use), again on
    the primary if that replica fails under it (`OnPrimary`)."""
    alias = REPLICAS.at_least(floor or {}, settings.BOUNTY_REPLICA_WAIT_SECONDS)
    assert alias is not None
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
