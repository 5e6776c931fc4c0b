"""The indexer's health data: heartbeat, progress, lag and the running/synced flags."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.test import override_settings
from django.utils import timezone

from indexer.health import indexer_health
from indexer.models import IndexerProcess, IndexState, SyncState
from tests.factories import make_deployment

pytestmark = pytest.mark.django_db


@override_settings(BOUNTY_CONFIRMATIONS=2, BOUNTY_RPC_URL="http://127.0.0.1:8545")
def test_a_recent_heartbeat_within_the_lag_threshold_is_running_and_synced() -> None:
    deployment = make_deployment()
    now = timezone.now()
    SyncState.objects.filter(deployment=deployment).update(
        last_indexed_block=98, head_block=100, last_heartbeat=now, rpc_calls_per_block=1.04, rpc_calls_per_day=89_856,
        node_asked_at=now - timedelta(seconds=1), block_rhythm_seconds=1.0004,
        block_rhythm_since=now - timedelta(minutes=3))
    health = indexer_health(deployment, now=now + timedelta(seconds=5))
    assert health == {
        "enabled": True, "running": True, "synced": True, "start_block": None, "start_block_found": False,
        "last_indexed_block": 98, "head_block": 100,
        "lag_blocks": 0, "confirmations": 2, "confirmations_tag": None, "rate_limited": False,
        "rpc_calls_per_block": 1.04, "rpc_calls_per_day": 89_856, "rpc_calls_by_phase": {},
        "block_rhythm_seconds": 1.0, "block_rhythm_since": now - timedelta(minutes=3), "node_unreachable_since": None,
        "node_unreachable_seconds": None, "node_last_asked_at": now - timedelta(seconds=1),
        "node_last_asked_seconds": 6, "node_ask_overdue": False, "last_heartbeat": now,
        "indexes": "ready", "backfill": None, "processes": [],
    }


@override_settings(BOUNTY_INDEXER_MAX_WAIT_SECONDS=15.0, BOUNTY_RPC_TIMEOUT_SECONDS=20,
                   BOUNTY_HEALTH_HEARTBEAT_SECONDS=60)
@pytest.mark.parametrize(("asked_ago", "heartbeat_age", "overdue"), [
    pytest.param(78, 5, False, id="within-the-ceiling-and-an-unanswered-polls-tries"),
    pytest.param(79, 5, True, id="past-them"),
    pytest.param(300, 61, False, id="no-indexer-running"),
])
def test_an_indexer_that_has_not_asked_the_node_past_its_ceiling_is_overdue(asked_ago: int, heartbeat_age: int,
                                                                              overdue: bool) -> None:
    deployment = make_deployment()
    now = timezone.now()
    SyncState.objects.filter(deployment=deployment).update(
        last_indexed_block=100, head_block=100, last_heartbeat=now - timedelta(seconds=heartbeat_age),
        node_asked_at=now - timedelta(seconds=asked_ago))
    health = indexer_health(deployment, now=now)
    assert (health["node_last_asked_seconds"], health["node_ask_overdue"]) == (asked_ago, overdue)


@override_settings(BOUNTY_HEALTH_HEARTBEAT_SECONDS=60)
@pytest.mark.parametrize(("heartbeat_age", "reported"), [(5, True), (61, False)])
def test_a_node_that_does_not_answer_the_running_indexer_is_reported_with_how_long(heartbeat_age: int,
                                                                                   reported: bool) -> None:
    deployment = make_deployment()
    now = timezone.now()
    SyncState.objects.filter(deployment=deployment).update(
        last_indexed_block=100, head_block=100, last_heartbeat=now - timedelta(seconds=heartbeat_age),
        node_unreachable_since=now - timedelta(seconds=95))
    health = indexer_health(deployment, now=now)
    expected = (now - timedelta(seconds=95), 95) if reported else (None, None)
    assert (health["node_unreachable_since"], health["node_unreachable_seconds"]) == expected


@override_settings(BOUNTY_HEALTH_HEARTBEAT_SECONDS=60)
def test_what_following_costs_is_not_reported_once_the_heartbeat_is_stale() -> None:
    deployment = make_deployment()
    now = timezone.now()
    SyncState.objects.filter(deployment=deployment).update(
        last_indexed_block=100, head_block=100, last_heartbeat=now - timedelta(seconds=61), rpc_calls_per_block=1.1,
        rpc_calls_per_day=95_040)
    health = indexer_health(deployment, now=now)
    assert (health["rpc_calls_per_block"], health["rpc_calls_per_day"]) == (None, None)


@override_settings(BOUNTY_HEALTH_HEARTBEAT_SECONDS=60)
@pytest.mark.parametrize(("rhythm", "heartbeat_age", "reported"), [
    pytest.param(None, 5, False, id="none-trusted"),
    pytest.param(12.0, 5, True, id="trusted"),
    pytest.param(12.0, 61, False, id="no-indexer-running"),
])
def test_the_block_rhythm_the_running_indexer_trusts_is_reported_with_since_when(
        rhythm: float | None, heartbeat_age: int, reported: bool) -> None:
    deployment = make_deployment()
    now = timezone.now()
    SyncState.objects.filter(deployment=deployment).update(
        last_indexed_block=100, head_block=100, last_heartbeat=now - timedelta(seconds=heartbeat_age),
        block_rhythm_seconds=rhythm, block_rhythm_since=now - timedelta(seconds=90) if rhythm else None)
    health = indexer_health(deployment, now=now)
    expected = (12.0, now - timedelta(seconds=90)) if reported else (None, None)
    assert (health["block_rhythm_seconds"], health["block_rhythm_since"]) == expected


@override_settings(BOUNTY_HEALTH_HEARTBEAT_SECONDS=60)
@pytest.mark.parametrize(("age", "rate_limited"), [(None, False), (5, True), (61, False)])
def test_a_rate_limit_within_the_heartbeat_window_is_reported(age: int | None, rate_limited: bool) -> None:
    deployment = make_deployment()
    now = timezone.now()
    SyncState.objects.filter(deployment=deployment).update(
        last_indexed_block=100, head_block=100, last_heartbeat=now,
        rate_limited_at=None if age is None else now - timedelta(seconds=age))
    assert indexer_health(deployment, now=now)["rate_limited"] is rate_limited


@override_settings(BOUNTY_CONFIRMATIONS="safe", BOUNTY_HEALTH_MAX_LAG_BLOCKS=10)
def test_with_a_block_tag_the_lag_counts_from_the_tagged_block_last_polled() -> None:
    deployment = make_deployment()
    now = timezone.now()
    SyncState.objects.filter(deployment=deployment).update(
        last_indexed_block=40, head_block=100, safe_block=45, last_heartbeat=now
    )
    health = indexer_health(deployment, now=now)
    assert (health["confirmations"], health["confirmations_tag"], health["lag_blocks"], health["synced"]) == (
        55, "safe", 5, True)


@override_settings(BOUNTY_HEALTH_HEARTBEAT_SECONDS=60)
def test_the_indexer_processes_seen_within_the_heartbeat_are_listed_writer_first() -> None:
    deployment = make_deployment()
    now = timezone.now()
    for name, role, age in [("a:1", "standby", 5), ("b:2", "writer", 1), ("c:3", "writer", 61), ("d:4", "standby", 0)]:
        IndexerProcess.objects.create(deployment=deployment, name=name, role=role, started_at=now - timedelta(hours=1),
                                      last_seen=now - timedelta(seconds=age))
    health = indexer_health(deployment, now=now)
    assert [(p["name"], p["role"]) for p in health["processes"]] == [("b:2", "writer"), ("a:1", "standby"),
                                                                    ("d:4", "standby")]


@override_settings(BOUNTY_CONFIRMATIONS=0, BOUNTY_HEALTH_MAX_LAG_BLOCKS=10)
def test_lag_beyond_the_threshold_is_not_synced() -> None:
    deployment = make_deployment()
    now = timezone.now()
    SyncState.objects.filter(deployment=deployment).update(last_indexed_block=50, head_block=100, last_heartbeat=now)
    health = indexer_health(deployment, now=now)
    assert (health["running"], health["synced"], health["lag_blocks"]) == (True, False, 50)


@override_settings(BOUNTY_HEALTH_HEARTBEAT_SECONDS=60)
def test_a_stale_heartbeat_is_not_running() -> None:
    deployment = make_deployment()
    then = timezone.now() - timedelta(seconds=61)
    SyncState.objects.filter(deployment=deployment).update(last_indexed_block=100, head_block=100, last_heartbeat=then)
    health = indexer_health(deployment)
    assert (health["running"], health["synced"]) == (False, False)


@override_settings(BOUNTY_RPC_URL=None)
def test_without_an_indexer_every_flag_is_off() -> None:
    health = indexer_health(None)
    assert health["enabled"] is False and health["running"] is False and health["synced"] is False
    assert health["last_indexed_block"] is None and health["lag_blocks"] is None


def test_a_backfill_under_way_reports_its_progress() -> None:
    deployment = make_deployment()
    SyncState.objects.filter(deployment=deployment).update(
        last_indexed_block=249, head_block=1_100, backfill_from_block=100, backfill_to_block=1_099)
    assert indexer_health(deployment)["backfill"] == {
        "from_block": 100, "to_block": 1_099, "done_blocks": 150, "total_blocks": 1_000, "percent": 15.0}


@pytest.mark.parametrize("state", ["deferred", "building", "ready"])
def test_it_reports_the_state_of_the_secondary_indexes(state: str) -> None:
    deployment = make_deployment()
    IndexState.objects.create(pk=IndexState.SINGLETON, state=state, deployment=deployment, changed_at=timezone.now())
    assert indexer_health(deployment)["indexes"] == state
