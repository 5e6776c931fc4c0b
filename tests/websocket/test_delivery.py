"""Live delivery across processes, and `?since=<position>` resumption (records.history)."""

from __future__ import annotations

import contextlib
import json
import os
from collections.abc import Callable

import pytest

from indexer.models import ChangeLogEntry
from records.changes import MessageType
from records.history import Position
from records.models import Deployment
from records.representation import bounty_json
from records.selectors import genesis_position
from tests.history import append_changes, updates
from tests.servers import Server
from tests.websocket.conftest import commit_change, head, logged_bounty, open_client, receive, receive_n

pytestmark = pytest.mark.django_db(transaction=True)


def test_clients_of_two_server_processes_receive_every_live_message(
    active: Deployment, servers: Callable[..., Server]
) -> None:
    # With Redis the servers barely poll: the indexer's notification must carry the messages.
    poll = "60000" if os.environ.get("REDIS_URL") else "50"
    first, second = servers(BOUNTY_WS_POLL_MS=poll), servers(BOUNTY_WS_POLL_MS=poll)
    since = f"?since={genesis_position(active.pk)}"  # before the first change: every change live
    with open_client(first.url(since)) as one, open_client(second.url(since)) as two:
        seqs = [commit_change(active, "bounty.updated", {"id": n}) for n in range(1, 6)]
        seqs.append(commit_change(active, "bounty.updated", {"id": 6}, count=3))
        for client in (one, two):
            messages = receive_n(client, 8, timeout=10)
            assert [m["seq"] for m in messages] == list(range(1, 9))
            assert seqs[-1] == 8


def live(position: Position, payload: dict[str, object]) -> dict[str, object]:
    """The live message of a `bounty.updated` change of `payload` after which a client is at `position`."""
    return {"type": "bounty.updated", "payload": payload, "seq": position.seq, "position": str(position)}


def test_since_delivers_exactly_the_missed_messages(active: Deployment, servers: Callable[..., Server]) -> None:
    append_changes(active, updates(1, 2, 3))
    seen = head(active)
    append_changes(active, updates(4, 5, 6, 7))
    server = servers()
    with open_client(server.url(f"?since={seen}")) as client:
        assert [m["seq"] for m in receive_n(client, 4)] == [4, 5, 6, 7]
        position = append_changes(active, updates(8))
        assert receive(client) == live(position, {"id": 8})
        with pytest.raises(TimeoutError):
            client.recv(timeout=0.3)


@pytest.mark.parametrize("since", ["genesis", "pruned", "ahead", "0", "99", "-1", "x"])
def test_since_out_of_the_change_log_gets_a_snapshot(
    active: Deployment, servers: Callable[..., Server], since: str
) -> None:
    genesis = str(genesis_position(active.pk))
    bounty, created = logged_bounty(active)
    newest = append_changes(active, updates(bounty.bounty_id))
    ChangeLogEntry.objects.filter(seq__lte=created.seq).delete()  # pruned, as far as it goes: all but the newest
    values = {"genesis": genesis, "pruned": str(created), "ahead": str(Position(newest.seq + 1, newest.digest))}
    server = servers()
    with open_client(server.url(f"?since={values.get(since, since)}")) as client:
        assert receive(client) == {"type": "bounty.created", "snapshot": True, "seq": newest.seq,
                                   "payload": bounty_json(bounty, chain_id=active.chain_id,
                                                          contract_address=active.contract_address)}
        assert receive(client) == {"type": "snapshot.complete", "seq": newest.seq, "position": str(newest),
                                   "payload": {"bounties": 1, "submissions": 0, "disputes": 0}}
        position = append_changes(active, updates(2))
        assert receive(client) == live(position, {"id": 2})


def test_a_burst_reaches_every_client_whole_identical_and_in_order(
    active: Deployment, servers: Callable[..., Server]
) -> None:
    # Commits one by one while the clients read: the feed fans them out in batches of varying
    # size, each framed once and shared; a large message takes the longer frame headers.
    server = servers(BOUNTY_WS_POLL_MS="20")
    since = append_changes(active, updates(0))
    with contextlib.ExitStack() as stack:
        clients = [stack.enter_context(open_client(server.url(f"?since={since}"), max_size=None)) for _ in range(4)]
        payloads = [{"id": n, "text": "x" * (70_000 if n % 50 == 0 else n)} for n in range(1, 151)]
        positions = [append_changes(active, [(MessageType.BOUNTY_UPDATED, payload, 1)]) for payload in payloads]
        texts = [[client.recv(timeout=20) for _ in payloads] for client in clients]
    assert all(received == texts[0] for received in texts[1:])
    assert [json.loads(text) for text in texts[0]] == [
        live(position, payload) for payload, position in zip(payloads, positions, strict=True)
    ]
