"""GET /health reports the webhooks: endpoints enabled without a delivery worker make the service
degraded; a running `run_webhooks` is listed until it stops."""

from __future__ import annotations

import json
from typing import Any

import pytest
from django.test import Client

from records.models import Deployment
from tests.webhooks.conftest import ReceiverProcess, register, wait_until

pytestmark = pytest.mark.django_db(transaction=True)


def health() -> dict[str, Any]:
    body: dict[str, Any] = json.loads(Client().get("/health").content)
    return body


def test_endpoints_without_a_worker_are_degraded_and_a_running_worker_is_listed_until_it_stops(
        deployment: Deployment, receiver: ReceiverProcess, workers: Any) -> None:
    assert health()["webhooks"] == {"endpoints": 0, "disabled": 0, "retrying": 0, "failing_since": None,
                                    "workers": [], "running": True}
    register(receiver.url("h"))
    body = health()
    assert (body["status"], body["webhooks"]["endpoints"], body["webhooks"]["running"]) == ("degraded", 1, False)
    worker = workers()
    body = wait_until(lambda: (b := health())["webhooks"]["workers"] and b, what="the worker listed")
    assert body["status"] == "ok" and body["webhooks"]["running"] is True
    assert body["webhooks"]["workers"][0]["name"].endswith(f":{worker.process.pid}")
    worker.process.terminate()
    assert worker.process.wait(timeout=5) == 0
    assert health()["webhooks"]["workers"] == []
