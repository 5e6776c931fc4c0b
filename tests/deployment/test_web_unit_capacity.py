"""A web process as deploy/bounty-web@.service starts it (its command line, its limit on open files)
with deploy/bounty.env.example's settings holds 1,200 websockets from 60 addresses, each address at
its cap of 20, and `/health` still answers. Under systemd's default of 1,024 open files, accepting
connections failed (EMFILE) part-way, and `/health` with them."""

from __future__ import annotations

import asyncio
import http.client
import json
import subprocess
from pathlib import Path

import pytest
from websockets.asyncio.client import ClientConnection, connect
from websockets.exceptions import ConnectionClosed

from tests.deployment.shipped import default_websocket_cap
from tests.servers import Server

pytestmark = pytest.mark.django_db(transaction=True)

ADDRESSES = 60
PER_ADDRESS = 20  # BOUNTY_WS_MAX_CONNECTIONS_PER_CLIENT's default, which the example keeps
TRY_AGAIN_LATER = 1013
TRIES = 30


async def admitted(server: Server, address: int, opening: asyncio.Semaphore) -> ClientConnection:
    """A websocket from 198.51.100.`address` (through the proxy the example trusts), once it has its
    snapshot's first message: a refused one is closed with 1008 instead. A snapshot that found no
    free slot in time is closed with 1013 (try again later): the client comes back after a pause,
    as clients must (1,200 snapshots at once share the process's few snapshot readers)."""
    for _ in range(TRIES):
        async with opening:
            client = await connect(server.url(), additional_headers={"X-Forwarded-For": f"198.51.100.{address}"},
                                   open_timeout=60)
        try:
            message = json.loads(await asyncio.wait_for(client.recv(), 60))
        except ConnectionClosed as closed:
            code = closed.rcvd.code if closed.rcvd is not None else None
        else:
            assert message["type"].startswith("snapshot"), message
            return client
        if code != TRY_AGAIN_LATER:
            raise AssertionError(f"198.51.100.{address}'s websocket closed with {code}")
        await asyncio.sleep(1)
    raise AssertionError(f"198.51.100.{address} found no snapshot slot in {TRIES} tries")


def test_the_web_unit_holds_1200_websockets_from_60_addresses_and_health_still_answers(
        web_process: Server) -> None:
    async def scenario() -> int:
        opening = asyncio.Semaphore(50)  # daphne's listen backlog
        clients = await asyncio.gather(*(admitted(web_process, 1 + n % ADDRESSES, opening)
                                         for n in range(ADDRESSES * PER_ADDRESS)))
        conn = http.client.HTTPConnection("127.0.0.1", web_process.port, timeout=10)
        conn.request("GET", "/health", headers={"Host": "bounties.example.org", "X-Forwarded-Proto": "https",
                                                "Accept": "application/json"})
        response = conn.getresponse()
        assert json.loads(response.read())["status"] in ("ok", "degraded")
        conn.close()
        await asyncio.gather(*(client.close() for client in clients))
        return len(clients)

    assert asyncio.run(scenario()) == ADDRESSES * PER_ADDRESS
    # A refused snapshot (1013) is an answer, not an error: none logged a traceback.
    assert "Traceback" not in web_process.log()


def test_the_web_unit_listens_with_a_backlog_for_the_websocket_caps_reconnections(web_process: Server) -> None:
    """Clients dropped together (a restart, a network blip) reconnect together: with Twisted's
    backlog of 50 the rest waited for SYN retries. The kernel caps a listen backlog at
    net.core.somaxconn; `ss` shows a listening socket's backlog as its Send-Q."""
    listening = subprocess.run(["ss", "-ltnH", f"sport = :{web_process.port}"], capture_output=True, text=True,
                               check=True).stdout.split()
    somaxconn = int(Path("/proc/sys/net/core/somaxconn").read_text())
    assert int(listening[2]) == min(16_384, somaxconn) >= min(default_websocket_cap(), somaxconn)
