"""deploy/bounty-webhooks@.service as operators start it: its ExecStart with the env example's
settings delivers to a receiver, serves its metrics on the instance's port, and stops on SIGTERM
within a second with exit code 0."""

from __future__ import annotations

import signal
import subprocess
import sys
import time
import urllib.request
from typing import Any

import pytest

from contracts.devchain import free_port
from records.models import Deployment
from tests.deployment.shipped import exec_start, production_environment
from tests.history import append_changes, updates
from tests.metrics import parse, value
from tests.servers import PROJECT_DIR, Log, database_url, kill
from tests.webhooks.conftest import WORKER_ENV, ReceiverProcess, register, wait_until

pytestmark = pytest.mark.django_db(transaction=True)


def test_the_unit_delivers_serves_its_metrics_and_stops_within_a_second(
        deployment: Deployment, receiver: ReceiverProcess, shared_redis: str) -> None:
    port = free_port()
    words = [word.replace("%i", str(port)) for word in exec_start("bounty-webhooks@.service")]
    assert words[:3] == ["/srv/bounty/.venv/bin/python", "manage.py", "run_webhooks"]
    env = production_environment(database_url=database_url(), redis_url=shared_redis,
                                 BOUNTY_CONTRACT_ADDRESS=deployment.contract_address, **WORKER_ENV)
    process = subprocess.Popen([sys.executable, *words[1:]], cwd=PROJECT_DIR, env=env,
                               stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    assert process.stderr is not None
    log = Log(process.stderr)
    try:
        register(receiver.url("unit"))
        append_changes(deployment, updates(1, 2))
        wait_until(lambda: len(receiver.deliveries("unit")) == 2, what="two deliveries")

        def scraped() -> Any:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as answer:
                return parse(answer.read().decode())
        samples = wait_until(lambda: (s := scraped()) and value(s, "bounty_webhook_deliveries_total",
                                                                outcome="delivered") == 2 and s,
                             what="the deliveries counted")
        assert value(samples, "bounty_webhook_delivery_latency_seconds_count") == 2
        started = time.monotonic()
        process.send_signal(signal.SIGTERM)
        assert process.wait(timeout=5) == 0
        assert time.monotonic() - started < 1.5
        assert "Traceback" not in log.text(ended=True)
    finally:
        if process.poll() is None:
            kill(process)
