"""PostgreSQL's statement_timeout in the web processes (BOUNTY_STATEMENT_TIMEOUT_MS), on a real
daphne and a PostgreSQL server of the test's own whatever the suite's backend: a read made slow
for real (another connection holds a lock on the table it reads) answers 503 with Retry-After in
the error shape once the timeout passes, and the worker answers the next request; `manage.py`
processes (the indexer's) run without the timeout."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator

import httpx
import psycopg
import pytest

from tests.factories import ACTIVE_CONTRACT, ACTIVE_USDC
from tests.servers import PROJECT_DIR, Server, ThrowawayPostgres, start_daphne, stop

TIMEOUT_MS = 400


def environment(database: ThrowawayPostgres) -> dict[str, str]:
    env = {**os.environ, "DATABASE_URL": database.url, "BOUNTY_CHAIN_ID": "91342",
           "BOUNTY_CONTRACT_ADDRESS": ACTIVE_CONTRACT, "BOUNTY_USDC_ADDRESS": ACTIVE_USDC,
           "BOUNTY_API_CACHE_SECONDS": "0", "BOUNTY_RATE_LIMIT": "1000000",
           "BOUNTY_STATEMENT_TIMEOUT_MS": str(TIMEOUT_MS)}
    for name in ("BOUNTY_RPC_URL", "REDIS_URL", "DJANGO_DEBUG"):
        env.pop(name, None)
    return env


@pytest.fixture(scope="module")
def database() -> Iterator[ThrowawayPostgres]:
    with ThrowawayPostgres() as server:
        subprocess.run([sys.executable, "manage.py", "migrate", "--no-input"], cwd=PROJECT_DIR,
                       env=environment(server), check=True, capture_output=True, timeout=180)
        yield server


@pytest.fixture
def server(database: ThrowawayPostgres) -> Iterator[Server]:
    instance = start_daphne(environment(database))
    yield instance
    stop(instance.process)


def connect(database: ThrowawayPostgres) -> psycopg.Connection[tuple[object, ...]]:
    return psycopg.connect(database.url.replace("postgres://", "postgresql://"), autocommit=True)


def test_a_read_past_the_statement_timeout_answers_503_with_retry_after_and_frees_the_worker(
        database: ThrowawayPostgres, server: Server) -> None:
    with connect(database) as locker, connect(database) as observer:
        locker.execute("BEGIN")
        locker.execute("LOCK TABLE records_deployment IN ACCESS EXCLUSIVE MODE")  # every list reads it
        answers = [httpx.get(server.http("/bounties?limit=5"), headers={"Accept": "application/json"}, timeout=15)
                   for _ in range(2)]
        waiting = observer.execute("SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock'").fetchone()
        locker.execute("ROLLBACK")
    for answer in answers:
        assert answer.status_code == 503
        assert answer.headers["Retry-After"] == "5"
        assert answer.json() == {"detail": f"the query took longer than the {TIMEOUT_MS} ms the service allows; "
                                           "try again shortly, or narrow it (filters, a shorter q)"}
    assert waiting == (0,)  # the cancelled reads hold nothing
    after = httpx.get(server.http("/bounties?limit=5"), headers={"Accept": "application/json"}, timeout=15)
    assert after.status_code == 200


def test_manage_py_processes_such_as_the_indexer_run_without_the_timeout(database: ThrowawayPostgres) -> None:
    shown = subprocess.run(
        [sys.executable, "manage.py", "shell", "-c",
         "from django.db import connection\n"
         "with connection.cursor() as cursor:\n"
         "    cursor.execute('SHOW statement_timeout')\n"
         "    print(cursor.fetchone()[0])"],
        cwd=PROJECT_DIR, env=environment(database), check=True, capture_output=True, text=True, timeout=60)
    assert shown.stdout.strip().splitlines()[-1] == "0"
