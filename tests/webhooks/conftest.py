"""Fixtures for the webhook tests: a receiver process (tests.webhooks.receiver), delivery workers
as operators run them (`manage.py run_webhooks`), and endpoints registered as the admin registers
them (webhooks.endpoints.start)."""

from __future__ import annotations

import json
import subprocess
import sys
import time
import urllib.request
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import pytest

from contracts.devchain import free_port
from records.models import Deployment
from tests.chain import Chain
from tests.factories import make_deployment
from tests.indexer.conftest import process_env
from tests.servers import PROJECT_DIR, Log, kill, stop
from webhooks import endpoints
from webhooks.models import Endpoint

# The worker's settings in these tests: the receiver is on loopback over plain HTTP, and the
# timeouts are short so that a hanging receiver or a killed worker costs seconds.
WORKER_ENV = {
    "BOUNTY_WEBHOOKS_ALLOW_PLAIN_HTTP": "1",
    "BOUNTY_WEBHOOKS_ALLOWED_NETWORKS": "127.0.0.0/8",
    "BOUNTY_WEBHOOKS_POLL_MS": "50",
    "BOUNTY_WEBHOOKS_TIMEOUT_SECONDS": "2",
    "BOUNTY_WEBHOOKS_LEASE_SECONDS": "5",
}


def wait_until(condition: Callable[[], Any], timeout: float = 30, what: str = "the condition") -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if result := condition():
            return result
        time.sleep(0.05)
    raise AssertionError(f"{what} not reached within {timeout} s")


@dataclass
class ReceiverProcess:
    port: int
    process: subprocess.Popen[str] | None = None

    def start(self) -> None:
        self.process = subprocess.Popen([sys.executable, "-m", "tests.webhooks.receiver", str(self.port)],
                                        cwd=PROJECT_DIR, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
        assert self.process.stdout is not None
        assert self.process.stdout.readline().strip() == "listening"

    def kill(self) -> None:
        assert self.process is not None
        kill(self.process)
        if self.process.stdout is not None:
            self.process.stdout.close()

    def url(self, name: str) -> str:
        return f"http://127.0.0.1:{self.port}/hook/{name}"

    def behave(self, name: str, **behaviour: Any) -> None:
        request = urllib.request.Request(f"http://127.0.0.1:{self.port}/behaviour/{name}", method="PUT",
                                         data=json.dumps(behaviour).encode())
        urllib.request.urlopen(request, timeout=5).read()

    def received(self, name: str) -> dict[str, Any]:
        with urllib.request.urlopen(f"http://127.0.0.1:{self.port}/deliveries/{name}", timeout=5) as answer:
            found: dict[str, Any] = json.loads(answer.read())
        return found

    def deliveries(self, name: str) -> list[dict[str, Any]]:
        found: list[dict[str, Any]] = self.received(name)["deliveries"]
        return found


@pytest.fixture
def deployment(chain: Chain, settings: Any) -> Deployment:
    """The chain's deployment, active here as in the worker processes (as in the web process whose
    admin registers endpoints), for tests that write its change log directly."""
    active = make_deployment(contract_address=chain.deployment.contract_address.lower(),
                             usdc_address=chain.deployment.usdc_address.lower())
    settings.BOUNTY_CHAIN_ID = active.chain_id
    settings.BOUNTY_CONTRACT_ADDRESS = active.contract_address
    return active


@pytest.fixture
def receiver() -> Iterator[ReceiverProcess]:
    process = ReceiverProcess(free_port())
    process.start()
    try:
        yield process
    finally:
        if process.process is not None:
            process.kill()


@dataclass
class Worker:
    process: subprocess.Popen[bytes]
    log: Log
    env: dict[str, str] = field(default_factory=dict)

    def text(self) -> str:
        return self.log.text(ended=self.process.poll() is not None)


@pytest.fixture
def workers(chain: Chain) -> Iterator[Callable[..., Worker]]:
    """Starts `manage.py run_webhooks` processes on the test database (extra environment as
    keywords); each is stopped (SIGTERM) after the test."""
    started: list[Worker] = []

    def start(**extra: str) -> Worker:
        env = process_env(chain, **{**WORKER_ENV, **extra})
        process = subprocess.Popen([sys.executable, "manage.py", "run_webhooks"], cwd=PROJECT_DIR, env=env,
                                   stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        assert process.stderr is not None
        worker = Worker(process, Log(process.stderr), env)
        started.append(worker)
        return worker

    try:
        yield start
    finally:
        for worker in started:
            stop(worker.process)
            # Shown when the test fails.
            print(f"worker {worker.process.pid} (exit {worker.process.returncode}):\n{worker.text()}")


def register(url: str, **fields: Any) -> Endpoint:
    """An endpoint registered as the admin registers one: a secret, and the newest position."""
    endpoint = Endpoint(url=url, **fields)
    endpoints.start(endpoint)
    assert endpoint.position_seq is not None, "no active deployment: use the `deployment` fixture"
    endpoint.save()
    return endpoint


def manage(env: dict[str, str], *arguments: str) -> str:
    """`manage.py` with `arguments` in `env`; what it printed."""
    done = subprocess.run([sys.executable, "manage.py", *arguments], cwd=PROJECT_DIR, env=env, capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    return done.stdout


def register_in(env: dict[str, str], url: str) -> str:
    """Registers an endpoint as the admin does, in the database of `env` (another than the
    test's); its secret."""
    return manage(env, "shell", "-c", "from webhooks.endpoints import start\nfrom webhooks.models import Endpoint\n"
                  f"e = Endpoint(url={url!r})\nstart(e)\ne.save()\nprint(e.secret)").split()[-1]
