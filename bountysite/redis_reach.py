"""Whether this process reaches Redis, learnt from the calls it makes, and what it does meanwhile.

Redis speeds the service up (the response cache, the shared rate-limit counters, the shared
websocket connection count, the channel layer that wakes the websocket feeds); it is never the
reason a read fails. Every call to it has a short timeout (REDIS_TIMEOUT_MS), and once a call
fails to reach it the process stops asking for RETRY_SECONDS, so that a request never waits on a
Redis that is gone or hanging: meanwhile each user of Redis does without it (bountysite/cache.py,
records/changes.py, records/ws/feed.py). After that pause one caller asks again while the others
still do without, and the first call that reaches Redis ends the outage.

An outage is logged twice, when it begins and when it ends, never once per request; /health says
`degraded` and names Redis while it lasts, and `bounty_redis_unreachable_seconds` counts it.
A call that reached Redis and was refused (a full memory: `OOM command not allowed`) is not an
outage: that call alone is done without, and the refusal is logged at most once a minute.
"""

from __future__ import annotations

import logging
import threading
import time
from datetime import UTC, datetime

import redis.exceptions

logger = logging.getLogger(__name__)

RETRY_SECONDS = 2.0  # how long a process does without Redis after a call failed to reach it
REFUSAL_LOG_SECONDS = 60.0  # at most one log line this often for the commands Redis refuses

# What each user of Redis does without it, said once when an outage begins.
WITHOUT_REDIS = ("reads skip the response cache, rate limits and websocket connection caps are counted per "
                 "process, and websocket feeds read the change log on their own poll")

# A call that did not reach Redis (OSError covers the timeouts of asyncio).
UNREACHABLE = (redis.exceptions.ConnectionError, redis.exceptions.TimeoutError, OSError)
FAILURES = (redis.exceptions.RedisError, OSError)  # every way a call to Redis fails


class RedisReach:
    """This process's view of Redis: reachable, or unreachable since a time."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._down_since: float | None = None  # Unix time of the first failed call of the outage
        self._down_monotonic = 0.0
        self._next_try = 0.0  # monotonic time from which a caller asks Redis again
        self._refusal_logged = -REFUSAL_LOG_SECONDS

    @property
    def unreachable_since(self) -> datetime | None:
        down = self._down_since
        return None if down is None else datetime.fromtimestamp(down, UTC)

    def unreachable_seconds(self) -> float:
        return 0.0 if self._down_since is None else time.monotonic() - self._down_monotonic

    def worth_asking(self) -> bool:
        """Whether to make a call now: always while Redis answers; during an outage, for one caller
        every RETRY_SECONDS (the others do without it meanwhile)."""
        if self._down_since is None:
            return True
        with self._lock:
            now = time.monotonic()
            if self._down_since is None or now >= self._next_try:
                self._next_try = now + RETRY_SECONDS
                return True
            return False

    def answered(self) -> None:
        """A call reached Redis: ends an outage."""
        if self._down_since is None:
            return
        with self._lock:
            if self._down_since is None:
                return
            seconds = time.monotonic() - self._down_monotonic
            self._down_since = None
        logger.warning("Redis answers again after %.1f s of outage; the service uses it again", seconds)

    def failed(self, error: BaseException) -> None:
        """A call did not reach Redis (refused, reset, timed out): begins an outage, or goes on with it."""
        with self._lock:
            self._next_try = time.monotonic() + RETRY_SECONDS
            if self._down_since is not None:
                return
            self._down_since = time.time()
            self._down_monotonic = time.monotonic()
        logger.warning("Redis cannot be reached (%s: %s); until it answers, %s", type(error).__name__, error,
                       WITHOUT_REDIS)

    def refused(self, error: BaseException) -> None:
        """Redis answered a call with an error: the call is done without; logged at most once a minute."""
        now = time.monotonic()
        with self._lock:
            if now - self._refusal_logged < REFUSAL_LOG_SECONDS:
                return
            self._refusal_logged = now
        logger.warning("Redis refused a command (%s: %s); done without it (this is said at most once a minute)",
                       type(error).__name__, error)

    def record(self, error: BaseException) -> None:
        """A failed call: an outage (`failed`) or a refusal (`refused`)."""
        if isinstance(error, UNREACHABLE):
            self.failed(error)
        else:
            self.refused(error)


REDIS = RedisReach()  # the process's one view: the cache and the channel layer talk to the same server
