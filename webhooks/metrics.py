"""The delivery worker's Prometheus metrics, served by `run_webhooks` on
BOUNTY_WEBHOOKS_METRICS_PORT (docs/operations.md, Webhooks). They live in a registry of the
worker's own (with the process's CPU and memory)."""

from __future__ import annotations

import logging
import time
from datetime import datetime
from typing import Protocol
from wsgiref.simple_server import WSGIServer

from django.utils import timezone
from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, start_http_server
from prometheus_client.platform_collector import PlatformCollector
from prometheus_client.process_collector import ProcessCollector

logger = logging.getLogger(__name__)

# Seconds from the indexer's commit of a change to an endpoint's 2xx for it.
_LATENCY_BUCKETS = (0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 300.0, 3600.0)


class Committed(Protocol):
    @property
    def committed(self) -> datetime | None: ...


class WebhookMetrics:
    def __init__(self) -> None:
        self.registry = registry = CollectorRegistry()
        ProcessCollector(registry=registry)
        PlatformCollector(registry=registry)
        self.deliveries = Counter("bounty_webhook_deliveries", "Delivery attempts, by outcome (delivered, 4xx, "
                                  "5xx, gone, no_answer, refused).", ["outcome"], registry=registry)
        self.latency = Histogram("bounty_webhook_delivery_latency_seconds",
                                 "From the indexer's commit of a change to the endpoint's 2xx for it.",
                                 buckets=_LATENCY_BUCKETS, registry=registry)
        self.backlog = Gauge("bounty_webhook_backlog_changes",
                             "Changes of the change log after an enabled endpoint's position.", ["endpoint"],
                             registry=registry)
        self.oldest = Gauge("bounty_webhook_oldest_undelivered_seconds",
                            "Age of the oldest change an enabled endpoint has not been sent (0: none).",
                            ["endpoint"], registry=registry)
        self.disabled = Counter("bounty_webhook_endpoints_disabled",
                                "Endpoints this worker disabled (410 Gone, or failing too long).", registry=registry)
        self.endpoints_disabled = Gauge("bounty_webhook_endpoints_disabled_now", "Endpoints disabled now.",
                                        registry=registry)
        self.window_seq = Gauge("bounty_webhook_head_seq", "The newest change-log seq the worker has read.",
                                registry=registry)
        self.heartbeat = Gauge("bounty_webhook_worker_heartbeat_seconds",
                               "Unix time of the worker's last round.", registry=registry)

    def observe_delivered(self, event: Committed) -> None:
        if event.committed is not None:
            self.latency.observe(max(0.0, (timezone.now() - event.committed).total_seconds()))

    def beat(self) -> None:
        self.heartbeat.set(time.time())

    def serve(self, port: int, address: str) -> WSGIServer:
        server, _ = start_http_server(port, addr=address, registry=self.registry)
        logger.info("metrics on http://%s:%d/metrics", address if ":" not in address else f"[{address}]",
                    server.server_port)
        return server


METRICS = WebhookMetrics()
