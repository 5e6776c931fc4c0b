"""deploy/prometheus.yml's scrape of a web process started as deploy/bounty-web@.service starts it,
with deploy/bounty.env.example's production settings (DEBUG off, the public host name only in
DJANGO_ALLOWED_HOSTS, the https redirect on): 200 and the metrics, where it answered 400 (the Host
is the target's address) or a redirect to https. Only an allowed peer's scrape by address passes
the Host check; a request from elsewhere, or with a name, is still held to DJANGO_ALLOWED_HOSTS."""

from __future__ import annotations

import http.client
from typing import Any

import pytest
import yaml
from prometheus_client.openmetrics.parser import text_string_to_metric_families

from tests.deployment.shipped import production_environment, start_web_unit
from tests.deployment.test_deploy_files import DEPLOY
from tests.servers import Server, database_url, stop

pytestmark = pytest.mark.django_db(transaction=True)

# What Prometheus 2 sends with each scrape (scrape/scrape.go): it prefers OpenMetrics.
PROMETHEUS_HEADERS = {
    "Accept": "application/openmetrics-text;version=1.0.0,application/openmetrics-text;version=0.0.1;q=0.75,"
              "text/plain;version=0.0.4;q=0.5,*/*;q=0.1",
    "Accept-Encoding": "gzip",
    "User-Agent": "Prometheus/2.53.0",
    "X-Prometheus-Scrape-Timeout-Seconds": "10",
}


def web_job() -> dict[str, Any]:
    config = yaml.safe_load((DEPLOY / "prometheus.yml").read_text())
    job: dict[str, Any] = next(job for job in config["scrape_configs"] if job["job_name"] == "bounty-web")
    return job


def scrape(host: str, port: int, path: str, **headers: str) -> http.client.HTTPResponse:
    """One GET as Prometheus sends it; the Host is `host:port`, as Prometheus sends the target."""
    conn = http.client.HTTPConnection(host, port, timeout=10)
    conn.request("GET", path, headers={**PROMETHEUS_HEADERS, **headers})
    response = conn.getresponse()
    response.body = response.read()  # type: ignore[attr-defined]
    conn.close()
    return response


def test_the_shipped_scrape_gets_the_metrics_of_a_web_process_with_the_example_settings(
        web_process: Server) -> None:
    job = web_job()
    assert job.get("scheme", "http") == "http" and "params" not in job
    for target in job["static_configs"][0]["targets"]:
        host, _ = target.rsplit(":", 1)  # the unit's instance: this test's port
        response = scrape(host, web_process.port, job.get("metrics_path", "/metrics"))
        assert response.status == 200, (response.status, response.getheader("Location"), response.body)  # type: ignore[attr-defined]
        assert response.getheader("Content-Type", "").startswith("application/openmetrics-text; version=1.0.0")
        text = response.body.decode()  # type: ignore[attr-defined]
        families = {family.name for family in text_string_to_metric_families(text)}  # type: ignore[no-untyped-call]
        assert {"bounty_http_requests", "bounty_ws_connections_open", "process_open_fds"} <= families


def test_only_an_allowed_peers_scrape_by_address_escapes_the_host_check(web_process: Server) -> None:
    port = web_process.port
    assert scrape("127.0.0.1", port, "/health").status == 400  # any other route: the Host is checked
    assert scrape("127.0.0.1", port, "/metrics", Host="prometheus.example").status == 400  # a name
    assert scrape("127.0.0.1", port, "/metrics", Host="bounties.example.org").status == 200  # allowed, not redirected
    forwarded = scrape("127.0.0.1", port, "/metrics", **{"X-Forwarded-For": "198.51.100.7"})
    assert forwarded.status == 400  # through a proxy it is not the operator's scrape


def test_a_scrape_by_address_from_a_peer_not_allowed_is_held_to_the_allowed_hosts(shared_redis: str) -> None:
    env = production_environment(database_url=database_url(), redis_url=shared_redis,
                                 BOUNTY_METRICS_ALLOWED="192.0.2.0/24")  # not this test's loopback
    server = start_web_unit(env)
    try:
        assert scrape("127.0.0.1", server.port, "/metrics").status == 400
        assert scrape("127.0.0.1", server.port, "/metrics", Host="bounties.example.org").status == 403
    finally:
        stop(server.process)
