"""What staff are told: an endpoint disabled (webhooks.worker). Logged, and, when
BOUNTY_MODERATOR_NOTIFY_URLS names channels, queued here for webhooks.moderation, which writes the
queue down and sends it to those channels in its next window, beside the disputes.

The queue is in memory because the worker disables an endpoint on its event loop, where the
database is not reached; it is bounded, and a notice queued by a worker that stops before the
next window is only in the log."""

from __future__ import annotations

import logging
from collections import deque
from dataclasses import dataclass
from datetime import datetime
from urllib.parse import urlsplit

from django.conf import settings
from django.utils import timezone

logger = logging.getLogger(__name__)

QUEUE_LIMIT = 1_000  # notices held between two windows; the oldest give way


@dataclass(frozen=True)
class EndpointDisabled:
    endpoint_id: int
    text: str  # names the endpoint by its host only
    at: datetime


_queued: deque[EndpointDisabled] = deque(maxlen=QUEUE_LIMIT)


def endpoint_disabled(pk: int, url: str, reason: str) -> None:
    """Endpoint `pk` was disabled; its URL is named by its host only (the rest may hold a token)."""
    host = urlsplit(url).hostname
    logger.warning("webhook endpoint %d (%s) disabled: %s; re-enable it in the admin once it answers",
                   pk, host, reason)
    if settings.BOUNTY_MODERATOR_NOTIFY_URLS:
        _queued.append(EndpointDisabled(pk, f"webhook endpoint {pk} ({host}) was disabled: {reason}",
                                        timezone.now()))


def take() -> list[EndpointDisabled]:
    """The notices queued since the last take, oldest first (webhooks.moderation, each window)."""
    taken = []
    while _queued:
        taken.append(_queued.popleft())
    return taken


def give_back(taken: list[EndpointDisabled]) -> None:
    """Notices taken but not written down (the database failed): taken again next window."""
    _queued.extendleft(reversed(taken))
