"""Resuming /ws/events from any point: every snapshot message carries the seq it is current at, the
`snapshot.complete` that ends the snapshot carries its position too (records.history), and a
`resync` (a bulk backfill's changes, not logged one by one) is followed by a new snapshot on the
same connection."""

from __future__ import annotations

import time
import urllib.request
from collections.abc import Callable
from typing import Any

import pytest
from django.test import override_settings

from contracts.demo import seed_demo_activity
from indexer.sync import Indexer
from records.models import Bounty, Deployment
from records.representation import bounty_json
from tests import metrics
from tests.chain import Chain
from tests.history import append_changes, updates
from tests.indexer.conftest import catch_up_to_head, config_for
from tests.indexer.mirror import current
from tests.servers import Server, stop
from tests.websocket.conftest import commit_change, head, open_client, receive, receive_n, written_in_bulk

pytestmark = pytest.mark.django_db(transaction=True)


def snapshot_of(deployment: Deployment, *bounty_ids: int) -> list[dict[str, Any]]:
    return [bounty_json(Bounty.objects.get(deployment=deployment, bounty_id=n), chain_id=deployment.chain_id,
                        contract_address=deployment.contract_address) for n in bounty_ids]


def test_a_client_that_drops_after_the_snapshot_resumes_from_its_seq_without_gap_or_repeat(
    active: Deployment, servers: Callable[..., Server]
) -> None:
    written_in_bulk(active, bounty_id=1)  # every seq has its entry, as the indexer writes them
    seen = append_changes(active, updates(1))
    server = servers()
    with open_client(server.url()) as client:
        snapshot = receive_n(client, 2)
    assert snapshot[0]["seq"] == seen.seq and snapshot[0]["snapshot"] is True
    assert snapshot[1] == {"type": "snapshot.complete", "seq": seen.seq, "position": str(seen),
                           "payload": {"bounties": 1, "submissions": 0, "disputes": 0}}
    missed = [append_changes(active, updates(n)) for n in (2, 3)]
    with open_client(server.url(f"?since={snapshot[1]['position']}")) as client:
        assert [m["position"] for m in receive_n(client, 2)] == [str(position) for position in missed]
        with pytest.raises(TimeoutError):
            client.recv(timeout=0.3)


def test_a_resync_sends_every_connected_client_a_new_snapshot_then_live_messages(
    active: Deployment, servers: Callable[..., Server]
) -> None:
    written_in_bulk(active, bounty_id=1)
    server = servers()
    with open_client(server.url()) as first, open_client(server.url()) as second:
        for client in (first, second):
            assert [m["type"] for m in receive_n(client, 2)] == ["bounty.created", "snapshot.complete"]
        written_in_bulk(active, bounty_id=2)
        seq = commit_change(active, "resync", {"from_block": 1, "to_block": 9})
        resync = head(active)
        for client in (first, second):
            assert receive(client) == {"type": "resync", "seq": seq, "position": resync,
                                       "payload": {"from_block": 1, "to_block": 9}}
            fresh = receive_n(client, 3)
            assert [m["payload"] for m in fresh[:2]] == snapshot_of(active, 1, 2)
            assert all(m["snapshot"] is True and m["seq"] == seq for m in fresh[:2])
            assert fresh[2] == {"type": "snapshot.complete", "seq": seq, "position": resync,
                                "payload": {"bounties": 2, "submissions": 0, "disputes": 0}}
        live = append_changes(active, updates(2))
        for client in (first, second):
            assert receive(client) == {"type": "bounty.updated", "seq": live.seq, "position": str(live),
                                       "payload": {"id": 2}}


def test_resuming_from_before_a_resync_gets_the_resync_and_a_snapshot_never_a_silent_gap(
    active: Deployment, servers: Callable[..., Server]
) -> None:
    before = append_changes(active, updates(1))
    written_in_bulk(active, bounty_id=1)
    resync = commit_change(active, "resync", {"from_block": 1, "to_block": 9})
    server = servers()
    with open_client(server.url(f"?since={before}")) as client:
        messages = receive_n(client, 3)
        assert [(m["type"], m["seq"]) for m in messages] == [
            ("resync", resync), ("bounty.created", resync), ("snapshot.complete", resync)]
        live = commit_change(active, "bounty.updated", {"id": 1})
        assert receive(client)["seq"] == live


