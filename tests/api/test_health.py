"""GET /health: service status, version, the configured deployment and the indexer's flags."""

from __future__ import annotations

import json
import tomllib
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, Literal, get_args, get_origin, get_type_hints

import pytest
from django.conf import settings as django_settings
from django.db import OperationalError
from django.test import Client
from django.utils import timezone

import records.health
from bountysite.redis_reach import REDIS
from contracts.devchain import free_port
from indexer.health import BackfillProgress, IndexerHealth, IndexerProcessHealth
from indexer.models import SyncState
from records.api import schema
from records.health import DatabaseUnreachable, HealthDeployment, RedisHealth, ServiceHealth
from records.models import Deployment
from tests.api import helpers as h
from tests.factories import ACTIVE_CONTRACT, ACTIVE_USDC, make_bounty
from webhooks.health import WebhooksHealth, WebhookWorkerHealth

PATH = "/health"
INDEXER_FLAGS = {"enabled", "running", "synced", "last_indexed_block", "head_block", "lag_blocks", "confirmations",
                 "confirmations_tag", "rate_limited", "last_heartbeat"}
PROJECT_VERSION = tomllib.loads((Path(django_settings.BASE_DIR) / "pyproject.toml").read_text())["project"]["version"]


def health(api: Client, status: int = 200) -> dict[str, Any]:
    response = api.get(PATH)
    assert response.status_code == status
    assert response["Content-Type"].startswith("application/json")
    assert response["Cache-Control"] == "no-store"
    body: dict[str, Any] = json.loads(response.content)
    return body


def indexer_at(deployment: Deployment, *, last: int | None, head: int | None, heartbeat: datetime | None) -> None:
    SyncState.objects.filter(deployment=deployment).update(last_indexed_block=last, head_block=head,
                                                           last_heartbeat=heartbeat)


def test_without_an_indexer_it_is_ok_and_reports_the_deployment(api: Client, active: Deployment) -> None:
    body = health(api)
    assert {"status", "version", "deployment", "indexer"} <= set(body)
    assert (body["status"], body["version"]) == ("ok", PROJECT_VERSION)
    assert body["deployment"] == {"chain_id": 91342, "contract_address": h.checksummed(ACTIVE_CONTRACT),
                                  "usdc_address": h.checksummed(ACTIVE_USDC)}
    assert body["deployment"]["contract_address"] == "0xe7f1725E7734CE288F8367e1Bb143E90bb3F0512"
    assert set(body["indexer"]) >= INDEXER_FLAGS
    assert {name: body["indexer"][name] for name in INDEXER_FLAGS} == {
        "enabled": False, "running": False, "synced": False, "last_indexed_block": None, "head_block": None,
        "lag_blocks": None, "confirmations": django_settings.BOUNTY_CONFIRMATIONS, "confirmations_tag": None,
        "rate_limited": False, "last_heartbeat": None}


def test_a_running_synced_indexer_is_ok(api: Client, settings: Any, active: Deployment) -> None:
    settings.BOUNTY_RPC_URL = "http://127.0.0.1:8545"
    settings.BOUNTY_CONFIRMATIONS = 2
    beat = timezone.now().replace(microsecond=0) - timedelta(seconds=5)
    indexer_at(active, last=98, head=100, heartbeat=beat)
    body = health(api)
    assert body["status"] == "ok"
    assert {name: body["indexer"][name] for name in INDEXER_FLAGS} == {
        "enabled": True, "running": True, "synced": True, "last_indexed_block": 98, "head_block": 100,
        "lag_blocks": 0, "confirmations": 2, "confirmations_tag": None, "rate_limited": False,
        "last_heartbeat": h.rfc3339(beat)}
    assert h.RFC3339_Z.fullmatch(body["indexer"]["last_heartbeat"])


