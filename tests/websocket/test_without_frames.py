"""The websocket under an ASGI server without daphne's frame extension (bountysite/daphne_ws.py,
Prebuilt frames), here Channels' in-process communicator: each message goes out as its own text message,
the snapshot's and the live ones alike, none framed and none parsed back."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest
from channels.db import database_sync_to_async
from channels.routing import URLRouter
from channels.testing import WebsocketCommunicator

from records.routing import websocket_urlpatterns
from records.ws import feed
from tests.factories import make_deployment
from tests.websocket.conftest import commit_change, head, logged_bounty

pytestmark = pytest.mark.django_db(transaction=True)


async def _receive(communicator: WebsocketCommunicator) -> dict[str, Any]:
    message: dict[str, Any] = json.loads(await communicator.receive_from(timeout=10))
    return message


def test_every_message_is_its_own_text(monkeypatch: pytest.MonkeyPatch, settings: Any) -> None:
    monkeypatch.setattr(feed, "_feed", None)  # this event loop's own feed, not another test's
    deployment = make_deployment()
    settings.BOUNTY_CHAIN_ID, settings.BOUNTY_CONTRACT_ADDRESS = deployment.chain_id, deployment.contract_address
    bounties = [logged_bounty(deployment)[0] for _ in range(3)]

    positions: list[str] = []

    async def scenario() -> list[dict[str, Any]]:
        communicator = WebsocketCommunicator(URLRouter(websocket_urlpatterns), "/ws/events")
        connected, _ = await communicator.connect()
        assert connected
        messages = [await _receive(communicator) for _ in range(4)]
        await database_sync_to_async(commit_change)(deployment, "bounty.updated", {"id": bounties[0].bounty_id})
        messages.append(await _receive(communicator))
        positions.append(await database_sync_to_async(head)(deployment))
        await communicator.disconnect()
        return messages

    messages = asyncio.run(scenario())
    assert [(m["type"], m.get("snapshot")) for m in messages] == [
        *[("bounty.created", True)] * 3, ("snapshot.complete", None), ("bounty.updated", None)]
    assert [m["payload"]["id"] for m in messages[:3]] == [b.bounty_id for b in bounties]
    assert messages[4] == {"type": "bounty.updated", "payload": {"id": bounties[0].bounty_id},
                           "seq": messages[3]["seq"] + 1, "position": positions[0]}
