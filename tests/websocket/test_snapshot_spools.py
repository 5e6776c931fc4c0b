"""A snapshot holds its slot for its own reading, not for waits on threads: the chunk that reaches
the end closes the reader (a small snapshot is read and closed in the one call that opens it), and
the process's snapshots run on threads kept from one snapshot to the next, never more than its
snapshot readers (records.ws.snapshot)."""

from __future__ import annotations

import asyncio
import json
import threading
from typing import Any

import pytest
from channels.routing import URLRouter
from channels.testing import WebsocketCommunicator

from records.routing import websocket_urlpatterns
from records.ws import feed, limits, snapshot
from records.ws.snapshot import SnapshotDeadline, SnapshotReader
from tests.factories import make_bounty, make_deployment

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def three_bounties(settings: Any) -> None:
    deployment = make_deployment()
    settings.BOUNTY_CHAIN_ID, settings.BOUNTY_CONTRACT_ADDRESS = deployment.chain_id, deployment.contract_address
    for _ in range(3):
        make_bounty(deployment)


def types(pieces: list[Any]) -> list[str]:
    return [json.loads(text)["type"] for batch, _ in pieces for text in batch.texts]


def test_a_small_snapshot_is_read_and_closed_by_the_call_that_opens_it(three_bounties: None) -> None:
    reader = SnapshotReader(SnapshotDeadline())
    assert types(reader.open(framed=True)) == ["bounty.created"] * 3 + ["snapshot.complete"]
    assert reader.closed


def test_a_larger_snapshot_is_closed_by_its_last_chunk(three_bounties: None, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(snapshot, "SNAPSHOT_CHUNK", 2)
    reader = SnapshotReader(SnapshotDeadline())
    chunks = [types(reader.open(framed=False))]
    while not reader.closed:
        chunks.append(types(reader.next_chunk(framed=False)))
    assert chunks == [["bounty.created"] * 2, ["bounty.created", "snapshot.complete"], []]
    reader.close()  # again: nothing


def test_a_process_s_snapshots_run_on_threads_it_keeps(
        three_bounties: None, monkeypatch: pytest.MonkeyPatch, settings: Any) -> None:
    monkeypatch.setattr(feed, "_feed", None)  # this event loop's own feed, not another test's
    monkeypatch.setattr(snapshot, "_reader_threads", snapshot._ReaderThreads())
    monkeypatch.setattr(limits, "_snapshot_readers", limits._SnapshotReaders())
    settings.BOUNTY_WS_SNAPSHOT_READERS = 2
    opened_on: list[int] = []
    open_reader = SnapshotReader.open

    def recorded_open(self: SnapshotReader, framed: bool) -> Any:
        opened_on.append(threading.get_ident())
        return open_reader(self, framed)

    monkeypatch.setattr(SnapshotReader, "open", recorded_open)

    async def snapshot_to_complete() -> None:
        communicator = WebsocketCommunicator(URLRouter(websocket_urlpatterns), "/ws/events")
        assert (await communicator.connect())[0]
        while json.loads(await communicator.receive_from(timeout=10))["type"] != "snapshot.complete":
            pass
        await communicator.disconnect()

    async def scenario() -> None:
        for _ in range(3):  # one after another
            await snapshot_to_complete()
        await asyncio.gather(*(snapshot_to_complete() for _ in range(6)))  # more at once than the readers

    asyncio.run(scenario())
    assert len(opened_on) == 9
    assert len(set(opened_on[:3])) == 1 and len(set(opened_on)) <= 2