@pytest.mark.parametrize(("last", "head", "age", "running", "synced"), [
    (None, None, None, False, False),
    (100, 100, 3_600, False, False),
    (50, 100, 5, True, False),
    (None, 100, 5, True, False),
], ids=["never ran", "stale heartbeat", "lagging", "nothing indexed yet"])
def test_an_enabled_indexer_that_is_not_running_and_synced_is_degraded(
        api: Client, settings: Any, active: Deployment, last: int | None, head: int | None, age: int | None,
        running: bool, synced: bool) -> None:
    settings.BOUNTY_RPC_URL = "http://127.0.0.1:8545"
    settings.BOUNTY_CONFIRMATIONS = 0
    settings.BOUNTY_HEALTH_MAX_LAG_BLOCKS = 10
    indexer_at(active, last=last, head=head,
               heartbeat=None if age is None else timezone.now() - timedelta(seconds=age))
    body = health(api)
    assert body["status"] == "degraded"
    assert (body["indexer"]["enabled"], body["indexer"]["running"], body["indexer"]["synced"]) == (
        True, running, synced)


def test_a_running_synced_indexer_whose_node_does_not_answer_is_degraded_saying_since_when(
        api: Client, settings: Any, active: Deployment) -> None:
    settings.BOUNTY_RPC_URL = "http://127.0.0.1:8545"
    settings.BOUNTY_CONFIRMATIONS = 0
    since = timezone.now().replace(microsecond=0) - timedelta(seconds=42)
    indexer_at(active, last=100, head=100, heartbeat=timezone.now())
    SyncState.objects.filter(deployment=active).update(node_unreachable_since=since)
    body = health(api)
    assert body["status"] == "degraded"
    assert (body["indexer"]["running"], body["indexer"]["synced"]) == (True, True)
    assert body["indexer"]["node_unreachable_since"] == h.rfc3339(since)
    assert 42 <= body["indexer"]["node_unreachable_seconds"] <= 44


@pytest.mark.parametrize(("asked_ago", "status"), [(5, "ok"), (120, "degraded")])
def test_a_running_synced_indexer_that_has_not_asked_the_node_past_its_ceiling_is_degraded(
        api: Client, settings: Any, active: Deployment, asked_ago: int, status: str) -> None:
    settings.BOUNTY_RPC_URL = "http://127.0.0.1:8545"
    settings.BOUNTY_CONFIRMATIONS = 0
    settings.BOUNTY_INDEXER_MAX_WAIT_SECONDS, settings.BOUNTY_RPC_TIMEOUT_SECONDS = 15.0, 20
    asked = timezone.now().replace(microsecond=0) - timedelta(seconds=asked_ago)
    indexer_at(active, last=100, head=100, heartbeat=timezone.now())
    SyncState.objects.filter(deployment=active).update(node_asked_at=asked)
    body = health(api)
    assert body["status"] == status
    assert (body["indexer"]["running"], body["indexer"]["synced"]) == (True, True)
    assert body["indexer"]["node_last_asked_at"] == h.rfc3339(asked)
    assert asked_ago <= body["indexer"]["node_last_asked_seconds"] <= asked_ago + 2
    assert body["indexer"]["node_ask_overdue"] is (status == "degraded")


def test_it_answers_before_the_active_deployment_is_indexed(api: Client, other_chain: Deployment) -> None:
    body = health(api)
    assert body["status"] == "ok" and body["indexer"]["last_indexed_block"] is None
    assert body["deployment"]["chain_id"] == 91342


def test_it_is_never_cached_nor_conditional(api: Client, active: Deployment) -> None:
    for tag in ("*", 'W/"anything"'):
        response = api.get(PATH, headers={"If-None-Match": tag})
        assert response.status_code == 200 and response.content
        assert "ETag" not in response
        assert response["Cache-Control"] == "no-store"


def test_it_carries_no_rate_limit_headers(api: Client, active: Deployment) -> None:
    response = api.get(PATH)
    assert not any(name.lower().startswith("x-ratelimit") for name in response.headers)


def test_head_answers_the_headers_without_a_body(api: Client, active: Deployment) -> None:
    response = api.head(PATH)
    assert (response.status_code, response.content, response["Cache-Control"]) == (200, b"", "no-store")


def test_an_unreachable_database_is_a_503_with_status_error(api: Client, monkeypatch: pytest.MonkeyPatch,
                                                            active: Deployment) -> None:
    """The database is made unreachable by swapping records.health's connection for one whose
    cursor() raises OperationalError, as a refused or dropped connection does."""
    class Unreachable:
        def cursor(self) -> Any:
            raise OperationalError("connection refused")

    monkeypatch.setattr(records.health, "connection", Unreachable())
    body = health(api, status=503)
    assert body["status"] == "error"


