"""`GET /health`'s body, assembled in one place (docs/api.md, GET /health): whether the database
answers, the indexer's state as indexer.health reports it, whether Redis answers this process,
and from those the service's `status`. The view (records.api.views.Health) only sends it.

The body's shape is declared by the TypedDicts here and indexer.health's; the OpenAPI schema's
serializers (records.api.schema, Health*) describe the same members, and tests/api/test_health.py
holds them to these declarations.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any, Literal, TypedDict

from django.conf import settings
from django.db import DatabaseError, connection

from bountysite.cache import redis_answers
from bountysite.redis_reach import REDIS
from indexer.health import IndexerHealth, indexer_health
from records.replicas import REPLICAS, ReplicaHealth
from records.representation import checksum_address, rfc3339
from records.selectors import active_deployment
from webhooks.health import WebhooksHealth, webhooks_health


class HealthDeployment(TypedDict):
    chain_id: int
    contract_address: str | None  # None when not configured
    usdc_address: str | None


class RedisHealth(TypedDict):
    status: Literal["ok", "unreachable", "not_configured"]
    unreachable_since: str | None
    unreachable_seconds: int | None


class ServiceHealth(TypedDict):
    status: Literal["ok", "degraded"]
    version: str
    deployment: HealthDeployment
    indexer: dict[str, Any]  # an IndexerHealth with its times in RFC 3339 (as_json)
    redis: RedisHealth
    replicas: list[ReplicaHealth] | None  # None without DATABASE_REPLICA_URLS
    webhooks: dict[str, Any]  # a WebhooksHealth with its times in RFC 3339 (as_json)


class DatabaseUnreachable(TypedDict):
    """The body when the database does not answer (a 503): nothing else can be read."""

    status: Literal["error"]
    version: str
    detail: str


def service_health() -> ServiceHealth | DatabaseUnreachable:
    """The service's health now. `status` is degraded when an indexer is configured but not
    running, not synced, not answered by its node or no longer asking it, when Redis is
    configured but does not answer, when a read replica is set aside (records.replicas), or when
    webhook endpoints are enabled but no delivery worker was seen within the heartbeat; a
    database that does not answer is `DatabaseUnreachable`."""
    version: str = settings.SERVICE_VERSION
    try:
        with connection.cursor() as cursor:
            cursor.execute("SELECT 1")
        indexer = indexer_health(active_deployment())
        webhooks = webhooks_health()
    except DatabaseError as exc:
        return DatabaseUnreachable(status="error", version=version,
                                   detail=f"database unreachable: {type(exc).__name__}")
    redis = redis_health()
    replicas = REPLICAS.health() if REPLICAS.replicas else None
    degraded = not webhooks["running"] or redis["status"] == "unreachable" or any(
        replica["status"] != "in_use" for replica in replicas or ()) or (
        indexer["enabled"] and not (
        indexer["running"] and indexer["synced"] and indexer["node_unreachable_since"] is None
        and not indexer["node_ask_overdue"]))
    return ServiceHealth(status="degraded" if degraded else "ok", version=version, deployment=deployment_health(),
                         indexer=as_json(indexer), redis=redis, replicas=replicas, webhooks=as_json(webhooks))


def deployment_health() -> HealthDeployment:
    """The configured deployment (BOUNTY_CHAIN_ID, BOUNTY_CONTRACT_ADDRESS, BOUNTY_USDC_ADDRESS)."""
    contract, usdc = settings.BOUNTY_CONTRACT_ADDRESS, settings.BOUNTY_USDC_ADDRESS
    return HealthDeployment(chain_id=settings.BOUNTY_CHAIN_ID,
                            contract_address=checksum_address(contract) if contract else None,
                            usdc_address=checksum_address(usdc) if usdc else None)


def redis_health() -> RedisHealth:
    """Whether Redis answers this process now, and since when it has not."""
    answers = redis_answers()
    if answers is None:
        return RedisHealth(status="not_configured", unreachable_since=None, unreachable_seconds=None)
    since = REDIS.unreachable_since
    if answers or since is None:  # a PING that Redis refused is not an outage
        return RedisHealth(status="ok", unreachable_since=None, unreachable_seconds=None)
    return RedisHealth(status="unreachable", unreachable_since=rfc3339(since),
                       unreachable_seconds=int(REDIS.unreachable_seconds()))


def as_json(health: IndexerHealth | WebhooksHealth) -> dict[str, Any]:
    """The indexer's or the webhooks' health with every time in it, however deep, in RFC 3339."""
    return _times_in_rfc3339(health)  # type: ignore[no-any-return]


def _times_in_rfc3339(value: Any) -> Any:
    if isinstance(value, datetime):
        return rfc3339(value)
    if isinstance(value, dict):
        return {name: _times_in_rfc3339(member) for name, member in value.items()}
    if isinstance(value, list):
        return [_times_in_rfc3339(item) for item in value]
    return value
