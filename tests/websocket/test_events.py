"""/ws/events end to end: a real indexer process mirrors a real anvil chain, real daphne processes
serve the feed, real clients read it."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import pytest

from contracts.demo import seed_demo_activity
from indexer.models import ChangeLogEntry, SyncState
from indexer.sync import Indexer
from records.history import Position
from records.models import Bounty, Deployment, Dispute, Submission
from records.representation import bounty_json, dispute_json, submission_json
from records.selectors import genesis_position
from tests.chain import Chain
from tests.indexer.conftest import catch_up_to_head, config_for
from tests.servers import Server
from tests.websocket.conftest import commit_change, head, many_bounties, open_client, receive, receive_n

pytestmark = pytest.mark.django_db(transaction=True)

EIGHT = {"bounty.created", "submission.created", "dispute.created", "dispute.resolved", "dispute.cancelled",
         "bounty.finalized", "bounty.refunded", "submission.refunded"}


def current_records(deployment: Deployment) -> list[tuple[str, dict[str, Any]]]:
    """Every record as the REST single-record JSON, in the snapshot's order."""
    where: dict[str, Any] = {"chain_id": deployment.chain_id, "contract_address": deployment.contract_address}
    return [
        *[("bounty.created", bounty_json(b, **where))
          for b in Bounty.objects.filter(deployment=deployment).order_by("bounty_id")],
        *[("submission.created", submission_json(s, **where))
          for s in Submission.objects.filter(deployment=deployment).order_by("submission_id")],
        *[("dispute.created", dispute_json(d, **where))
          for d in Dispute.objects.filter(deployment=deployment).order_by("dispute_id")],
    ]


def test_it_sends_the_snapshot_in_order_then_live_messages(chain: Chain, servers: Callable[..., Server]) -> None:
    seed_demo_activity(chain.w3, chain.deployment)
    indexer = Indexer(config_for(chain))
    catch_up_to_head(indexer)
    deployment = Deployment.objects.get()
    expected = current_records(deployment)
    assert len(expected) == 16
    server = servers()
    with open_client(server.url()) as client:
        snapshot = receive_n(client, len(expected))
        assert [(m["type"], m["payload"]) for m in snapshot] == expected
        last_seq = SyncState.objects.get().last_seq
        assert all(m["snapshot"] is True and m["seq"] == last_seq for m in snapshot)
        counts = {kind: sum(t == f"{kind}.created" for t, _ in expected)
                  for kind in ("bounty", "submission", "dispute")}
        assert receive(client) == {"type": "snapshot.complete", "seq": last_seq, "position": head(deployment),
                                   "payload": {"bounties": counts["bounty"], "submissions": counts["submission"],
                                               "disputes": counts["dispute"]}}
        chain.send(chain.usdc.functions.approve(chain.board.address, 2**256 - 1), chain.account(1))
        chain.send(chain.board.functions.createBounty("ipfs://late", b"\x02" * 32, 10**7, 3600), chain.account(1))
        catch_up_to_head(indexer)
        message = receive(client)
        bounty = Bounty.objects.get(deployment=deployment, bounty_id=5)
        assert message == {"type": "bounty.created", "seq": last_seq + 1, "position": head(deployment),
                           "payload": bounty_json(bounty, chain_id=deployment.chain_id,
                                                  contract_address=deployment.contract_address)}


def test_each_contract_call_arrives_live_from_the_indexer_process(
    chain: Chain, servers: Callable[..., Server], indexer_process: Callable[[], Any]
) -> None:
    indexer_process()
    server = servers()
    deadline = time.monotonic() + 30
    while not SyncState.objects.exists():  # the indexer has registered the deployment
        assert time.monotonic() < deadline, "the indexer did not start"
        time.sleep(0.05)
    since = genesis_position(SyncState.objects.get().deployment_id)
    with open_client(server.url(f"?since={since}")) as client:  # every change live, from the first
        seed_demo_activity(chain.w3, chain.deployment)
        deadline = time.monotonic() + 30
        head = chain.w3.eth.block_number
        while not SyncState.objects.filter(last_indexed_block=head).exists():
            assert time.monotonic() < deadline, "the indexer did not catch up"
            time.sleep(0.1)
        entries = [(seq, type_, payload, str(Position(seq, digest or ""))) for seq, type_, payload, digest
                   in ChangeLogEntry.objects.order_by("seq").values_list("seq", "type", "payload", "digest")]
        received = receive_n(client, len(entries))
    assert [(m["seq"], m["type"], m["payload"], m["position"]) for m in received] == entries
    assert [m["seq"] for m in received] == list(range(1, len(entries) + 1))
    assert {m["type"] for m in received} >= EIGHT


def test_a_change_committed_during_the_snapshot_arrives_once(
    active: Deployment, servers: Callable[..., Server]
) -> None:
    many_bounties(active, 10_000)
    server = servers()
    with open_client(server.url(), max_queue=4) as client:
        first = receive(client)
        assert first["snapshot"] is True
        time.sleep(0.3)  # the client does not read: the server's snapshot waits mid-stream
        before = head(active)
        seq = commit_change(active, "bounty.created", {"id": 10**6})
        messages = receive_n(client, 10_001, timeout=60)
        assert all(m.get("snapshot") and m["seq"] == seq - 1 for m in messages[:-2])
        assert messages[-2] == {"type": "snapshot.complete", "seq": seq - 1, "position": before,
                                "payload": {"bounties": 10_000, "submissions": 0, "disputes": 0}}
        assert messages[-1] == {"type": "bounty.created", "payload": {"id": 10**6}, "seq": seq,
                                "position": head(active)}
        with pytest.raises(TimeoutError):
            client.recv(timeout=0.5)
