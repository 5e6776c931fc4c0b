"""SIGTERM stops `run_indexer` within a second, with exit code 0, whatever it waits for: the
node's answer to a request in flight, or the time to retry a request the node refused.

The node sits behind a proxy that forwards to the session's anvil until the test switches it to
a fault: anvil cannot be made to rate-limit (429 with Retry-After) or to leave a request
unanswered while it keeps accepting connections."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import threading
import time
import urllib.request
from collections.abc import Iterator
from typing import Any

import pytest

from records.models import Bounty
from tests.chain import Chain
from tests.indexer.conftest import process_env
from tests.indexer.test_rpc import Reply, local_server
from tests.indexer.test_run_indexer_command import PROJECT_DIR, create_bounty, wait_until

pytestmark = pytest.mark.django_db(transaction=True)
STOP_WITHIN = 1.0  # seconds, from SIGTERM to the process's exit


class SwitchableNode:
    """Forwards to anvil, or answers with the fault set in `fault`."""

    def __init__(self, upstream: str) -> None:
        self.upstream = upstream
        self.fault: str | None = None
        self.faulted = threading.Event()  # a request has met the fault

    def __call__(self, request: Any) -> Reply:
        if self.fault is not None:
            self.faulted.set()
            if self.fault == "rate limited":
                return Reply(status=429, headers={"Retry-After": "30"}, body=b"Too Many Requests")
            return Reply(delay=30.0, body=b"{}")  # "no answer": far beyond the test
        forwarded = urllib.request.Request(self.upstream, data=json.dumps(request).encode(),
                                           headers={"Content-Type": "application/json"})
        with urllib.request.urlopen(forwarded, timeout=10) as response:
            return Reply(body=response.read())


@pytest.fixture
def node(chain: Chain) -> Iterator[tuple[SwitchableNode, str]]:
    switchable = SwitchableNode(chain.deployment.rpc_url)
    with local_server(switchable) as url:
        yield switchable, url


def _lines(process: subprocess.Popen[str]) -> list[str]:
    """Collects the process's output on a thread, so that its pipe never fills."""
    lines: list[str] = []

    def read() -> None:
        assert process.stdout is not None
        lines.extend(iter(process.stdout.readline, ""))

    threading.Thread(target=read, daemon=True).start()
    return lines


def _stop_and_time(process: subprocess.Popen[str]) -> float:
    started = time.monotonic()
    process.send_signal(signal.SIGTERM)
    try:
        process.wait(timeout=30)
    finally:
        if process.poll() is None:
            process.kill()
    return time.monotonic() - started


@pytest.mark.parametrize("fault", ["rate limited", "no answer"])
def test_sigterm_stops_it_within_a_second_with_exit_code_0(chain: Chain, node: tuple[SwitchableNode, str],
                                                           fault: str) -> None:
    switchable, url = node
    create_bounty(chain, "ipfs://before-the-fault")
    env = process_env(chain, BOUNTY_RPC_URL=url, BOUNTY_RPC_TIMEOUT_SECONDS="60")
    process = subprocess.Popen([sys.executable, "manage.py", "run_indexer"], cwd=PROJECT_DIR, env=env,
                               stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    lines = _lines(process)
    try:
        wait_until(lambda: Bounty.objects.exists())  # following the head, polling every 50 ms
        switchable.fault = fault
        assert switchable.faulted.wait(10)
        if fault == "rate limited":  # it waits the longest backoff the node's Retry-After asks for
            wait_until(lambda: any("retry 1 in 15.00 s" in line for line in lines), timeout=10)
        else:
            time.sleep(0.3)  # the request is in flight, 60 s from its timeout
        seconds = _stop_and_time(process)
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
    output = "".join(lines)
    assert process.returncode == 0, output
    assert seconds < STOP_WITHIN, f"stopped after {seconds:.2f} s\n{output}"
    assert "indexer stopped" in output
    assert "Traceback" not in output
