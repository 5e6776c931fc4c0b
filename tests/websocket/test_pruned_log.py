"""The websocket feed when the change log was pruned under it (manage.py prune_changelog): a
client whose messages are gone is closed, never silently given the later ones; the feed goes on
for everyone after."""

from __future__ import annotations

import asyncio

import pytest

from indexer.models import ChangeLogEntry, SyncState
from records.models import Deployment
from records.ws.feed import ChangesGone, LiveFeed
from records.ws.messages import MessageBatch
from records.ws.outbox import Outbox
from tests.factories import make_deployment

pytestmark = pytest.mark.django_db(transaction=True)


def _log(deployment: Deployment, last: int) -> None:
    ChangeLogEntry.objects.bulk_create([
        ChangeLogEntry(deployment=deployment, seq=seq, type="bounty.created", payload={"id": seq}, block_number=seq)
        for seq in range(1, last + 1)
    ])
    SyncState.objects.filter(deployment=deployment).update(last_seq=last)


def _prune_through(deployment: Deployment, seq: int) -> None:
    ChangeLogEntry.objects.filter(deployment=deployment, seq__lte=seq).delete()


async def _nothing(batch: MessageBatch) -> None:
    raise AssertionError("nothing may be sent from a pruned log")


@pytest.mark.parametrize("through", [5, 8], ids=["some gone", "all gone"])
@pytest.mark.parametrize("bound", [10_000, 1], ids=["under the feed's lock", "the long way round"])
def test_a_subscriber_behind_what_is_left_is_refused(through: int, bound: int) -> None:
    deployment = make_deployment()
    _log(deployment, 8)
    _prune_through(deployment, through)
    feed = LiveFeed()
    feed.deployment_id, feed.cursor = deployment.pk, 8
    feed.start = lambda: None  # type: ignore[method-assign]  # no polling and listening tasks: one subscribe
    outbox = Outbox(3, lambda: None)
    outbox.bound = bound  # a gap of the bound or more is read outside the lock

    with pytest.raises(ChangesGone):
        asyncio.run(feed.subscribe(outbox, _nothing))
    assert not feed.subscribers


def test_a_feed_pruned_past_closes_its_clients_and_goes_on_from_the_newest() -> None:
    deployment = make_deployment()
    _log(deployment, 8)
    feed = LiveFeed()
    feed.deployment_id, feed.cursor = deployment.pk, 2
    outbox = Outbox(3, lambda: None)
    feed.subscribers.add(outbox)
    _prune_through(deployment, 5)

    async def advance_then_get() -> MessageBatch:
        await feed._advance()
        return await asyncio.wait_for(outbox.get(), timeout=5)

    with pytest.raises(ChangesGone):
        asyncio.run(advance_then_get())
    assert not feed.subscribers and feed.cursor == 8
