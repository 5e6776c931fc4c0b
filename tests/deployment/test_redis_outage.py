"""Redis going away under a running service: a Redis server of the test's own (tests/servers.py,
ThrowawayRedis) stopped and started again, then frozen (it takes connections and answers nothing),
while `run_indexer` indexes the chain and a daphne serves it.

Redis only speeds the service up: meanwhile the read routes answer 200 from the database, within
a bound however Redis fails; the rate limit goes on per process; `/health` says `degraded` and
names Redis within seconds; a websocket opened before and one opened during the outage receive
every change, in seq order without a gap; the indexer goes on indexing; each outage is logged
once when it begins and once when it ends; and all of it comes back by itself."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from websockets.sync.client import ClientConnection

from records.models import Bounty, Deployment
from tests.chain import Chain
from tests.indexer.conftest import process_env
from tests.indexer.mirror import assert_mirror_equals_chain
from tests.indexer.test_run_indexer_command import PROJECT_DIR, create_bounty, wait_until
from tests.servers import Server, ThrowawayRedis, start_daphne, stop
from tests.websocket.conftest import open_client, receive

pytestmark = pytest.mark.django_db(transaction=True)

ANSWERED_WITHIN = 2.0  # seconds a read may take while Redis is down or frozen (its timeout is 0.25 s)
TOLD_WITHIN = 5.0  # seconds until /health says what changed
LIMIT = 1000


@pytest.fixture
def redis_server() -> Iterator[ThrowawayRedis]:
    with ThrowawayRedis() as server:
        yield server


def health(server: Server) -> dict[str, Any]:
    response = httpx.get(server.http("/health"), timeout=10)
    assert response.status_code == 200, response.text
    body: dict[str, Any] = response.json()
    return body


def redis_status(server: Server) -> str:
    return str(health(server)["redis"]["status"])


def reads_answer(server: Server) -> list[httpx.Response]:
    """Each read route once, each answered within ANSWERED_WITHIN seconds."""
    responses = []
    for path in ("/bounties", "/bounties/1", "/bounties/1/overview", "/submissions", "/disputes?limit=5"):
        started = time.monotonic()
        response = httpx.get(server.http(path), timeout=10)
        took = time.monotonic() - started
        assert response.status_code == 200, (path, response.status_code, response.text)
        assert took < ANSWERED_WITHIN, f"{path} took {took:.2f} s"
        responses.append(response)
    return responses


class Follower:
    """A websocket client that has read its snapshot; `follow` reads live messages up to a seq."""

    def __init__(self, server: Server) -> None:
        self.client: ClientConnection = open_client(server.url())
        while (message := receive(self.client))["type"] != "snapshot.complete":
            pass
        self.seqs = [message["seq"]]
        self.prompts: list[str] = []

    def follow(self, prompt: str) -> None:
        """Reads live messages until the bounty.created of `prompt`."""
        while True:
            message = receive(self.client, timeout=30)
            self.seqs.append(message["seq"])
            if message["type"] == "bounty.created":
                self.prompts.append(message["payload"]["prompt"])
                if message["payload"]["prompt"] == prompt:
                    return

    def gap_free(self) -> bool:
        return self.seqs == list(range(self.seqs[0], self.seqs[0] + len(self.seqs)))


def test_reads_the_websocket_and_the_indexer_ride_through_redis_stopping_and_freezing(
        chain: Chain, redis_server: ThrowawayRedis) -> None:
    env = process_env(chain, REDIS_URL=redis_server.url, BOUNTY_INDEXER_POLL_MS="100", BOUNTY_WS_POLL_MS="200",
                      BOUNTY_RATE_LIMIT=str(LIMIT), BOUNTY_RATE_WINDOW_SECONDS="3600")
    indexer = subprocess.Popen([sys.executable, "manage.py", "run_indexer"], cwd=PROJECT_DIR, env=env,
                               stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    server = start_daphne(env)
    followers: list[Follower] = []
    try:
        create_bounty(chain, "ipfs://before")
        wait_until(lambda: Bounty.objects.count() == 1)
        before = Follower(server)
        followers.append(before)
        assert redis_status(server) == "ok" and health(server)["status"] == "ok"
        counted = reads_answer(server)  # the cache warmed, the budget counted in Redis

        # Stopped: every connection refused.
        redis_server.stop()
        down = reads_answer(server) + reads_answer(server)  # the second round meets the outage known
        wait_until(lambda: redis_status(server) == "unreachable", timeout=TOLD_WITHIN)
        told = health(server)
        during = Follower(server)  # a websocket opened while Redis is down
        followers.append(during)
        create_bounty(chain, "ipfs://while-redis-is-stopped")
        for follower in followers:
            follower.follow("ipfs://while-redis-is-stopped")

        redis_server.start()  # empty: what it held is gone, as after a restart without persistence
        wait_until(lambda: redis_status(server) == "ok", timeout=TOLD_WITHIN)
        wait_until(lambda: health(server)["status"] == "ok", timeout=TOLD_WITHIN)
        create_bounty(chain, "ipfs://after-the-restart")
        for follower in followers:
            follower.follow("ipfs://after-the-restart")
        reads_answer(server)

        # Frozen: connections taken, nothing answered.
        redis_server.freeze()
        frozen = reads_answer(server) + reads_answer(server)
        wait_until(lambda: redis_status(server) == "unreachable", timeout=TOLD_WITHIN)
        create_bounty(chain, "ipfs://while-redis-is-frozen")
        wait_until(lambda: Bounty.objects.count() == 4, timeout=30)  # the indexer does not wait on Redis
        for follower in followers:
            follower.follow("ipfs://while-redis-is-frozen")
        redis_server.thaw()
        wait_until(lambda: redis_status(server) == "ok", timeout=TOLD_WITHIN)
        create_bounty(chain, "ipfs://after-the-thaw")
        for follower in followers:
            follower.follow("ipfs://after-the-thaw")
        assert indexer.poll() is None, "the indexer is still running"
    finally:
        for follower in followers:
            follower.client.close()
        indexer.send_signal(signal.SIGTERM)
        output, _ = indexer.communicate(timeout=30)
        stop(server.process)
    server_log = server.log()

    assert told["status"] == "degraded"
    assert told["redis"]["unreachable_since"] and told["redis"]["unreachable_seconds"] is not None
    # The rate limit went on, per process, with its headers.
    remaining = [int(response.headers["X-RateLimit-Remaining"]) for response in counted + down + frozen]
    assert all(0 < left < LIMIT for left in remaining), remaining
    assert [json.loads(response.content) for response in down[:1]] == [json.loads(counted[0].content)]
    for follower in followers:
        assert follower.gap_free(), follower.seqs
    assert before.prompts == ["ipfs://while-redis-is-stopped", "ipfs://after-the-restart",
                              "ipfs://while-redis-is-frozen", "ipfs://after-the-thaw"]
    assert during.prompts == before.prompts
    # Each outage said once when it began and once when it ended, never per request.
    assert server_log.count("Redis cannot be reached") == 2, server_log
    assert server_log.count("Redis answers again") == 2, server_log
    assert "Traceback" not in server_log, server_log
    assert "Traceback" not in output, output
    deployment = Deployment.objects.get(contract_address=chain.deployment.contract_address.lower())
    assert_mirror_equals_chain(chain.board, deployment)


def test_an_idle_web_process_does_not_take_its_feeds_wait_for_redis_gone(chain: Chain,
                                                                         redis_server: ThrowawayRedis) -> None:
    """A feed with nothing to hear waits in the channel layer's receive for seconds at a time: an
    idle process must not read that as an outage (log it, say `degraded`)."""
    server = start_daphne(process_env(chain, REDIS_URL=redis_server.url))
    try:
        with open_client(server.url()) as client:
            while receive(client)["type"] != "snapshot.complete":
                pass
            deadline = time.monotonic() + 2 * 5 + 2  # two of channels_redis's 5 s receives, and more
            while time.monotonic() < deadline:
                assert redis_status(server) == "ok"
                time.sleep(0.5)
    finally:
        stop(server.process)