@override_settings(BOUNTY_DEFER_INDEXES="always")
def test_a_client_connected_during_a_bulk_backfill_ends_holding_every_record(
    chain: Chain, servers: Callable[..., Server]
) -> None:
    seed_demo_activity(chain.w3, chain.deployment)
    server = servers()
    with open_client(server.url()) as client:
        assert receive(client)["type"] == "snapshot.complete"  # nothing indexed yet
        indexer = Indexer(config_for(chain))
        indexer.ensure_deployment()
        indexer.prepare()
        catch_up_to_head(indexer)
        assert receive(client)["type"] == "resync"
        held: dict[tuple[str, int], dict[str, Any]] = {}
        while (message := receive(client))["type"] != "snapshot.complete":
            held[(message["type"].split(".")[0], message["payload"]["id"])] = message["payload"]
    assert held == current(Deployment.objects.get()) and len(held) == 16


def resumes(server: Server) -> dict[str, float]:
    """The server's bounty_ws_resumes_total by source."""
    with urllib.request.urlopen(server.http("/metrics"), timeout=10) as response:
        samples = metrics.parse(response.read().decode())
    return {source: metrics.value(samples, "bounty_ws_resumes_total", source=source)
            for source in ("memory", "database", "none")}


def test_a_client_resuming_inside_the_feeds_memory_is_caught_up_from_it_without_the_database(
    active: Deployment, servers: Callable[..., Server]
) -> None:
    written_in_bulk(active, bounty_id=1)
    server = servers()
    with open_client(server.url()) as client:
        receive_n(client, 2)
        followed = [append_changes(active, updates(n)) for n in (2, 3)]
        assert [m["position"] for m in receive_n(client, 2)] == [str(position) for position in followed]
    missed = [append_changes(active, updates(n)) for n in (4, 5)]
    time.sleep(0.3)  # the feed reads them with no client listening
    with open_client(server.url(f"?since={followed[-1]}")) as client:
        assert [m["position"] for m in receive_n(client, 2)] == [str(position) for position in missed]
        live = append_changes(active, updates(6))
        assert receive(client)["position"] == str(live)
    assert resumes(server) == {"memory": 1, "database": 0, "none": 0}


def test_a_restarted_process_resumes_the_clients_of_the_one_before_from_memory(
    active: Deployment, servers: Callable[..., Server]
) -> None:
    written_in_bulk(active, bounty_id=1)
    before = servers()
    with open_client(before.url()) as client:
        receive_n(client, 2)
        seen = append_changes(active, updates(2))
        assert receive(client)["position"] == str(seen)
    stop(before.process)
    missed = [append_changes(active, updates(n)) for n in (3, 4)]
    after = servers()
    with open_client(after.url(f"?since={seen}")) as client:
        assert [m["position"] for m in receive_n(client, 2)] == [str(position) for position in missed]
    assert resumes(after) == {"memory": 1, "database": 0, "none": 0}


def test_a_position_older_than_the_feeds_memory_is_vouched_for_by_the_database(
    active: Deployment, servers: Callable[..., Server]
) -> None:
    written_in_bulk(active, bounty_id=1)
    old = append_changes(active, updates(1))
    newer = [append_changes(active, updates(n)) for n in (2, 3, 4)]
    server = servers(BOUNTY_WS_RECENT_MESSAGES="2")
    with open_client(server.url(f"?since={old}")) as client:
        assert [m["position"] for m in receive_n(client, 3)] == [str(position) for position in newer]
    with open_client(server.url(f"?since={newer[0]}")) as client:  # remembered: the 2 newest
        assert [m["position"] for m in receive_n(client, 2)] == [str(position) for position in newer[1:]]
    assert resumes(server) == {"memory": 1, "database": 1, "none": 0}
