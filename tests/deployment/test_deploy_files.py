"""The examples in deploy/ agree with the service: the alert rules and the Grafana dashboard use
only metric names the processes expose, the dashboard shows every one of them, Prometheus scrapes
the ports the units and nginx use, nginx does not route /metrics, the environment example
names only variables the settings read, every required one among them, with no secret in it, and
daphne as the web unit starts it refuses a websocket message over the service's limit."""

from __future__ import annotations

import json
import os
import re
import shlex
import struct
import sys
from collections.abc import Mapping
from pathlib import Path

import pytest
import yaml
from django.test import override_settings
from prometheus_client import REGISTRY, CollectorRegistry

import bountysite.settings
import records.metrics  # noqa: F401 (registers the web metrics)
from contracts.devchain import free_port
from indexer.config import IndexerConfig
from indexer.metrics import IndexerMetrics
from tests.servers import DAPHNE, database_url, serve_command, stop
from tests.websocket.conftest import close_code, open_client
from webhooks.metrics import METRICS

DEPLOY = Path(__file__).resolve().parent.parent.parent / "deploy"
NAME = re.compile(r"\bbounty_[a-z_]+")
_SUFFIXES = {"counter": ("_total",), "histogram": ("_bucket", "_sum", "_count"), "gauge": ("",)}


def exposed(registry: CollectorRegistry) -> set[str]:
    """The series names a registry exposes (a counter's `_total`, a histogram's `_bucket` ...)."""
    return {family.name + suffix for family in registry.collect() if family.name.startswith("bounty_")
            for suffix in _SUFFIXES[family.type]}


SERVED = exposed(IndexerMetrics(1, "0x" + "00" * 20).registry) | exposed(REGISTRY) | exposed(METRICS.registry)


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
                   'bounty_http_requests_total{status=~"5.."}', 'bounty_ws_closes_total{code="1011"}',
                   "bounty_webhook_oldest_undelivered_seconds", "bounty_webhook_endpoints_disabled_total"):
        assert metric in expressions


def test_prometheus_scrapes_the_ports_of_the_units_and_nginx_hides_metrics() -> None:
    config = yaml.safe_load((DEPLOY / "prometheus.yml").read_text())
    targets = {job["job_name"]: job["static_configs"][0]["targets"] for job in config["scrape_configs"]}
    nginx = (DEPLOY / "nginx.conf").read_text()
    upstream = re.findall(r"server (127\.0\.0\.1:\d+);", nginx)
    assert targets["bounty-web"] == upstream
    assert "location = /metrics {\n        return 404;" in nginx
    assert re.search(r"^server_tokens off;$", nginx, re.M)
    assert "run_indexer --metrics-port %i" in (DEPLOY / "bounty-indexer@.service").read_text()
    assert "-e tcp:port=%i:interface=127.0.0.1:" in (DEPLOY / "bounty-web@.service").read_text()
    assert all(re.fullmatch(r"127\.0\.0\.1:\d+", target) for target in targets["bounty-indexer"])
    assert "run_webhooks --metrics-port %i" in (DEPLOY / "bounty-webhooks@.service").read_text()
    assert all(re.fullmatch(r"127\.0\.0\.1:\d+", target) for target in targets["bounty-webhooks"])


def test_nginx_limits_connections_per_address_and_the_temporary_file_of_a_response() -> None:
    nginx = (DEPLOY / "nginx.conf").read_text()
    zone = re.search(r"^limit_conn_zone \$binary_remote_addr zone=(\w+):\d+m;$", nginx, re.M)
    assert zone is not None
    tls_server = nginx[nginx.index("listen 443"):]
    limit = re.search(rf"^    limit_conn {zone.group(1)} (\d+);$", tls_server, re.M)
    assert limit is not None
    # Above the websocket's own cap per client, which closes with 1008 and says why.
    assert int(limit.group(1)) > bountysite.settings.BOUNTY_WS_MAX_CONNECTIONS_PER_CLIENT
    pages = tls_server[tls_server.index("location / {"):]
    temp_file = re.search(r"^        proxy_max_temp_file_size (\d+)m;$", pages, re.M)
    assert temp_file is not None and int(temp_file.group(1)) <= 64


ENV_READ = re.compile(r'\benv_([a-z]+)\(\s*"([A-Z][A-Z0-9_]*)"')  # a typed reader's call in settings.py: (reader, name)


def env_example() -> tuple[dict[str, str], set[str]]:
    """deploy/bounty.env.example: its NAME=value lines, and the names only shown, commented out."""
    text = (DEPLOY / "bounty.env.example").read_text()
    active = dict(re.findall(r"^([A-Z][A-Z0-9_]*)=(.*)$", text, re.M))
    shown = set(re.findall(r"^#([A-Z][A-Z0-9_]*)=", text, re.M))
    return active, shown


def settings_source() -> str:
    return Path(bountysite.settings.__file__).read_text()


def test_the_env_example_names_only_variables_the_settings_read() -> None:
    read = {name for _, name in ENV_READ.findall(settings_source())}
    active, shown = env_example()
    assert set(active) | shown <= read, (set(active) | shown) - read
    assert not set(active) & shown


