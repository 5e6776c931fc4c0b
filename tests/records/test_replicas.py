"""How a web process judges its replicas (records.replicas): what sets one aside, what brings it
back, which failures of a read send it to the primary; and what a request's tags may ask for.
tests/deployment/test_read_replicas.py runs them against real standbys."""

from __future__ import annotations

import time

import psycopg
import pytest
from django.db import OperationalError
from django.test import RequestFactory
from psycopg_pool import PoolTimeout

from records.api.etags import MAX_FLOOR_ITEMS, etag_floor
from records.replicas import PROBE_SECONDS, Checked, Head, PrimaryState, Replica, ReplicaSet, Verdict, judge
from tests.factories import bump_version, make_deployment

PRIMARY = PrimaryState(lsn=1_000, heads={1: Head(40, "d40", 500)})


def replica_set() -> tuple[ReplicaSet, Replica]:
    replicas = ReplicaSet([])
    replica = Replica("replica1", "replica.invalid:5432/bounty", verdict=Verdict(True, None, 0.0))
    replicas.replicas.append(replica)
    return replicas, replica


def checked(*, recovering: bool = True, replay_lsn: int = 1_000, since_replay: float | None = 0.5,
            head: tuple[int, str] = (40, "d40"), block: int = 500,
            digest_at_primary_head: str | None = None) -> Checked:
    return Checked(recovering=recovering, replay_lsn=replay_lsn, since_replay=since_replay,
                   heads={1: Head(*head, block)},
                   digests_at_primary_heads={} if digest_at_primary_head is None else {1: digest_at_primary_head})


NOT_CHECKED = Verdict()


def judged(found: Checked, primary: PrimaryState | None = PRIMARY, was: Verdict = NOT_CHECKED, *,
           primary_digest: str | None = "d40", now: float = 1_000.0, max_lag: float = 30) -> Verdict:
    """`judge` with the primary's digest of the replica's newest change (change 40's by default)."""
    return judge(found, primary, was, {1: primary_digest}, now=now, max_lag=max_lag)


def test_a_replica_that_has_replayed_what_the_primary_wrote_is_used_with_no_lag() -> None:
    assert judged(checked(since_replay=120)) == Verdict(True, None, 0.0)  # idle for two minutes, but current


def test_a_replica_behind_in_wal_but_holding_every_change_has_no_lag() -> None:
    assert judged(checked(replay_lsn=900, since_replay=600)) == Verdict(True, None, 0.0)


def test_a_replica_further_behind_than_the_bound_is_set_aside_and_taken_back_once_it_catches_up() -> None:
    ahead = PrimaryState(lsn=1_000, heads={1: Head(41, "d41", 501)})
    # (its newest change has no digest, as one written before digests: no history to compare)
    behind = judged(checked(replay_lsn=900, since_replay=45, head=(40, "")), ahead, max_lag=30)
    assert not behind.in_use and behind.lag_seconds == 45
    assert behind.reason is not None and "BOUNTY_REPLICA_MAX_LAG_SECONDS (30)" in behind.reason
    caught_up = judged(checked(replay_lsn=1_000, head=(41, "d41")), ahead, behind, primary_digest="d41")
    assert caught_up.in_use and caught_up.reason is None


def test_a_replica_that_is_no_standby_is_set_aside() -> None:
    verdict = judged(checked(recovering=False))
    assert not verdict.in_use and verdict.reason is not None and "promoted" in verdict.reason


def test_a_replica_holding_another_history_is_set_aside() -> None:
    verdict = judged(checked(head=(40, "another")))
    assert not verdict.in_use and verdict.reason is not None and "another history" in verdict.reason


def test_a_replica_whose_newest_change_the_primary_no_longer_holds_is_not_set_aside_for_it() -> None:
    assert judged(checked(head=(40, "pruned?")), primary_digest=None).in_use


def test_a_replica_ahead_of_the_primary_in_another_history_is_set_aside() -> None:
    """A standby that received changes a promoted primary never had: its change at the
    primary's newest seq is another."""
    verdict = judged(checked(head=(45, "old45"), digest_at_primary_head="old40"), primary_digest=None)
    assert not verdict.in_use and verdict.reason is not None and "change 40 differs" in verdict.reason
    # ahead in the same history: the primary's check ran before it replayed more
    assert judged(checked(head=(45, "d45"), digest_at_primary_head="d40"), primary_digest=None).in_use


def test_a_bulk_backfill_the_replica_has_not_replayed_is_lag() -> None:
    """A backfill moves no seq: the last indexed block tells how far the replica is."""
    assert judged(checked(replay_lsn=900, since_replay=12, block=400)).lag_seconds == 12


