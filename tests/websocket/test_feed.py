"""The process's feed (records.ws.feed) as its clients come and go: a client that goes away while
the feed is finding its deployment and position (its stream cancelled between the two reads)
leaves the feed serving every client after it; a client whose snapshot came before the first
change resumes from the genesis with every change; the first change, committed while the feed
reads at the genesis, is read, not taken for another history; a feed cancelled while Redis swallows
the cancellation still ends."""

from __future__ import annotations

import asyncio
import contextlib
import threading
from typing import Any

import orjson
import pytest
import redis
from asgiref.sync import async_to_sync, sync_to_async
from channels.db import database_sync_to_async

from records import selectors
from records.history import Position
from records.replicas import Replica, ReplicaSet
from records.selectors import genesis_position, head_position
from records.ws import feed
from records.ws.messages import MessageBatch
from records.ws.outbox import Outbox
from tests.factories import make_deployment
from tests.history import append_changes, updates

pytestmark = pytest.mark.django_db(transaction=True)


def resume_point(since: str) -> int | None:
    """records.ws.feed.resume_point, from a test's thread (as a websocket consumer awaits it)."""
    return async_to_sync(feed.resume_point)(since)


async def _nothing(batch: MessageBatch) -> None:
    raise AssertionError("a client at the head is sent nothing on subscribing")


def test_a_client_gone_while_the_feed_finds_its_position_leaves_the_feed_serving(
        monkeypatch: pytest.MonkeyPatch, settings: Any) -> None:
    deployment = make_deployment()
    settings.BOUNTY_CHAIN_ID, settings.BOUNTY_CONTRACT_ADDRESS = deployment.chain_id, deployment.contract_address
    reading, answer = threading.Event(), threading.Event()

    def held_head_position(deployment_id: int) -> Position:
        reading.set()
        answer.wait(10)
        return head_position(deployment_id)

    monkeypatch.setattr(feed, "head_position", held_head_position)
    live = feed.LiveFeed()
    live.start = lambda: None  # type: ignore[method-assign]  # no polling and listening tasks: the test drives it

    async def scenario() -> tuple[Position, MessageBatch]:
        first = asyncio.create_task(live.subscribe(Outbox(1, lambda: None), _nothing))
        await asyncio.to_thread(reading.wait, 10)  # the feed has its deployment, not yet its position
        first.cancel()  # its client went away
        with contextlib.suppress(asyncio.CancelledError):
            await first
        answer.set()
        outbox = Outbox(1, lambda: None)
        await live.subscribe(outbox, _nothing)
        position = await database_sync_to_async(append_changes)(deployment, updates(1))
        await live._advance()
        return position, await asyncio.wait_for(outbox.get(), timeout=5)

    position, batch = asyncio.run(scenario())
    assert [orjson.loads(text) for text in batch.texts] == [
        {"type": "bounty.updated", "payload": {"id": 1}, "seq": 1, "position": str(position)}]
    assert live.cursor == position


def test_a_client_whose_snapshot_came_before_the_first_change_resumes_from_the_genesis(settings: Any) -> None:
    deployment = make_deployment()
    settings.BOUNTY_CHAIN_ID, settings.BOUNTY_CONTRACT_ADDRESS = deployment.chain_id, deployment.contract_address
    genesis = str(genesis_position(deployment.pk))  # what its snapshot.complete said
    assert resume_point(genesis) == 1
    append_changes(deployment, updates(1, 2))
    assert resume_point(genesis) == 1
    assert [seq for seq, _, _ in feed.read_after(deployment.pk, genesis_position(deployment.pk))] == [1, 2]


def test_the_first_change_committed_while_the_feed_reads_at_the_genesis_is_read_not_taken_for_another_history(
        monkeypatch: pytest.MonkeyPatch) -> None:
    # The feed finds no entry after the genesis, and reads the newest position to vouch for it:
    # the indexer's first commit lands in between.
    deployment = make_deployment()
    genesis = genesis_position(deployment.pk)
    committed: list[Position] = []

    def head_after_a_commit(deployment_id: int) -> Position:
        if not committed:
            committed.append(append_changes(deployment, updates(1)))
        return head_position(deployment_id)

    monkeypatch.setattr(selectors, "head_position", head_after_a_commit)
    changes = feed.read_after(deployment.pk, genesis)
    assert [orjson.loads(text) for _, text, _ in changes] == [
        {"type": "bounty.updated", "payload": {"id": 1}, "seq": 1, "position": str(committed[0])}]


def test_a_feed_whose_replicas_are_all_set_aside_reads_the_primary_on_its_poll(monkeypatch: pytest.MonkeyPatch) -> None:
    """No announcement comes (no Redis) and no replica is in use: the poll reads the primary."""
    deployment = make_deployment()
    replicas = ReplicaSet([])
    replicas.replicas.append(Replica("replica1", "replica.invalid:5432/bounty"))  # set aside: not checked yet
    monkeypatch.setattr(feed, "REPLICAS", replicas)

    async def scenario() -> tuple[int, int]:
        live = feed.LiveFeed()
        live.deployment_id = deployment.pk
        live.cursor = await sync_to_async(head_position)(deployment.pk)
        outbox = Outbox(live.cursor.seq + 1, lambda: None)
        live.subscribers.add(outbox)
        await sync_to_async(append_changes)(deployment, updates(1))
        await live._read_on()
        return live.cursor.seq, outbox.queued

    assert asyncio.run(scenario()) == (1, 1)


class SwallowingLayer:
    """A channel layer whose first receive, cancelled, fails later as a Redis read that timed out:
    what the listener met when an event loop closed with the feed's tasks (the loop then waited
    for ever). Later receives wait until cancelled."""

    def __init__(self) -> None:
        self.receiving = asyncio.Event()
        self.receives = 0

    async def new_channel(self) -> str:
        return "specific.feed!1"

    async def group_add(self, group: str, channel: str) -> None:
        pass

    async def receive(self, channel: str) -> dict[str, Any]:
        self.receives += 1
        self.receiving.set()
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            if self.receives > 1:
                raise
        await asyncio.sleep(0.05)
        raise redis.exceptions.TimeoutError("Timeout reading from 127.0.0.1:6379")


def test_a_feed_listener_cancelled_while_redis_swallows_the_cancellation_ends(monkeypatch: pytest.MonkeyPatch) -> None:
    layer = SwallowingLayer()
    monkeypatch.setattr(feed, "get_channel_layer", lambda: layer)

    async def scenario() -> bool:
        live = feed.LiveFeed()
        listener = asyncio.create_task(live._listen())
        await asyncio.wait_for(layer.receiving.wait(), 5)
        assert live.listening
        listener.cancel()
        await asyncio.wait({listener}, timeout=1)  # a Redis outage would be retried after RETRY_SECONDS (2 s)
        return listener.cancelled()  # before asyncio.run cancels what is left

    assert asyncio.run(scenario())
    assert layer.receives == 1