def test_the_last_heartbeat_is_reported_in_utc(api: Client, settings: Any, active: Deployment) -> None:
    settings.BOUNTY_RPC_URL = "http://127.0.0.1:8545"
    indexer_at(active, last=1, head=1, heartbeat=datetime(2026, 1, 1, 12, tzinfo=UTC))
    assert health(api)["indexer"]["last_heartbeat"] == "2026-01-01T12:00:00Z"


@pytest.fixture
def unreachable_redis(settings: Any) -> Iterator[None]:
    """Redis configured at a loopback port nothing listens on; this process's view of Redis is
    given back afterwards (the next test's first call would otherwise be skipped for a moment)."""
    settings.CACHES = {"default": {"BACKEND": "bountysite.cache.RedisCache",
                                   "LOCATION": f"redis://127.0.0.1:{free_port()}/0",
                                   "OPTIONS": {"socket_connect_timeout": 0.25, "socket_timeout": 0.25}}}
    yield
    REDIS.answered()


@pytest.mark.parametrize("configured", [False, True], ids=["without-redis", "with-redis"])
def test_redis_is_reported_as_it_answers(api: Client, settings: Any, active: Deployment, configured: bool) -> None:
    settings.CACHES = ({"default": {"BACKEND": "bountysite.cache.RedisCache", "LOCATION": django_settings.REDIS_URL}}
                       if configured and django_settings.REDIS_URL else
                       {"default": {"BACKEND": "django.core.cache.backends.locmem.LocMemCache"}})
    body = health(api)
    expected = "ok" if configured and django_settings.REDIS_URL else "not_configured"
    assert body["redis"] == {"status": expected, "unreachable_since": None, "unreachable_seconds": None}
    assert body["status"] == "ok"


@pytest.mark.usefixtures("unreachable_redis")
def test_an_unreachable_redis_is_degraded_naming_it_and_reads_still_answer(api: Client, active: Deployment) -> None:
    make_bounty(active, bounty_id=1)
    assert api.get("/bounties").status_code == 200  # from the database, the cache skipped
    body = health(api)
    assert body["status"] == "degraded"
    assert body["redis"]["status"] == "unreachable"
    assert body["redis"]["unreachable_since"] is not None and body["redis"]["unreachable_seconds"] == 0


def _literal_values(hint: Any) -> list[Any] | None:
    """The values of a Literal, or of the Literal of an optional one; None for any other type."""
    if get_origin(hint) is Literal:
        return list(get_args(hint))
    literals = [arg for arg in get_args(hint) if get_origin(arg) is Literal]
    return list(get_args(literals[0])) if literals else None


@pytest.mark.parametrize(("serializer", "declared"), [
    (schema.HealthSerializer, ServiceHealth),
    (schema.HealthDeploymentSerializer, HealthDeployment),
    (schema.HealthIndexerSerializer, IndexerHealth),
    (schema.HealthBackfillSerializer, BackfillProgress),
    (schema.HealthIndexerProcessSerializer, IndexerProcessHealth),
    (schema.HealthRedisSerializer, RedisHealth),
    (schema.HealthWebhooksSerializer, WebhooksHealth),
    (schema.HealthWebhookWorkerSerializer, WebhookWorkerHealth),
], ids=lambda value: value.__name__)
def test_the_schema_describes_the_members_the_body_is_declared_with(serializer: Any, declared: Any) -> None:
    """The OpenAPI schema's description of /health (records.api.schema) against the TypedDicts the
    body is built as (records.health, indexer.health): the same members in the same order, null
    where they may be None, and a Literal's values as the choices."""
    hints = get_type_hints(declared)
    fields = serializer().fields
    assert list(fields) == list(hints)
    for name, field in fields.items():
        assert field.allow_null == (type(None) in get_args(hints[name])), name
        values = _literal_values(hints[name])
        if values is not None and (serializer, name) != (schema.HealthSerializer, "status"):  # and "error": below
            assert list(getattr(field, "choices", ())) == values, name


def test_the_schema_describes_every_status_the_body_may_carry() -> None:
    """`ok` and `degraded` (ServiceHealth), and the 503's `error` (DatabaseUnreachable)."""
    statuses = [*get_args(get_type_hints(ServiceHealth)["status"]),
                *get_args(get_type_hints(DatabaseUnreachable)["status"])]
    assert list(getattr(schema.HealthSerializer().fields["status"], "choices", ())) == statuses