def test_the_env_example_sets_every_required_variable() -> None:
    source = settings_source()
    required = {name for reader, name in ENV_READ.findall(source) if reader == "required"}
    required |= set(re.findall(r'"([A-Z][A-Z0-9_]*) is required', source))  # required unless DJANGO_DEBUG
    with override_settings(BOUNTY_RPC_URL=None, BOUNTY_CONTRACT_ADDRESS=None, BOUNTY_USDC_ADDRESS=None), \
            pytest.raises(RuntimeError, match="missing configuration") as missing:  # the indexer's IndexerError
        IndexerConfig.from_settings()
    indexer_required = re.search(r"missing configuration: ([A-Z0-9_, ]+)", str(missing.value))
    assert indexer_required is not None
    required |= set(re.findall(r"[A-Z][A-Z0-9_]*", indexer_required.group(1)))
    # Not required by the code, but a real chain's: which chain, and where the contract begins (found
    # on the chain when unset, which a node that keeps no old state cannot do).
    required |= {"BOUNTY_CHAIN_ID", "BOUNTY_START_BLOCK"}
    assert {"DJANGO_SECRET_KEY", "DJANGO_ALLOWED_HOSTS", "BOUNTY_RPC_URL"} <= required
    active, _ = env_example()
    assert required <= set(active), required - set(active)


def test_the_env_example_holds_placeholders_where_secrets_go() -> None:
    active, _ = env_example()
    assert re.fullmatch(r"https://<[^>]+>/<your API key>", active["BOUNTY_RPC_URL"])
    assert re.fullmatch(r"<[^>]+>", active["DJANGO_SECRET_KEY"])
    assert "<database password>@" in active["DATABASE_URL"]
    for name in ("BOUNTY_CONTRACT_ADDRESS", "BOUNTY_USDC_ADDRESS", "BOUNTY_START_BLOCK"):
        assert re.fullmatch(r"<[^>]+>", active[name]), name


def unit_command(unit: str, instance: str, environment: Mapping[str, str]) -> list[str]:
    """The unit's ExecStart as systemd runs it for `instance`: `%i` the instance, `${NAME}` from
    `environment` (what its EnvironmentFile sets) or else from its own Environment= lines, and
    this virtualenv's daphne for the installed one."""
    text = (DEPLOY / unit).read_text()
    variables = {**dict(re.findall(r"^Environment=([A-Z][A-Z0-9_]*)=(.*)$", text, re.M)), **environment}
    exec_start = re.search(r"^ExecStart=(.*)$", text, re.M)
    assert exec_start is not None
    words = [re.sub(r"\$\{([A-Z][A-Z0-9_]*)\}", lambda name: variables[name.group(1)], word)
             for word in shlex.split(exec_start.group(1).replace("%i", instance))]
    assert words[0] == "/srv/bounty/.venv/bin/daphne"
    return [DAPHNE, *words[1:]]


def test_the_web_units_default_message_size_is_the_services() -> None:
    unit_default = re.search(r"^Environment=BOUNTY_WS_MAX_MESSAGE_BYTES=(\d+)$",
                             (DEPLOY / "bounty-web@.service").read_text(), re.M)
    settings_default = re.search(r'env_int\("BOUNTY_WS_MAX_MESSAGE_BYTES", ([\d_]+)', settings_source())
    assert unit_default is not None and settings_default is not None
    assert int(unit_default.group(1)) == int(settings_default.group(1))


def dev_web_command(port: int) -> list[str]:
    """The web server's command line in scripts/dev, for `port`."""
    line = re.search(r"^\$py (manage\.py runserver .*) &$", (DEPLOY.parent / "scripts" / "dev").read_text(), re.M)
    assert line is not None
    return [sys.executable, *shlex.split(line.group(1).replace("$port", str(port)))]


@pytest.mark.parametrize("started_by", ["the web unit", "scripts/dev"])
@pytest.mark.django_db(transaction=True)
def test_daphne_as_started_drops_a_websocket_message_over_the_limit_before_buffering_it(started_by: str) -> None:
    port = free_port()
    env = {**os.environ, "DATABASE_URL": database_url()}
    env.pop("BOUNTY_WS_MAX_MESSAGE_BYTES", None)  # the unit's default, the service's
    command = (unit_command("bounty-web@.service", str(port), env) if started_by == "the web unit"
               else dev_web_command(port))
    server = serve_command(command, port, env)
    try:
        with open_client(server.url()) as client:
            # The header of a masked 1 MiB text frame and its first KiB only: daphne must act on
            # the header, not wait for (and buffer) the rest. autobahn (failByDrop, its default)
            # drops the TCP connection without a close frame: the client sees 1006.
            assert client.socket is not None
            client.socket.sendall(struct.pack("!BBQ4s", 0x81, 0x80 | 127, 1 << 20, bytes(4)) + b"x" * 1024)
            assert close_code(client) == 1006
        with open_client(server.url()) as other:  # the server goes on
            other.send("x" * 4096)
            assert other.ping().wait(10)
    finally:
        stop(server.process)
