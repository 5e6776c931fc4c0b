"""The limits of the websocket `/ws/events` (docs/api.md, Limits and close codes), each closing
with 1008.

Connections are counted per process (BOUNTY_WS_MAX_CONNECTIONS) and per client address
(BOUNTY_WS_MAX_CONNECTIONS_PER_CLIENT, in the cache, so with Redis every process shares the
count); messages from a client are limited in number per window and in size. The client address
is found as the HTTP rate limiter finds it: X-Forwarded-For is believed only from trusted proxies.
"""

from __future__ import annotations

import contextlib
import time
from collections import deque
from typing import Any

from django.conf import settings
from django.core.cache import cache
from django.http import HttpRequest

from records.api.ratelimit import client_address

POLICY_VIOLATION = 1008
INTERNAL_ERROR = 1011
# A process killed without releasing its slots leaves them counted until the key expires, an
# hour after the client's last connection (a count that expires under open connections errs
# on the side of admitting).
_COUNT_TIMEOUT = 3600


def scope_client_address(scope: dict[str, Any]) -> str:
    """The client's address from an ASGI scope, by the rules of the HTTP rate limiter."""
    request = HttpRequest()
    client = scope.get("client") or ("", 0)
    request.META["REMOTE_ADDR"] = str(client[0])
    for name, value in scope.get("headers", []):
        if name == b"x-forwarded-for":
            request.META["HTTP_X_FORWARDED_FOR"] = value.decode("latin1")
    return client_address(request)


class ConnectionSlot:
    """One connection's place under the per-process and per-client caps."""

    in_process = 0

    def __init__(self, address: str) -> None:
        self.key = f"ws:connections:{address}"
        self._process_held = False
        self._client_held = False

    async def acquire(self) -> bool:
        """Takes the slot; False when a cap is reached. `release()` gives back whatever was taken."""
        if ConnectionSlot.in_process >= settings.BOUNTY_WS_MAX_CONNECTIONS:
            return False
        ConnectionSlot.in_process += 1
        self._process_held = True
        if await cache.aadd(self.key, 1, timeout=_COUNT_TIMEOUT):
            count = 1
        else:
            try:
                count = await cache.aincr(self.key)
                await cache.atouch(self.key, timeout=_COUNT_TIMEOUT)
            except ValueError:  # expired between add and incr
                await cache.aadd(self.key, 1, timeout=_COUNT_TIMEOUT)
                count = 1
        self._client_held = True
        return count <= settings.BOUNTY_WS_MAX_CONNECTIONS_PER_CLIENT

    async def release(self) -> None:
        if self._process_held:
            ConnectionSlot.in_process -= 1
            self._process_held = False
        if self._client_held:
            self._client_held = False
            with contextlib.suppress(ValueError):  # expired meanwhile: nothing left to give back
                await cache.adecr(self.key)


class MessageBudget:
    """What a client may send: BOUNTY_WS_MAX_MESSAGES per BOUNTY_WS_MESSAGE_WINDOW_SECONDS (a
    sliding window), each at most BOUNTY_WS_MAX_MESSAGE_BYTES."""

    def __init__(self) -> None:
        self._times: deque[float] = deque()

    def allows(self, size: int) -> bool:
        if size > settings.BOUNTY_WS_MAX_MESSAGE_BYTES:
            return False
        now = time.monotonic()
        window: int = settings.BOUNTY_WS_MESSAGE_WINDOW_SECONDS
        while self._times and self._times[0] <= now - window:
            self._times.popleft()
        self._times.append(now)
        return len(self._times) <= settings.BOUNTY_WS_MAX_MESSAGES
