"""When a failed delivery is tried again: exponential backoff with jitter, from FIRST_DELAY
doubling to at most MAX_DELAY, so that an endpoint failing for a day has been tried 30 to 45
times (and is then disabled: BOUNTY_WEBHOOKS_DISABLE_AFTER_HOURS). A receiver's Retry-After
wins when it asks for longer, up to BOUNTY_WEBHOOKS_MAX_RETRY_AFTER_SECONDS."""

from __future__ import annotations

import random

from django.conf import settings

FIRST_DELAY = 5.0  # seconds
MAX_DELAY = 3_600.0


def delay(failures: int, retry_after: float | None = None) -> float:
    """Seconds before the next attempt after `failures` failed attempts in a row: full jitter over
    the upper half of the step, so that endpoints failing together do not retry together."""
    step = min(MAX_DELAY, FIRST_DELAY * 2 ** min(failures - 1, 30))
    wait = step * random.uniform(0.5, 1.0)
    if retry_after is not None:
        wait = max(wait, min(retry_after, float(settings.BOUNTY_WEBHOOKS_MAX_RETRY_AFTER_SECONDS)))
    return float(wait)
