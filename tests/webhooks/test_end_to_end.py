"""Webhooks end to end, as operators run them: the real contract on anvil, `run_indexer`,
`run_webhooks` and daphne on a PostgreSQL server and a Redis server of the test's own. A receiver
that folds what it is sent (deduplicated by `webhook-id`) ends with exactly the records the service
serves, through Redis going away, PostgreSQL restarting and a worker SIGKILLed mid-delivery."""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from standardwebhooks.webhooks import Webhook

from contracts.demo import _Demo
from tests.chain import Chain
from tests.indexer.conftest import process_env
from tests.indexer.test_run_indexer_command import start as start_indexer
from tests.servers import PROJECT_DIR, ThrowawayPostgres, ThrowawayRedis, start_daphne, stop
from tests.webhooks.conftest import WORKER_ENV, ReceiverProcess, manage, register_in, wait_until

KINDS = {"bounty": "bounties", "submission": "submissions", "dispute": "disputes"}


@pytest.fixture
def database() -> Iterator[ThrowawayPostgres]:
    with ThrowawayPostgres() as server:
        yield server


def folded(receiver: ReceiverProcess, name: str, secret: str) -> dict[str, dict[int, dict[str, Any]]]:
    """The records the receiver holds after folding its deliveries in order, each once by
    `webhook-id`, every one verified by the Standard Webhooks library."""
    records: dict[str, dict[int, dict[str, Any]]] = {resource: {} for resource in KINDS.values()}
    seen: set[str] = set()
    for delivery in receiver.deliveries(name):
        message = Webhook(secret).verify(delivery["body"], delivery["headers"])
        if delivery["headers"]["webhook-id"] in seen or delivery["status"] != 200:
            continue
        seen.add(delivery["headers"]["webhook-id"])
        kind, _, change = message["type"].partition(".")
        assert kind in KINDS, message  # no resync: one history throughout
        if change == "removed":
            records[KINDS[kind]].pop(message["payload"]["id"], None)
        else:
            records[KINDS[kind]][message["payload"]["id"]] = message["payload"]
    return records


def served(base: str) -> dict[str, dict[int, dict[str, Any]]]:
    return {resource: {record["id"]: record for record in httpx.get(f"{base}/{resource}", timeout=10).json()}
            for resource in KINDS.values()}


def agree(receiver: ReceiverProcess, name: str, secret: str, base: str) -> bool:
    mine, theirs = folded(receiver, name, secret), served(base)
    return all(mine[resource].keys() == theirs[resource].keys() and all(
        record.items() <= theirs[resource][id_].items() for id_, record in mine[resource].items())
        for resource in KINDS.values())


def test_a_folding_receiver_ends_with_the_records_served_through_redis_away_postgresql_restarted_and_a_kill(
        chain: Chain, database: ThrowawayPostgres, receiver: ReceiverProcess) -> None:
    with ThrowawayRedis() as redis:
        env = {**process_env(chain, DATABASE_URL=database.url, REDIS_URL=redis.url, **WORKER_ENV),
               "BOUNTY_INDEXER_POLL_MS": "100", "DATABASE_POOL_TIMEOUT": "2"}
        manage(env, "migrate", "--no-input")
        indexer = start_indexer(env)
        server = start_daphne(env)
        workers: list[subprocess.Popen[bytes]] = []

        def worker() -> subprocess.Popen[bytes]:
            process = subprocess.Popen([sys.executable, "manage.py", "run_webhooks"], cwd=PROJECT_DIR, env=env,
                                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            workers.append(process)
            return process

        try:
            wait_until(lambda: httpx.get(server.http("/health")).json().get("indexer", {}).get("running"),
                       timeout=60, what="the indexer running")
            secret = register_in(env, receiver.url("fold"))
            first = worker()
            demo = _Demo(chain.w3, chain.deployment)
            bounty = demo.create_bounty(demo.actors.poster, "before anything goes wrong", 10, 3600)
            submission = demo.submit(bounty, demo.actors.claimants[0], "a first answer")
            wait_until(lambda: len(served(server.http(""))["submissions"]) == 1, what="the first changes indexed")
            wait_until(lambda: agree(receiver, "fold", secret, server.http("")), what="the first changes")

            redis.stop()  # the indexer's announcements stop: the worker polls
            demo.submit(bounty, demo.actors.claimants[1], "while Redis is away")
            demo.dispute(submission, demo.actors.grouts[0], "while Redis is away")
            wait_until(lambda: len(served(server.http(""))["disputes"]) == 1, what="indexed while Redis is away")
            wait_until(lambda: agree(receiver, "fold", secret, server.http("")), timeout=30, what="Redis away")
            redis.start()

            receiver.behave("fold", delay=1)
            other = demo.create_bounty(demo.actors.second_poster, "during a kill", 5, 3600)
            wait_until(lambda: receiver.received("fold")["in_flight"], what="a delivery in flight")
            first.send_signal(signal.SIGKILL)  # mid-delivery: its lease lapses and the next sends it again
            first.wait()
            receiver.behave("fold", delay=0)
            worker()

            database.stop("fast")
            time.sleep(1)
            database.start()
            demo.submit(other, demo.actors.claimants[2], "after PostgreSQL came back")
            wait_until(lambda: {resource: len(records) for resource, records in served(server.http("")).items()}
                       == {"bounties": 2, "submissions": 3, "disputes": 1}, timeout=60, what="everything indexed")
            wait_until(lambda: agree(receiver, "fold", secret, server.http("")), timeout=60,
                       what="the records served after the restart")
        finally:
            for process in workers:
                stop(process)
            stop(indexer)
            stop(server.process)
