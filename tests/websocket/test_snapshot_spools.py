"""Snapshots are read from the database once per data version into a spool (records.spools,
records.ws.snapshot) and every client connecting meanwhile is sent that spool; a change makes the
next client's snapshot a new spool, and the old one goes once its last reader is done."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest
from channels.routing import URLRouter
from channels.testing import WebsocketCommunicator
from prometheus_client import REGISTRY

from records.routing import websocket_urlpatterns
from records.ws import feed
from records.ws.messages import MessageBatch, text_frame
from tests.factories import make_bounty, make_deployment
from tests.websocket.conftest import logged_bounty

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def deployment(settings: Any, monkeypatch: pytest.MonkeyPatch) -> Any:
    monkeypatch.setattr(feed, "_feed", None)  # this event loop's own feed, not another test's
    deployment = make_deployment()
    settings.BOUNTY_CHAIN_ID, settings.BOUNTY_CONTRACT_ADDRESS = deployment.chain_id, deployment.contract_address
    for _ in range(3):
        make_bounty(deployment)
    return deployment


def produced() -> float:
    """Snapshots read from the database into spools so far (bounty_spools_produced_total)."""
    return REGISTRY.get_sample_value("bounty_spools_produced_total", {"kind": "snapshot"}) or 0.0


def spools_open() -> float:
    return REGISTRY.get_sample_value("bounty_spools_open") or 0.0


async def snapshot_to_complete() -> list[dict[str, Any]]:
    communicator = WebsocketCommunicator(URLRouter(websocket_urlpatterns), "/ws/events")
    assert (await communicator.connect())[0]
    messages = [json.loads(await communicator.receive_from(timeout=10))]
    while messages[-1]["type"] != "snapshot.complete":
        messages.append(json.loads(await communicator.receive_from(timeout=10)))
    await communicator.disconnect()
    return messages


def test_clients_connecting_at_one_data_version_share_one_read_of_the_database(deployment: Any) -> None:
    async def scenario() -> list[list[dict[str, Any]]]:
        first = await snapshot_to_complete()
        return [first, *await asyncio.gather(*(snapshot_to_complete() for _ in range(6)))]

    before = produced()
    snapshots = asyncio.run(scenario())
    assert produced() - before == 1
    assert all(received == snapshots[0] for received in snapshots)
    assert [message["type"] for message in snapshots[0]] == ["bounty.created"] * 3 + ["snapshot.complete"]


def test_a_change_makes_a_new_snapshot_and_the_superseded_spool_goes(deployment: Any) -> None:
    before, open_before = produced(), spools_open()
    first = asyncio.run(snapshot_to_complete())
    assert spools_open() - open_before == 1
    logged_bounty(deployment)
    second = asyncio.run(snapshot_to_complete())
    assert produced() - before == 2
    assert second[-1]["payload"]["bounties"] == 4 and second[-1]["seq"] > first[-1]["seq"]
    assert spools_open() - open_before == 1  # nobody reads the first one: closed at once


def test_a_batch_of_frames_gives_back_the_texts_it_frames() -> None:
    texts = [b"a" * size for size in (0, 1, 125, 126, 65_535, 65_536, 70_000)]
    batch = MessageBatch.of_frames(b"".join(map(text_frame, texts)), len(texts))
    assert len(batch) == len(texts) and batch.texts == texts
