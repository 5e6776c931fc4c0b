"""Positions that name their history (records.history), through real daphne servers: a client
resumes without a snapshot only from a position the change log vouches for. Another history --
a database restored from a backup, a promoted standby, a re-index -- numbers its changes alike,
so the same seq names other changes there; here the change log is rewritten the way such a
switch leaves it (tests.history.replace_history: the entries after seq KEPT replaced)."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import pytest
from websockets.exceptions import ConnectionClosed
from websockets.sync.client import ClientConnection

from indexer.changelog import Change
from records.changes import MessageType
from records.history import Position
from records.models import Deployment
from records.selectors import changes_between, head_position
from tests.history import append_changes, replace_history, updates
from tests.servers import Server
from tests.websocket.conftest import head, logged_bounty, open_client, receive, receive_n

pytestmark = pytest.mark.django_db(transaction=True)

KEPT = 3  # the seq up to which both histories agree


def live(position: Position, payload: dict[str, Any]) -> dict[str, Any]:
    """The live message of a `bounty.updated` change after which a client is at `position`."""
    return {"type": "bounty.updated", "payload": payload, "seq": position.seq, "position": str(position)}


def edits(prefix: str, seqs: range) -> list[Change]:
    """An update of bounty 1 per seq, its text `prefix` and the seq."""
    return [(MessageType.BOUNTY_UPDATED, {"id": 1, "text": f"{prefix}{seq}"}, 1) for seq in seqs]


def positions(deployment: Deployment) -> dict[int, Position]:
    """The position after each change the change log holds, by seq."""
    last = head_position(deployment.pk).seq
    return {change.seq: change.position for change in changes_between(deployment.pk, 1, last, last)}


def history(deployment: Deployment) -> dict[int, Position]:
    """The first history: bounty 1's creation (seq 1), then updates of it (texts a2..a5)."""
    logged_bounty(deployment, bounty_id=1)
    append_changes(deployment, edits("a", range(2, 6)))
    return positions(deployment)


def other_history(deployment: Deployment, through: int = 5) -> dict[int, Position]:
    """Another history in its place, in one transaction: the same changes up to KEPT, different
    ones after (texts b4.., through seq `through`)."""
    replace_history(deployment, KEPT, edits("b", range(KEPT + 1, through + 1)))
    return positions(deployment)


def received_until_closed(client: ClientConnection, timeout: float = 10) -> list[dict[str, Any]]:
    """The messages a client receives until the server closes the connection."""
    received: list[dict[str, Any]] = []
    deadline = time.monotonic() + timeout
    try:
        while True:
            received.append(receive(client, max(0.01, deadline - time.monotonic())))
    except TimeoutError:
        raise AssertionError(f"the server did not close the connection; received {received}") from None
    except ConnectionClosed:
        return received


def snapshot(client: ClientConnection) -> dict[str, Any]:
    """Reads a snapshot to its end, which must come first; its `snapshot.complete`."""
    while (message := receive(client))["type"] != "snapshot.complete":
        assert message.get("snapshot") is True, message
    return message


def test_a_position_of_another_history_at_the_same_seq_gets_a_snapshot_then_live_messages(
        active: Deployment, servers: Callable[..., Server]) -> None:
    old = history(active)
    new = other_history(active)
    assert new[5].digest != old[5].digest and new[KEPT] == old[KEPT]
    server = servers()
    with open_client(server.url(f"?since={old[5]}")) as client:
        first = receive(client)
        assert first["type"] == "bounty.created" and first["snapshot"] is True
        assert receive(client) == {"type": "snapshot.complete", "seq": 5, "position": str(new[5]),
                                   "payload": {"bounties": 1, "submissions": 0, "disputes": 0}}
        after = append_changes(active, updates(1, text="b6"))
        assert receive(client) == live(after, {"id": 1, "text": "b6"})


