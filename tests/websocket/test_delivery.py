"""Live delivery across processes, and `?since=` resumption."""

from __future__ import annotations

import contextlib
import json
import os
from collections.abc import Callable

import pytest

from indexer.models import ChangeLogEntry, SyncState
from records.models import Deployment
from records.representation import bounty_json
from tests.factories import make_bounty
from tests.servers import Server
from tests.websocket.conftest import commit_change, open_client, receive, receive_n

pytestmark = pytest.mark.django_db(transaction=True)


def test_clients_of_two_server_processes_receive_every_live_message(
    active: Deployment, servers: Callable[..., Server]
) -> None:
    # With Redis the servers barely poll: the indexer's notification must carry the messages.
    poll = "60000" if os.environ.get("REDIS_URL") else "50"
    first, second = servers(BOUNTY_WS_POLL_MS=poll), servers(BOUNTY_WS_POLL_MS=poll)
    with open_client(first.url("?since=0")) as one, open_client(second.url("?since=0")) as two:
        seqs = [commit_change(active, "bounty.updated", {"id": n}) for n in range(1, 6)]
        seqs.append(commit_change(active, "bounty.updated", {"id": 6}, count=3))
        for client in (one, two):
            messages = receive_n(client, 8, timeout=10)
            assert [m["seq"] for m in messages] == list(range(1, 9))
            assert seqs[-1] == 8


def test_since_delivers_exactly_the_missed_messages(active: Deployment, servers: Callable[..., Server]) -> None:
    for n in range(1, 8):
        commit_change(active, "bounty.updated", {"id": n})
    server = servers()
    with open_client(server.url("?since=3")) as client:
        assert [m["seq"] for m in receive_n(client, 4)] == [4, 5, 6, 7]
        seq = commit_change(active, "bounty.updated", {"id": 8})
        assert receive(client) == {"type": "bounty.updated", "payload": {"id": 8}, "seq": seq}
        with pytest.raises(TimeoutError):
            client.recv(timeout=0.3)


@pytest.mark.parametrize("since", ["0", "99", "-1", "x"])
def test_since_out_of_the_change_log_gets_a_snapshot(
    active: Deployment, servers: Callable[..., Server], since: str
) -> None:
    commit_change(active, "bounty.updated", {"id": 1})
    ChangeLogEntry.objects.all().delete()  # pruned: seq 1 is no longer held, so since=0 cannot resume
    bounty = make_bounty(active)
    server = servers()
    with open_client(server.url(f"?since={since}")) as client:
        current = SyncState.objects.get(deployment=active).last_seq
        assert receive(client) == {"type": "bounty.created", "snapshot": True, "seq": current, "payload": bounty_json(
            bounty, chain_id=active.chain_id, contract_address=active.contract_address)}
        assert receive(client)["type"] == "snapshot.complete"
        seq = commit_change(active, "bounty.updated", {"id": 2})
        assert receive(client)["seq"] == seq


def test_a_burst_reaches_every_client_whole_identical_and_in_order(
    active: Deployment, servers: Callable[..., Server]
) -> None:
    # Commits one by one while the clients read: the feed fans them out in batches of varying
    # size, each framed once and shared; a large message takes the longer frame headers.
    server = servers(BOUNTY_WS_POLL_MS="20")
    since = commit_change(active, "bounty.updated", {"id": 0})
    with contextlib.ExitStack() as stack:
        clients = [stack.enter_context(open_client(server.url(f"?since={since}"), max_size=None)) for _ in range(4)]
        payloads = [{"id": n, "text": "x" * (70_000 if n % 50 == 0 else n)} for n in range(1, 151)]
        seqs = [commit_change(active, "bounty.updated", payload) for payload in payloads]
        texts = [[client.recv(timeout=20) for _ in payloads] for client in clients]
    assert all(received == texts[0] for received in texts[1:])
    assert [json.loads(text) for text in texts[0]] == [
        {"type": "bounty.updated", "payload": payload, "seq": seq} for payload, seq in zip(payloads, seqs, strict=True)
    ]
