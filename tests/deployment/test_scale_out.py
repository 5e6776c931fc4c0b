"""Scale-out as operators run it: two daphne processes and two `run_indexer` processes of one
deployment, on one database and one Redis (PostgreSQL in CI's second run), with JSON logs.

Only one indexer writes and the other stands by (in `/health` and in its metrics); when the
writer is killed, the standby takes over within TAKEOVER_WITHIN seconds, and nothing is lost or
applied twice; a websocket client on each web process receives every live message, in order;
the rate limit is one budget across both web processes; both give the same ETag."""

from __future__ import annotations

import http.client
import json
import signal
import subprocess
import sys
import threading
import time
import urllib.request
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from websockets.sync.client import ClientConnection

from contracts.devchain import free_port
from indexer.models import AppliedLog, ChangeLogEntry, SyncState
from records.history import Position
from records.models import Bounty, Deployment
from tests.chain import Chain
from tests.indexer.conftest import process_env
from tests.indexer.mirror import assert_mirror_equals_chain, record_log_count
from tests.indexer.test_run_indexer_command import create_bounty, wait_until
from tests.metrics import parse, value
from tests.servers import PROJECT_DIR, Server, start_daphne, stop
from tests.websocket.conftest import open_client, receive

pytestmark = pytest.mark.django_db(transaction=True)

LIMIT = 6
TAKEOVER_WITHIN = 5.0  # seconds from the writer's death to the standby writing (lock polled every 0.1 s)


class Indexer:
    """A `run_indexer` process with its metrics port and its output lines (read on a thread)."""

    def __init__(self, env: dict[str, str]) -> None:
        self.port = free_port()
        self.process = subprocess.Popen([sys.executable, "manage.py", "run_indexer"], cwd=PROJECT_DIR,
                                        env={**env, "BOUNTY_INDEXER_METRICS_PORT": str(self.port)},
                                        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        self.lines: list[str] = []
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        assert self.process.stdout is not None
        self.lines.extend(iter(self.process.stdout.readline, ""))

    def is_writer(self) -> float | None:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{self.port}/metrics", timeout=5) as response:
                return value(parse(response.read().decode()), "bounty_indexer_is_writer")
        except OSError:
            return None



@pytest.fixture
def deployment_env(chain: Chain, shared_redis: str) -> dict[str, str]:
    return process_env(chain, REDIS_URL=shared_redis, LOG_FORMAT="json", BOUNTY_INDEXER_POLL_MS="100",
                       BOUNTY_WS_POLL_MS="50", BOUNTY_RATE_LIMIT=str(LIMIT), BOUNTY_RATE_WINDOW_SECONDS="3600")


@pytest.fixture
def started(deployment_env: dict[str, str]) -> Iterator[Callable[[str], Any]]:
    processes: list[subprocess.Popen[Any]] = []

    def start(kind: str) -> Any:
        started_one: Server | Indexer = start_daphne(deployment_env) if kind == "web" else Indexer(deployment_env)
        processes.append(started_one.process)
        return started_one

    yield start
    for process in processes:
        stop(process)


def get(server: Server, path: str, **headers: str) -> tuple[int, dict[str, str], bytes]:
    conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=10)
    conn.request("GET", path, headers={"Accept": "application/json", **headers})
    response = conn.getresponse()
    body = response.read()
    conn.close()
    return response.status, {k.lower(): v for k, v in response.getheaders()}, body


def health_roles(server: Server) -> list[str]:
    status, _, body = get(server, "/health")
    assert status == 200
    return [process["role"] for process in json.loads(body)["indexer"]["processes"]]


def live_positions(client: ClientConnection, through: int) -> list[tuple[int, str]]:
    """The seq and position of each live message a client receives, up to seq `through`."""
    received: list[tuple[int, str]] = []
    while not received or received[-1][0] < through:
        message = receive(client, timeout=30)
        if not message.get("snapshot") and message["type"] != "snapshot.complete":
            received.append((message["seq"], message["position"]))
    return received


def test_two_web_processes_and_a_standby_indexer_work_as_one_service(chain: Chain,
                                                                     started: Callable[[str], Any]) -> None:
    web_a, web_b = started("web"), started("web")
    writer: Indexer = started("indexer")
    wait_until(lambda: writer.is_writer() == 1)
    standby: Indexer = started("indexer")
    wait_until(lambda: standby.is_writer() == 0 and health_roles(web_a) == ["writer", "standby"])
    assert health_roles(web_b) == ["writer", "standby"]

    # One ETag from both, and one rate-limit budget across both.
    create_bounty(chain, "ipfs://first")
    wait_until(lambda: Bounty.objects.exists())
    first, second = get(web_a, "/bounties"), get(web_b, "/bounties")
    assert first[0] == second[0] == 200 and first[1]["etag"] == second[1]["etag"]
    statuses = [get((web_a, web_b)[n % 2], "/bounties?limit=1")[0] for n in range(LIMIT)]
    assert statuses == [200] * (LIMIT - 2) + [429, 429]

    clients = [open_client(server.url()) for server in (web_a, web_b)]
    try:
        snapshot_seqs, snapshot_positions = [], []
        for client in clients:
            while (message := receive(client))["type"] != "snapshot.complete":
                pass
            snapshot_seqs.append(message["seq"])
            snapshot_positions.append(message["position"])
        for n in range(3):
            create_bounty(chain, f"ipfs://before-the-kill-{n}")
        writer.process.send_signal(signal.SIGKILL)  # maybe mid-batch: nothing committed half-way
        killed = time.monotonic()
        writer.process.wait()
        wait_until(lambda: standby.is_writer() == 1, timeout=TAKEOVER_WITHIN)
        takeover = time.monotonic() - killed
        print(f"the standby took over {takeover:.2f} s after the writer was killed")
        for n in range(3):
            create_bounty(chain, f"ipfs://after-the-kill-{n}")
        tip = chain.w3.eth.block_number
        wait_until(lambda: SyncState.objects.get().last_indexed_block == tip)
        last_seq = SyncState.objects.get().last_seq
        received = [live_positions(client, last_seq) for client in clients]
    finally:
        for client in clients:
            client.close()

    # Every live message once, in order, on both processes, each at its position in the one
    # history both writers continued (records.history).
    assert snapshot_seqs[0] == snapshot_seqs[1] and last_seq > snapshot_seqs[0]
    assert snapshot_positions[0] == snapshot_positions[1]
    expected = list(range(snapshot_seqs[0] + 1, last_seq + 1))
    assert [[seq for seq, _ in positions] for positions in received] == [expected, expected]
    logged = [(seq, str(Position(seq, digest or ""))) for seq, digest in
              ChangeLogEntry.objects.filter(seq__gt=snapshot_seqs[0]).order_by("seq").values_list("seq", "digest")]
    assert received == [logged, logged]
    # Nothing lost or applied twice.
    deployment = Deployment.objects.get()
    assert_mirror_equals_chain(chain.board, deployment)
    assert AppliedLog.objects.count() == record_log_count(chain.board)
    assert Bounty.objects.count() == 7
    assert takeover < TAKEOVER_WITHIN
    assert health_roles(web_a) == ["writer"]  # the new writer cleared the killed one's row
    # JSON logs from every process: one object per line.
    for server in (web_a, web_b):
        stop(server.process)
        lines = server.log().splitlines()
        assert lines and all(json.loads(line)["level"] for line in lines)
        assert any(json.loads(line).get("route") == "/bounties" for line in lines)
    stop(standby.process)
    time.sleep(0.2)
    for indexer in (writer, standby):
        assert indexer.lines and all(json.loads(line)["logger"] for line in indexer.lines)
