"""Fixtures of the websocket tests: real daphne server processes (and a real indexer process)
sharing the test database, and real `websockets` clients; and the two daphne processes that serve
bend_app.py's bare application with and without the bends (test_daphne_ws.py, test_daphne_http.py)."""

from __future__ import annotations

import http.client
import json
import re
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from django.core.cache import cache
from django.db import transaction
from websockets.sync.client import ClientConnection, connect

from indexer.models import SyncState
from records.changes import MessageType
from records.history import Position
from records.models import Bounty, Deployment
from records.representation import bounty_json
from records.selectors import head_position
from tests.chain import Chain
from tests.factories import make_bounty, make_deployment
from tests.history import append_changes
from tests.indexer.conftest import process_env
from tests.servers import PROJECT_DIR, Server, serving, start_daphne, stop
from tests.websocket.bend_app import FLOOD_MESSAGES

UNREAD_SECONDS = 2.0  # how long a flood's client reads nothing
LAST_MESSAGE = re.compile(rb'\{"flood_seconds": [0-9.e-]+\}')


@pytest.fixture
def servers(chain: Chain) -> Iterator[Callable[..., Server]]:
    """Starts daphne processes of the service (extra environment as keywords) on the test database,
    serving `application` (the service's unless told)."""
    started: list[Server] = []
    cache.clear()  # connection counts of servers killed by earlier tests (shared with Redis)

    def serve(application: str = "bountysite.asgi:application", **extra: str) -> Server:
        server = start_daphne(process_env(chain, **{"BOUNTY_WS_POLL_MS": "50", **extra}), application)
        started.append(server)
        return server

    yield serve
    for server in started:
        stop(server.process)


@pytest.fixture(scope="module")
def bent() -> Iterator[Server]:
    """daphne serving bend_app.py's application with every bend installed (bend_app_installed.py)."""
    with serving("tests.websocket.bend_app_installed:application") as server:
        yield server


@pytest.fixture(scope="module")
def upstream() -> Iterator[Server]:
    """daphne serving bend_app.py's application as daphne does alone."""
    with serving("tests.websocket.bend_app:application") as server:
        yield server


def flood_seconds(server: Server, request: bytes) -> float:
    """Sends `request` for bend_app.py's /flood on a raw socket, reads nothing for UNREAD_SECONDS,
    then everything: how long the application's sends took to complete."""
    with socket.create_connection(("127.0.0.1", server.port), timeout=30) as raw:
        raw.sendall(request)
        time.sleep(UNREAD_SECONDS)
        data = b""
        wanted = FLOOD_MESSAGES * (1 << 20)
        while not (last := LAST_MESSAGE.search(data, wanted)):
            chunk = raw.recv(1 << 20)
            assert chunk, "the server closed before its last message"
            data += chunk
    flood: dict[str, Any] = json.loads(last.group())
    return float(flood["flood_seconds"])


@pytest.fixture
def indexer_process(chain: Chain) -> Iterator[Callable[[], subprocess.Popen[bytes]]]:
    """Starts `manage.py run_indexer` as its own process, as operators run it."""
    started: list[subprocess.Popen[bytes]] = []

    def start() -> subprocess.Popen[bytes]:
        process = subprocess.Popen([sys.executable, "manage.py", "run_indexer"], cwd=PROJECT_DIR,
                                   env=process_env(chain), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        started.append(process)
        return process

    yield start
    for process in started:
        stop(process)


@pytest.fixture
def active(chain: Chain) -> Deployment:
    """The deployment the servers serve (the chain's), for tests that write records directly."""
    return make_deployment(contract_address=chain.deployment.contract_address.lower(),
                           usdc_address=chain.deployment.usdc_address.lower())


def commit_change(deployment: Deployment, kind: str, payload: dict[str, Any], count: int = 1) -> int:
    """Appends `count` changes as the indexer does (tests.history.append_changes); returns the
    last seq."""
    return append_changes(deployment, [(MessageType(kind), payload, 1)] * count).seq


def head(deployment: Deployment) -> str:
    """The position after the deployment's newest change, as a client resumes from it (`?since=`)."""
    return str(head_position(deployment.pk))


def written_in_bulk(deployment: Deployment, **fields: Any) -> Bounty:
    """A bounty as a bulk backfill writes it: without a change-log entry or a new seq (the factory's
    bump of the seq is undone in the same transaction, so no server ever sees it)."""
    with transaction.atomic():
        seq = SyncState.objects.select_for_update().get(deployment=deployment).last_seq
        bounty = make_bounty(deployment, **fields)
        SyncState.objects.filter(deployment=deployment).update(last_seq=seq)
    return bounty


def logged_bounty(deployment: Deployment, **fields: Any) -> tuple[Bounty, Position]:
    """A bounty as the indexer writes a new one: with its `bounty.created` entry, in one
    transaction; the bounty and the position after its entry."""
    with transaction.atomic():
        bounty = written_in_bulk(deployment, **fields)
        payload = bounty_json(bounty, chain_id=deployment.chain_id, contract_address=deployment.contract_address)
        position = append_changes(deployment, [(MessageType.BOUNTY_CREATED, payload, bounty.block_number)])
    return bounty, position


def many_bounties(deployment: Deployment, count: int, **fields: Any) -> None:
    """`count` bounties with IDs 1..count, written in bulk (copies of one factory bounty, made
    with `fields`)."""
    template = written_in_bulk(deployment, bounty_id=1, **fields)
    fields = {f.attname: getattr(template, f.attname) for f in Bounty._meta.concrete_fields if f.attname != "id"}
    Bounty.objects.bulk_create([Bounty(**{**fields, "bounty_id": n}) for n in range(2, count + 1)], batch_size=2_000)


def open_client(url: str, **options: Any) -> ClientConnection:
    client: ClientConnection = connect(url, open_timeout=10, legacy=True, **options)  # used with or without `with`
    return client


def upgrade(port: int, path: str, **headers: str) -> http.client.HTTPResponse:
    """The server's answer to a websocket upgrade request for `path` (with `headers`), read as an
    HTTP response: a 101, or the refusal in its place."""
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    connection.request("GET", path, headers={"Upgrade": "websocket", "Connection": "Upgrade",
                                             "Sec-WebSocket-Key": "dGhlIHNhbXBsZSBub25jZQ==",
                                             "Sec-WebSocket-Version": "13", **headers})
    return connection.getresponse()


def receive(client: ClientConnection, timeout: float = 10) -> dict[str, Any]:
    message: dict[str, Any] = json.loads(client.recv(timeout=timeout))
    return message


def receive_n(client: ClientConnection, count: int, timeout: float = 20) -> list[dict[str, Any]]:
    deadline = time.monotonic() + timeout
    return [receive(client, max(0.01, deadline - time.monotonic())) for _ in range(count)]


def close_code(client: ClientConnection, timeout: float = 10) -> int | None:
    """Reads until the server closes the connection; the close code the client received."""
    deadline = time.monotonic() + timeout
    try:
        while time.monotonic() < deadline:
            client.recv(timeout=max(0.01, deadline - time.monotonic()))
    except TimeoutError:
        raise AssertionError("the server did not close the connection") from None
    except Exception:  # ConnectionClosed*: the close frame (or its absence) is on the client
        pass
    return client.close_code
