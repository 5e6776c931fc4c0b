"""A web process stopped as systemd stops deploy/bounty-web@.service (SIGTERM) with websockets open
and HTTP requests in flight, many times over (bountysite/daphne_shutdown.py): every websocket client
is told 1012 (the service restarts) at once, and the process is gone within 2 s. Before, one stop in
five hung until systemd's SIGKILL 30 s later: a request in flight inside a synchronous middleware
waited for an event loop that had stopped."""

from __future__ import annotations

import asyncio
import http.client
import json
import signal
import threading
import time

import pytest
from websockets.asyncio.client import ClientConnection, connect
from websockets.exceptions import ConnectionClosed

from bountysite.daphne_shutdown import EXIT_SECONDS, GRACE_SECONDS, SERVICE_RESTART
from tests.deployment.shipped import production_environment, start_web_unit
from tests.factories import make_bounty, make_deployment
from tests.servers import Server, database_url, serving, stop

pytestmark = pytest.mark.django_db(transaction=True)

STOPS = 6
WEBSOCKETS = 24
REQUESTERS = 6  # threads sending HTTP requests back to back while the signal comes
HOST = "bounties.example.org"  # the example's DJANGO_ALLOWED_HOSTS


def requests_until(server: Server, stopped: threading.Event, answers: list[int]) -> None:
    """GETs of a page of bounties back to back until `stopped`; each answer's status (0: cut)."""
    while not stopped.is_set():
        conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=10)
        try:
            conn.request("GET", "/bounties?limit=50", headers={"Host": HOST, "X-Forwarded-Proto": "https",
                                                                "Accept": "application/json"})
            response = conn.getresponse()
            response.read()
            answers.append(response.status)
        except OSError:
            answers.append(0)
            time.sleep(0.01)
        finally:
            conn.close()


async def following(server: Server, n: int) -> ClientConnection:
    client = await connect(server.url(), additional_headers={"X-Forwarded-For": f"198.51.100.{n}"})
    message = json.loads(await client.recv())
    assert message.get("snapshot") or message["type"] == "snapshot.complete", message
    return client


async def close_code(client: ClientConnection) -> int | None:
    """The code the server closed with (None: no close frame), read past any message still queued."""
    try:
        while True:
            await client.recv()
    except ConnectionClosed as closed:
        return closed.rcvd.code if closed.rcvd is not None else None


def stop_while_busy(server: Server) -> tuple[list[int | None], float, list[int]]:
    """SIGTERM to `server` while WEBSOCKETS clients follow the feed and REQUESTERS threads send
    requests: the close code each client got, how long the process took to exit, and the
    statuses the requests got (0: cut)."""
    stopped, answers = threading.Event(), list[int]()
    requesters = [threading.Thread(target=requests_until, args=(server, stopped, answers)) for _ in range(REQUESTERS)]

    async def scenario() -> tuple[list[int | None], float]:
        clients = await asyncio.gather(*(following(server, 1 + n) for n in range(WEBSOCKETS)))
        for requester in requesters:
            requester.start()
        while len(answers) < 20:  # requests are flowing
            await asyncio.sleep(0.01)
        signalled = time.monotonic()
        server.process.send_signal(signal.SIGTERM)
        codes = await asyncio.wait_for(asyncio.gather(*(close_code(client) for client in clients)),
                                       GRACE_SECONDS + EXIT_SECONDS + 2)
        while server.process.poll() is None and time.monotonic() - signalled < 30:
            await asyncio.sleep(0.01)
        return codes, time.monotonic() - signalled

    try:
        codes, exited_after = asyncio.run(scenario())
    finally:
        stopped.set()
        for requester in requesters:
            if requester.is_alive():
                requester.join(15)
    return codes, exited_after, answers


def test_a_stopped_web_process_closes_every_websocket_with_1012_and_exits_within_2_s(shared_redis: str) -> None:
    deployment = make_deployment()
    for _ in range(30):
        make_bounty(deployment)
    env = production_environment(database_url=database_url(), redis_url=shared_redis)
    for stop_number in range(STOPS):
        server = start_web_unit(env)
        try:
            codes, exited_after, answers = stop_while_busy(server)
        finally:
            stop(server.process)
        assert codes == [SERVICE_RESTART] * WEBSOCKETS, (stop_number, codes, server.log()[-3000:])
        assert exited_after < GRACE_SECONDS + EXIT_SECONDS + 0.5, (stop_number, exited_after, server.log()[-3000:])
        assert server.process.returncode == 0, (stop_number, server.log()[-3000:])
        assert answers.count(200) >= 20 and set(answers) <= {200, 0}, (stop_number, sorted(set(answers)))
        assert "Traceback" not in server.log(), server.log()[-3000:]


def test_canary_daphne_itself_tells_websocket_clients_nothing_when_stopped() -> None:
    """Upstream daphne, without the bend, drops websockets at SIGTERM with no close frame (the
    client sees 1006). Once this fails, daphne says something itself: see whether
    bountysite/daphne_shutdown.py can go."""
    async def scenario(server: Server) -> int | None:
        async with connect(server.url().replace("/ws/events", "/frames")) as client:
            await client.recv()
            server.process.send_signal(signal.SIGTERM)
            return await asyncio.wait_for(close_code(client), 10)

    with serving("tests.websocket.bend_app:application") as server:
        assert asyncio.run(scenario(server)) is None
