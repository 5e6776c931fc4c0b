"""One delivery: a signed POST to an endpoint and what became of it (docs/api.md, Webhooks).

Bounded in every way a receiver could use against the worker: the whole request's time
(BOUNTY_WEBHOOKS_TIMEOUT_SECONDS), the answer read (BOUNTY_WEBHOOKS_MAX_RESPONSE_BYTES), one
connection at a time per endpoint (the worker sends an endpoint one change at a time), no
redirect followed, and only addresses webhooks.addresses allows. Nothing here logs a URL (it may
hold a token) or a secret.
"""

from __future__ import annotations

import email.utils
import time
from dataclasses import dataclass
from datetime import UTC, datetime
from urllib.parse import urlsplit

import aiohttp
from django.conf import settings

from indexer.rpc import proxy_for
from webhooks.addresses import Refused, guarded_socket
from webhooks.models import RESPONSE_HEAD_CHARS
from webhooks.signing import signature_header

USER_AGENT = "bounty-read-service-webhooks/1"


@dataclass(frozen=True)
class Request:
    url: str
    webhook_id: str
    body: bytes
    secrets: list[str]


@dataclass(frozen=True)
class Outcome:
    status: int | None  # None: no answer
    latency: float  # seconds
    outcome: str  # "delivered", or why not
    response_head: str = ""
    retry_after: float | None = None  # seconds the receiver asked for (429, 503)

    @property
    def delivered(self) -> bool:
        return self.status is not None and 200 <= self.status < 300

    @property
    def gone(self) -> bool:
        """410 Gone: the receiver asks never to be called again."""
        return self.status == 410


class Sender:
    """The worker's HTTP client: one connection pool for direct connections (each checked by
    webhooks.addresses), one for connections through the environment's proxy."""

    def __init__(self) -> None:
        per_host = 0  # endpoints of one host each hold one connection at most
        self._direct = aiohttp.ClientSession(
            connector=aiohttp.TCPConnector(limit=0, limit_per_host=per_host, socket_factory=guarded_socket,
                                           ttl_dns_cache=None, use_dns_cache=False),
            trust_env=False, auto_decompress=False)
        self._proxied = aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=0), trust_env=False,
                                              auto_decompress=False)

    async def close(self) -> None:
        await self._direct.close()
        await self._proxied.close()

    async def send(self, request: Request) -> Outcome:
        timestamp = int(time.time())
        headers = {
            "content-type": "application/json",
            "user-agent": USER_AGENT,
            "webhook-id": request.webhook_id,
            "webhook-timestamp": str(timestamp),
            "webhook-signature": signature_header(request.secrets, request.webhook_id, timestamp, request.body),
        }
        proxy = proxy_for(request.url, settings.OUTBOUND_PROXIES)
        session = self._proxied if proxy else self._direct
        started = time.monotonic()
        try:
            async with session.post(request.url, data=request.body, headers=headers, proxy=proxy,
                                    allow_redirects=False,
                                    timeout=aiohttp.ClientTimeout(total=settings.BOUNTY_WEBHOOKS_TIMEOUT_SECONDS),
                                    ) as answer:
                head = await answer.content.read(settings.BOUNTY_WEBHOOKS_MAX_RESPONSE_BYTES)
                status = answer.status
                retry_after = _retry_after(answer.headers.get("retry-after"))
                location = answer.headers.get("location") if 300 <= status < 400 else None
        except Refused as error:
            return Outcome(None, time.monotonic() - started, f"refused: {error}")
        except TimeoutError:
            return Outcome(None, time.monotonic() - started,
                           f"no answer within {settings.BOUNTY_WEBHOOKS_TIMEOUT_SECONDS} s "
                           "(BOUNTY_WEBHOOKS_TIMEOUT_SECONDS)")
        except aiohttp.ClientConnectorError as error:
            cause = error.os_error
            if isinstance(cause, Refused):
                return Outcome(None, time.monotonic() - started, f"refused: {cause}")
            return Outcome(None, time.monotonic() - started, f"could not connect: {cause.strerror or cause}")
        except (aiohttp.ClientError, OSError) as error:
            return Outcome(None, time.monotonic() - started, f"failed: {type(error).__name__}: {error}"[:300])
        latency = time.monotonic() - started
        text = head.decode("utf-8", "replace")[:RESPONSE_HEAD_CHARS]
        if 200 <= status < 300:
            return Outcome(status, latency, "delivered", text)
        if location is not None:
            where = urlsplit(location)
            return Outcome(status, latency, f"redirect to {where.hostname or 'a relative URL'} not followed: "
                                            "change the endpoint's URL", text)
        return Outcome(status, latency, f"answered {status}", text, retry_after)


def _retry_after(value: str | None) -> float | None:
    """Retry-After's seconds (a number of seconds or an HTTP date), None when absent or unreadable."""
    if not value:
        return None
    value = value.strip()
    if value.isdigit():
        return float(value)
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    return max(0.0, (when - datetime.now(UTC)).total_seconds())
