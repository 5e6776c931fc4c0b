"""HTTP rate limiting: a fixed window per client, counted in the shared cache.

Every route but `/health` and `/metrics` counts, unknown routes included. Each counted response carries
X-RateLimit-Limit, X-RateLimit-Remaining and X-RateLimit-Reset (Unix time when the window
ends); over the limit the answer is 429 with Retry-After. The client is the peer address; the
X-Forwarded-For chain is believed only as far as it runs through configured trusted proxies.
With Redis configured, every worker process counts against the same budget.
"""

from __future__ import annotations

import ipaddress
import math
import time
from collections.abc import Callable

from django.conf import settings
from django.core.cache import caches
from django.http import HttpRequest, HttpResponseBase

from bountysite.cache import RedisCache
from records.api.errors import error_response

EXEMPT_PATHS = frozenset({"/health", "/metrics"})


def _trusted(address: str) -> bool:
    try:
        ip = ipaddress.ip_address(address)
    except ValueError:
        return False
    return any(ip in network for network in settings.BOUNTY_TRUSTED_PROXIES)


def client_address(request: HttpRequest) -> str:
    """The peer, or the nearest X-Forwarded-For hop not added by a trusted proxy."""
    peer = str(request.META.get("REMOTE_ADDR", ""))
    if not _trusted(peer):
        return peer
    hops = [hop.strip() for hop in str(request.META.get("HTTP_X_FORWARDED_FOR", "")).split(",") if hop.strip()]
    for hop in reversed(hops):
        if not _trusted(hop):
            return hop
    return hops[0] if hops else peer


def _count(key: str, timeout: int) -> int:
    """This request's number in its client's window."""
    shared = caches["default"]
    if isinstance(shared, RedisCache):
        return shared.count(key, timeout)
    if shared.add(key, 1, timeout=timeout):  # a process-local cache: no other process counts
        return 1
    try:
        return shared.incr(key)
    except ValueError:  # expired between add and incr
        shared.add(key, 1, timeout=timeout)
        return 1


class RateLimitMiddleware:
    def __init__(self, get_response: Callable[[HttpRequest], HttpResponseBase]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponseBase:
        if request.path in EXEMPT_PATHS or not settings.BOUNTY_RATE_LIMIT:
            return self.get_response(request)
        limit: int = settings.BOUNTY_RATE_LIMIT
        window: int = settings.BOUNTY_RATE_WINDOW_SECONDS
        now = time.time()
        window_start = int(now // window) * window
        reset = window_start + window
        count = _count(f"ratelimit:{client_address(request)}:{window_start}", timeout=window + 1)
        if count > limit:
            response: HttpResponseBase = error_response(f"rate limit of {limit} requests per {window} s exceeded", 429)
            response["Retry-After"] = str(max(1, math.ceil(reset - now)))
        else:
            response = self.get_response(request)
        response["X-RateLimit-Limit"] = str(limit)
        response["X-RateLimit-Remaining"] = str(max(0, limit - count))
        response["X-RateLimit-Reset"] = str(reset)
        return response
