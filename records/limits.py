"""Per-client limits of this process's full reads (docs/operations.md, Limits).

A full read (an unpaged list, a snapshot) costs its client's process a descriptor and a bounded
buffer while the client takes it (records.spools). How many one client address takes at once is
bounded per process: `Claims`. A claim is taken when the request is answered and started when its
body begins; one never started (its request cancelled before the body began) stops counting after
HANDOVER_SECONDS, so nothing depends on a finaliser to give it back.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

from django.conf import settings

HANDOVER_SECONDS = 10.0  # as records.spools keeps a spool for a request that has not begun to read it


class Claim:
    """One full read's place among its client's, until `release()` (idempotent)."""

    def __init__(self, claims: Claims, client: str) -> None:
        self.claims = claims
        self.client = client
        self.taken = time.monotonic()
        self.started = False
        self.held = True

    def start(self) -> None:
        """The body began: the claim counts until released, however long the client takes."""
        self.started = True

    def expired(self, now: float) -> bool:
        return not self.started and now - self.taken > HANDOVER_SECONDS

    def release(self) -> None:
        if self.held:
            self.held = False
            self.claims.drop(self)


class Claims:
    """At most `limit()` claims per client address (an IPv6 client's /64) at once, in this process."""

    def __init__(self, limit: Callable[[], int]) -> None:
        self.limit = limit
        self._lock = threading.Lock()
        self._of: dict[str, set[Claim]] = {}

    def claim(self, client: str) -> Claim | None:
        """A new claim of `client` (its key: bountysite.client_address.client_key); None when it
        holds as many as it may."""
        now = time.monotonic()
        with self._lock:
            held = {claim for claim in self._of.get(client, ()) if not claim.expired(now)}
            if len(held) >= self.limit():
                self._of[client] = held
                return None
            claim = Claim(self, client)
            held.add(claim)
            self._of[client] = held
            return claim

    def drop(self, claim: Claim) -> None:
        with self._lock:
            held = self._of.get(claim.client)
            if held is not None:
                held.discard(claim)
                if not held:
                    del self._of[claim.client]

    def held_by(self, client: str) -> int:
        now = time.monotonic()
        with self._lock:
            return sum(not claim.expired(now) for claim in self._of.get(client, ()))


client_lists = Claims(lambda: settings.BOUNTY_HTTP_MAX_STREAMS_PER_CLIENT)
