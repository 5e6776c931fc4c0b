"""The examples in deploy/ agree with the service: the alert rules and the Grafana dashboard use
only metric names the processes expose, the dashboard shows every one of them, Prometheus scrapes
the ports the units and nginx use, and nginx does not route /metrics."""

from __future__ import annotations

import json
import re
from pathlib import Path

import yaml
from prometheus_client import REGISTRY, CollectorRegistry

import records.metrics  # noqa: F401 (registers the web metrics)
from indexer.metrics import IndexerMetrics

DEPLOY = Path(__file__).resolve().parent.parent.parent / "deploy"
NAME = re.compile(r"\bbounty_[a-z_]+")
_SUFFIXES = {"counter": ("_total",), "histogram": ("_bucket", "_sum", "_count"), "gauge": ("",)}


def exposed(registry: CollectorRegistry) -> set[str]:
    """The series names a registry exposes (a counter's `_total`, a histogram's `_bucket` ...)."""
    return {family.name + suffix for family in registry.collect() if family.name.startswith("bounty_")
            for suffix in _SUFFIXES[family.type]}


SERVED = exposed(IndexerMetrics(1, "0x" + "00" * 20).registry) | exposed(REGISTRY)


def dashboard_expressions() -> list[str]:
    dashboard = json.loads((DEPLOY / "grafana-dashboard.json").read_text())
    return [target["expr"] for panel in dashboard["panels"] for target in panel.get("targets", [])]


def alert_rules() -> dict[str, str]:
    rules = yaml.safe_load((DEPLOY / "bounty-alerts.yml").read_text())
    return {rule["alert"]: rule["expr"] for group in rules["groups"] for rule in group["rules"]}


def test_the_dashboard_uses_exactly_the_metrics_the_processes_serve() -> None:
    used = {name for expr in dashboard_expressions() for name in NAME.findall(expr)}
    assert used <= SERVED, used - SERVED
    shown = {re.sub(r"_(bucket|sum|count)$", "", name) for name in used}
    served = {re.sub(r"_(bucket|sum|count)$", "", name) for name in SERVED}
    assert shown == served, served - shown


def test_every_alert_uses_served_metrics_and_the_issues_alerts_are_there() -> None:
    rules = alert_rules()
    for name, expr in rules.items():
        assert set(NAME.findall(expr)) <= SERVED, (name, expr)
    expressions = " ".join(rules.values())
    for metric in ("bounty_indexer_lag_blocks", "bounty_indexer_heartbeat_age_seconds", "bounty_indexer_is_writer",
                   'bounty_http_requests_total{status=~"5.."}', 'bounty_ws_closes_total{code="1011"}'):
        assert metric in expressions


def test_prometheus_scrapes_the_ports_of_the_units_and_nginx_hides_metrics() -> None:
    config = yaml.safe_load((DEPLOY / "prometheus.yml").read_text())
    targets = {job["job_name"]: job["static_configs"][0]["targets"] for job in config["scrape_configs"]}
    nginx = (DEPLOY / "nginx.conf").read_text()
    upstream = re.findall(r"server (127\.0\.0\.1:\d+);", nginx)
    assert targets["bounty-web"] == upstream
    assert "location = /metrics {\n        return 404;" in nginx
    assert "run_indexer --metrics-port %i" in (DEPLOY / "bounty-indexer@.service").read_text()
    assert "--port %i" in (DEPLOY / "bounty-web@.service").read_text()
    assert all(re.fullmatch(r"127\.0\.0\.1:\d+", target) for target in targets["bounty-indexer"])
