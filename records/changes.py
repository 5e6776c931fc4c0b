"""What changed in the records: the change kinds, and the announcement that changes were committed.

The indexer appends one change-log entry per record change (`indexer.models.ChangeLogEntry`,
whose `type` is a `MessageType`), in the transaction that changes the record, and calls
`notify_changes` after the commit. The websocket feed of every server process (records.ws.feed)
reads the entries and sends them as messages whose `type` is the entry's: this module is the one
definition of those types, and it imports no websocket code, so the indexer depends on it
without depending on the websocket.
"""

from __future__ import annotations

import asyncio
import logging

from asgiref.sync import async_to_sync
from channels.layers import BaseChannelLayer, InMemoryChannelLayer, get_channel_layer
from django.conf import settings
from django.db import models

from bountysite.redis_reach import FAILURES, REDIS

logger = logging.getLogger(__name__)

CHANGES_GROUP = "records.changes"  # the channel-layer group the server processes' feeds listen on
NOTIFY_ROUND_TRIPS = 4  # a group send's calls to Redis: its deadline is this many REDIS_TIMEOUT_MS


class MessageType(models.TextChoices):
    """A change-log entry's kind, and the websocket message's `type` (docs/api.md, Messages)."""

    BOUNTY_CREATED = "bounty.created"
    SUBMISSION_CREATED = "submission.created"
    DISPUTE_CREATED = "dispute.created"
    DISPUTE_RESOLVED = "dispute.resolved"
    DISPUTE_CANCELLED = "dispute.cancelled"
    BOUNTY_FINALIZED = "bounty.finalized"
    BOUNTY_REFUNDED = "bounty.refunded"
    SUBMISSION_REFUNDED = "submission.refunded"
    # Beyond the spec's eight, so that a live consumer holding every record stays right:
    # `<kind>.updated` carries a record changed as a side effect (a dispute makes its submission
    # `disputed`, a resolution or finalize changes the submission) or restored by a
    # reorganisation; `<kind>.removed` a record whose creating block was orphaned.
    BOUNTY_UPDATED = "bounty.updated"
    SUBMISSION_UPDATED = "submission.updated"
    DISPUTE_UPDATED = "dispute.updated"
    BOUNTY_REMOVED = "bounty.removed"
    SUBMISSION_REMOVED = "submission.removed"
    DISPUTE_REMOVED = "dispute.removed"
    # A bulk backfill changed records without an entry per change (blocks `from_block` to
    # `to_block` of the payload): a client gets a new snapshot after it instead.
    RESYNC = "resync"


def notify_changes(deployment_id: int, seq: int) -> None:
    """Wakes the websocket feeds of every server process; the indexer calls it after each commit,
    with the newest change's seq (a feed reading a replica waits for the replica to hold it:
    records.replicas).

    Only an optimisation: the feeds poll anyway. The in-memory layer of the embedded default
    reaches no other process, so nothing is sent there. Without Redis (bountysite/redis_reach.py)
    nothing is sent, and a send that fails or hangs is given up: indexing never waits on it."""
    layer = get_channel_layer()
    if layer is None or isinstance(layer, InMemoryChannelLayer) or not REDIS.worth_asking():
        return
    try:
        async_to_sync(_send_within)(layer, {"type": "changes.committed", "deployment": deployment_id, "seq": seq},
                                    settings.REDIS_TIMEOUT_SECONDS * NOTIFY_ROUND_TRIPS)
    except FAILURES as error:  # the feeds see the change at their next poll
        REDIS.record(error)
    except Exception:  # never the reason a commit fails
        logger.warning("could not notify the websocket feeds; they will see the change at their next poll",
                       exc_info=True)
    else:
        REDIS.answered()


async def _send_within(layer: BaseChannelLayer, message: dict[str, object], seconds: float) -> None:
    async with asyncio.timeout(seconds):  # a hanging Redis must not hold the indexer's commits
        await layer.group_send(CHANGES_GROUP, message)
