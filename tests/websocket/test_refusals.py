"""A client's stream that ends in a refusal (a snapshot that found no free slot: 1013) or fails
(1011) closes the connection with its code, and the application then ends without raising: daphne
logs an application that raises as `Exception inside application`, an error with its traceback,
for what is the documented answer to load (a loaded process refuses thousands of snapshots)."""

from __future__ import annotations

import asyncio
import logging
from typing import Any

import pytest
from channels.routing import URLRouter
from channels.testing import WebsocketCommunicator

from records import limits
from records.routing import websocket_urlpatterns
from records.ws import consumer, feed

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture(autouse=True)
def _own_feed(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(feed, "_feed", None)  # this event loop's own feed, not another test's


async def closed_then_ended() -> dict[str, Any]:
    """Opens a connection and returns how the server closed it, once the client's disconnect has
    ended the application (the communicator raises what the application raised)."""
    communicator = WebsocketCommunicator(URLRouter(websocket_urlpatterns), "/ws/events")
    connected, _ = await communicator.connect()
    assert connected
    closed: dict[str, Any] = await communicator.receive_output(timeout=10)
    await communicator.disconnect()
    return closed


def test_a_snapshot_that_finds_no_slot_is_closed_with_1013_and_the_application_ends_cleanly(settings: Any) -> None:
    settings.BOUNTY_WS_SNAPSHOT_READERS_PER_CLIENT = 1
    settings.BOUNTY_WS_SNAPSHOT_WAIT_SECONDS = 1

    async def scenario() -> dict[str, Any]:
        async with limits.SnapshotSlot(limits.scope_client({})):  # the communicator's client's one slot, taken
            return await closed_then_ended()

    assert asyncio.run(scenario()) == {"type": "websocket.close", "code": 1013,
                                       "reason": "no snapshot slot free within 1 s; try again later"}


def test_a_failed_stream_is_closed_with_1011_and_logged_once(
        monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture) -> None:
    async def failing_stream(*args: object, **kwargs: object) -> None:
        raise RuntimeError("the database went away")

    monkeypatch.setattr(consumer, "run_stream", failing_stream)
    with caplog.at_level(logging.ERROR):
        assert asyncio.run(closed_then_ended()) == {"type": "websocket.close", "code": 1011}
    assert [(record.name, record.message) for record in caplog.records if record.levelno >= logging.ERROR] == [
        ("records.ws.consumer", "websocket stream failed")]