def test_a_replica_behind_that_has_replayed_nothing_since_it_started_lags_since_it_was_first_seen_behind() -> None:
    nothing_replayed = checked(replay_lsn=900, since_replay=None, head=(39, ""))
    first = judged(nothing_replayed, now=1_000.0)
    assert first.in_use and first.lag_seconds == 0.0 and first.behind_since == 1_000.0  # seen behind only now
    later = judged(nothing_replayed, was=first, now=1_031.0)  # still nothing replayed, past the bound
    assert not later.in_use and later.lag_seconds == 31.0 and later.behind_since == 1_000.0


@pytest.mark.parametrize("was", [Verdict(True, None, 0.0), Verdict(False, "holds another history", None)])
def test_what_was_decided_stands_while_the_primary_does_not_answer(was: Verdict) -> None:
    assert judged(checked(), None, was) == was


def test_a_check_is_applied_whole_with_what_the_replica_was_found_to_hold() -> None:
    replicas = ReplicaSet([])
    replica = Replica("replica1", "replica.invalid:5432/bounty")
    replicas.replicas.append(replica)
    replicas.learnt("replica1", {1: 38})
    assert replica.holds({1: 38}) and not replica.in_use  # not checked yet: known, but not read
    replicas.check_came_back(replica, checked(head=(40, "")), PRIMARY)
    assert replica.in_use and replica.seqs == {1: 40} and replica.checked_at is not None


def database_error(sqlstate: str | None) -> OperationalError:
    error = OperationalError("failed")
    if sqlstate == "pool":
        error.__cause__ = PoolTimeout("no connection in time")
    else:
        error.__cause__ = psycopg.OperationalError("x") if sqlstate is None else psycopg.errors.lookup(sqlstate)("x")
    return error


@pytest.mark.parametrize(("sqlstate", "again_on_the_primary", "set_aside"), [
    (None, True, True),         # the connection failed: it does not answer
    ("57P01", True, True),      # the standby is shutting down
    ("08006", True, True),      # a connection lost
    ("40001", True, False),     # a recovery conflict: replay cancelled the query
    ("pool", True, False),      # its pool had no connection free in time: busy, not gone
    ("57014", False, False),    # the statement timeout: the primary would take as long
])
def test_a_read_failing_on_a_replica_is_read_again_on_the_primary_only_when_the_replica_is_at_fault(
        sqlstate: str | None, again_on_the_primary: bool, set_aside: bool) -> None:
    replicas, replica = replica_set()
    assert replicas.failed("replica1", database_error(sqlstate)) is again_on_the_primary
    assert replica.in_use is not set_aside


def test_the_primary_failing_is_never_read_again() -> None:
    replicas, _ = replica_set()
    assert replicas.failed("default", database_error(None)) is False


@pytest.mark.parametrize(("header", "floor"), [
    ('W/"abc@1:57"', {1: 57}),
    ('W/"abc@1:57+2:90", "def@1:60"', {1: 60, 2: 90}),
    ('W/"abc"', {}),
    ("*", {}),
    ('W/"abc@1:99999999999999999999"', {}),  # past the largest seq
    ('W/"abc@x:1+1:-2+:3"', {}),
    ('W/"abc@' + "+".join(f"{n}:1" for n in range(100)) + '"', dict.fromkeys(range(MAX_FLOOR_ITEMS), 1)),
])
def test_a_request_asks_for_at_most_what_its_tags_name_well_formed(header: str, floor: dict[int, int]) -> None:
    assert etag_floor(RequestFactory().get("/bounties/1", headers={"If-None-Match": header})) == floor


@pytest.mark.django_db
def test_a_clients_floor_past_the_primarys_newest_change_asks_for_nothing_once_the_primary_is_asked() -> None:
    """A tag or position of another history, or a forged one, names a seq no database holds: it
    must not make every read wait. Until the primary has been asked, a seq past what was seen
    stands (it may be newer than the last check)."""
    deployment = make_deployment()
    for _ in range(3):
        bump_version(deployment)  # the primary's newest change: seq 3
    replicas, _ = replica_set()
    # Asked now: it holds seq 3 of the deployment, and no other deployment.
    assert replicas._trimmed({deployment.pk: 2, deployment.pk + 1: 5}) == {deployment.pk: 2}
    assert replicas._trimmed({deployment.pk: 3}) == {deployment.pk: 3}  # within what it holds: not asked
    assert replicas._trimmed({deployment.pk: 9}) == {deployment.pk: 9}  # asked a moment ago: it stands
    time.sleep(PROBE_SECONDS)
    assert replicas._trimmed({deployment.pk: 9}) == {}  # asked again: past its newest change
