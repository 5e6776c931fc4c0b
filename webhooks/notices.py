"""What staff are told: an endpoint disabled (webhooks.worker). Logged; sent to the moderators'
channels by webhooks.moderation when they are configured."""

from __future__ import annotations

import logging
from urllib.parse import urlsplit

logger = logging.getLogger(__name__)


def endpoint_disabled(pk: int, url: str, reason: str) -> None:
    """Endpoint `pk` was disabled; its URL is named by its host only (the rest may hold a token)."""
    logger.warning("webhook endpoint %d (%s) disabled: %s; re-enable it in the admin once it answers",
                   pk, urlsplit(url).hostname, reason)