@pytest.mark.parametrize("shared", [2, KEPT])
def test_a_position_both_histories_share_resumes_with_exactly_the_new_historys_changes(
        active: Deployment, servers: Callable[..., Server], shared: int) -> None:
    old = history(active)
    new = other_history(active, through=6)
    server = servers()
    with open_client(server.url(f"?since={old[shared]}")) as client:
        messages = receive_n(client, 6 - shared)
        assert messages == [live(new[seq], {"id": 1, "text": f"{'a' if seq <= KEPT else 'b'}{seq}"})
                            for seq in range(shared + 1, 7)]
        after = append_changes(active, updates(1, text="b7"))
        assert receive(client) == live(after, {"id": 1, "text": "b7"})
        with pytest.raises(TimeoutError):
            client.recv(timeout=0.3)


def test_a_bare_seq_gets_a_snapshot_even_where_the_change_log_holds_it(
        active: Deployment, servers: Callable[..., Server]) -> None:
    # What `?since=3` meant before positions named their history: a seq alone names none, so it is
    # taken on trust in no history.
    history(active)
    server = servers()
    with open_client(server.url("?since=3")) as client:
        assert receive(client)["snapshot"] is True
        assert receive(client)["position"] == head(active)
        after = append_changes(active, updates(1, text="a6"))
        assert receive(client) == live(after, {"id": 1, "text": "a6"})


def test_a_client_connected_while_the_history_is_replaced_is_closed_and_resumes_with_a_snapshot(
        active: Deployment, servers: Callable[..., Server]) -> None:
    old = history(active)
    server = servers()
    with open_client(server.url(f"?since={old[5]}")) as client:
        six = append_changes(active, updates(1, text="a6"))
        assert receive(client) == live(six, {"id": 1, "text": "a6"})
        new = other_history(active, through=7)  # seq 6 is another change now, and there is a seq 7
        assert received_until_closed(client) == [], "no message of the new history past the client's position"
        assert client.close_code == 1011
    with open_client(server.url(f"?since={six}")) as client:
        assert snapshot(client)["position"] == str(new[7])
        after = append_changes(active, updates(1, text="b8"))
        assert receive(client) == live(after, {"id": 1, "text": "b8"})


def test_an_identical_history_keeps_every_position_valid(active: Deployment, servers: Callable[..., Server]) -> None:
    # A backup whose catch-up applied the same changes again, or an identical re-index: the same
    # changes, with the same payloads at the same seqs, chain to the same digests.
    old = history(active)
    server = servers()
    with open_client(server.url(f"?since={old[5]}")) as throughout:
        assert replace_history(active, KEPT, edits("a", range(KEPT + 1, 6))) == old[5]
        assert positions(active) == old
        with open_client(server.url(f"?since={old[KEPT]}")) as resumed:
            assert receive_n(resumed, 2) == [live(old[seq], {"id": 1, "text": f"a{seq}"}) for seq in (4, 5)]
            after = append_changes(active, updates(1, text="a6"))
            for client in (resumed, throughout):  # no snapshot, and no close for the one connected
                assert receive(client) == live(after, {"id": 1, "text": "a6"})


def test_a_history_put_in_place_while_no_client_listens_is_followed_from_its_own_newest_change(
        active: Deployment, servers: Callable[..., Server]) -> None:
    """A database restored to an earlier change while no client was connected: the process's feed
    follows the restored log back, so the next client is streamed on from its snapshot, not closed."""
    history(active)
    server = servers()
    with open_client(server.url()) as client:  # the process's feed reads on from seq 5
        assert snapshot(client)["seq"] == 5
    time.sleep(0.5)  # the client gone, the feed polls with no one to send to
    replace_history(active, KEPT, [])  # a backup taken at seq 3
    time.sleep(0.5)
    with open_client(server.url()) as client:
        assert snapshot(client)["seq"] == KEPT
        position = append_changes(active, updates(9, text="after the restore"))
        assert receive(client) == live(position, {"id": 9, "text": "after the restore"})
