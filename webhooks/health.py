"""The webhooks' part of GET /health (records.health): the delivery workers seen within the
heartbeat and the endpoints' state. It reads only webhooks.models, so that the read side may
import it (tests/test_import_graph.py)."""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import TypedDict

from django.conf import settings
from django.db.models import Count, Min, Q
from django.utils import timezone

from webhooks.models import Endpoint, WorkerBeat


class WebhookWorkerHealth(TypedDict):
    name: str
    last_seen: datetime


class WebhooksHealth(TypedDict):
    endpoints: int  # enabled
    disabled: int
    retrying: int  # enabled endpoints waiting to try a change again
    failing_since: datetime | None  # the longest-failing enabled endpoint's first failure
    workers: list[WebhookWorkerHealth]  # seen within the heartbeat
    running: bool  # no enabled endpoint, or a worker seen within the heartbeat


def webhooks_health() -> WebhooksHealth:
    seen = timezone.now() - timedelta(seconds=settings.BOUNTY_HEALTH_HEARTBEAT_SECONDS)
    counts = Endpoint.objects.aggregate(
        endpoints=Count("pk", filter=Q(enabled=True)), disabled=Count("pk", filter=Q(enabled=False)),
        retrying=Count("pk", filter=Q(enabled=True, next_attempt_at__isnull=False)),
        failing_since=Min("failing_since", filter=Q(enabled=True)))
    workers = [WebhookWorkerHealth(name=name, last_seen=last_seen) for name, last_seen in
               WorkerBeat.objects.filter(last_seen__gte=seen).order_by("name").values_list("name", "last_seen")]
    return WebhooksHealth(endpoints=counts["endpoints"], disabled=counts["disabled"], retrying=counts["retrying"],
                          failing_since=counts["failing_since"], workers=workers,
                          running=bool(workers) or not counts["endpoints"])
