"""The websocket feed when the change log was pruned under it (manage.py prune_changelog): a
client whose messages are gone is closed, never silently given the later ones; the feed goes on
for everyone after."""

from __future__ import annotations

import asyncio

import pytest

from indexer.models import ChangeLogEntry
from records.changes import MessageType
from records.history import Position
from records.models import Deployment
from records.selectors import changes_between, head_position
from records.ws.feed import ChangesGone, LiveFeed
from records.ws.messages import MessageBatch
from records.ws.outbox import Outbox
from tests.factories import make_deployment
from tests.history import append_changes

pytestmark = pytest.mark.django_db(transaction=True)


def _log(deployment: Deployment, last: int) -> dict[int, Position]:
    """Entries of seqs 1..last as the indexer writes them; the position after each, by seq."""
    append_changes(deployment, [(MessageType.BOUNTY_CREATED, {"id": seq}, seq) for seq in range(1, last + 1)])
    return {change.seq: change.position for change in changes_between(deployment.pk, 1, last, last)}


def _prune_through(deployment: Deployment, seq: int) -> None:
    ChangeLogEntry.objects.filter(deployment=deployment, seq__lte=seq).delete()


async def _nothing(batch: MessageBatch) -> None:
    raise AssertionError("nothing may be sent from a pruned log")


@pytest.mark.parametrize("through", [5, 8], ids=["some gone", "all gone"])
@pytest.mark.parametrize("bound", [10_000, 1], ids=["under the feed's lock", "the long way round"])
def test_a_subscriber_behind_what_is_left_is_refused(through: int, bound: int) -> None:
    deployment = make_deployment()
    positions = _log(deployment, 8)
    _prune_through(deployment, through)
    feed = LiveFeed()
    feed.deployment_id, feed.cursor = deployment.pk, positions[8]
    feed.start = lambda: None  # type: ignore[method-assign]  # no polling and listening tasks: one subscribe
    outbox = Outbox(3, lambda: None)
    outbox.bound = bound  # a gap of the bound or more is read outside the lock

    with pytest.raises(ChangesGone):
        asyncio.run(feed.subscribe(outbox, _nothing))
    assert not feed.subscribers


def test_a_feed_pruned_past_closes_its_clients_and_goes_on_from_the_newest() -> None:
    deployment = make_deployment()
    positions = _log(deployment, 8)
    feed = LiveFeed()
    feed.deployment_id, feed.cursor = deployment.pk, positions[2]
    outbox = Outbox(3, lambda: None)
    feed.subscribers.add(outbox)
    _prune_through(deployment, 5)

    async def advance_then_get() -> MessageBatch:
        await feed._advance()
        return await asyncio.wait_for(outbox.get(), timeout=5)

    with pytest.raises(ChangesGone):
        asyncio.run(advance_then_get())
    assert not feed.subscribers and feed.cursor == positions[8] == head_position(deployment.pk)
