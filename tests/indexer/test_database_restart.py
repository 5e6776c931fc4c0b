"""PostgreSQL restarting under a running indexer and a running daphne: a server of the test's own
(tests/servers.py, ThrowawayPostgres) stopped with a fast shutdown and started again, as a minor
upgrade or a failover does. Both indexers, the writer and its standby, reconnect; whichever takes
the writer lock first writes and the other stands by again (no traceback, nothing lost or applied
twice); while the server is down the read routes and /health answer 503 with the service's error
shape."""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from collections.abc import Iterator

import httpx
import psycopg
import pytest

from tests.chain import Chain
from tests.indexer.conftest import post_bounty, process_env
from tests.indexer.mirror import record_log_count
from tests.indexer.test_run_indexer_command import PROJECT_DIR, start, wait_until
from tests.servers import ThrowawayPostgres, start_daphne, stop


def _count(database: ThrowawayPostgres, sql: str) -> int:
    try:
        with psycopg.connect(database.url.replace("postgres://", "postgresql://"), connect_timeout=2) as conn:
            row = conn.execute(sql).fetchone()
    except psycopg.OperationalError:
        return -1
    return int(row[0]) if row else 0


def _roles(database: ThrowawayPostgres) -> list[str]:
    """The roles the indexer processes announce, sorted; empty while the database does not answer."""
    try:
        with psycopg.connect(database.url.replace("postgres://", "postgresql://"), connect_timeout=2) as conn:
            rows = conn.execute("SELECT role FROM indexer_indexerprocess WHERE last_seen > now() - interval '6 s' "
                                "ORDER BY role").fetchall()
    except psycopg.Error:
        return []
    return [row[0] for row in rows]


@pytest.fixture
def database() -> Iterator[ThrowawayPostgres]:
    with ThrowawayPostgres() as server:
        yield server


def test_the_indexer_and_the_read_api_ride_through_a_restart_of_postgresql(chain: Chain,
                                                                          database: ThrowawayPostgres) -> None:
    # A request waits DATABASE_POOL_TIMEOUT for the pool to reconnect before its 503: 2 s here.
    env = {**process_env(chain, DATABASE_URL=database.url), "BOUNTY_INDEXER_POLL_MS": "100",
           "DATABASE_POOL_TIMEOUT": "2"}
    env.pop("REDIS_URL", None)  # this test is about the database alone
    subprocess.run([sys.executable, "manage.py", "migrate", "--no-input"], cwd=PROJECT_DIR, env=env, check=True,
                   capture_output=True, timeout=120)
    indexer = start(env)
    server = start_daphne(env)
    standby: subprocess.Popen[str] | None = None
    try:
        post_bounty(chain, "ipfs://before-the-restart")
        wait_until(lambda: _count(database, "SELECT count(*) FROM records_bounty") == 1, timeout=30)
        standby = start(env)
        wait_until(lambda: _roles(database) == ["standby", "writer"], timeout=30)
        assert httpx.get(server.http("/bounties")).status_code == 200

        database.stop("fast")
        started = time.monotonic()
        down = [httpx.get(server.http(path), timeout=30) for path in ("/bounties", "/bounties/1", "/health")]
        waited = (time.monotonic() - started) / len(down)
        post_bounty(chain, "ipfs://while-postgresql-is-down")
        time.sleep(2)  # the indexer meets the closed server
        database.start()
        post_bounty(chain, "ipfs://after-the-restart")
        wait_until(lambda: _count(database, "SELECT count(*) FROM records_bounty") == 3, timeout=60)
        wait_until(lambda: httpx.get(server.http("/bounties")).status_code == 200, timeout=30)
        # One writer and one standby again, whichever took the lock first.
        wait_until(lambda: _roles(database) == ["standby", "writer"], timeout=30)
        assert indexer.poll() is None and standby.poll() is None, "both indexers are still running"
        applied = _count(database, "SELECT count(*) FROM indexer_appliedlog")
    finally:
        outputs = []
        for process in (indexer, standby):
            if process is not None:
                process.send_signal(signal.SIGTERM)
                outputs.append(process.communicate(timeout=30)[0])
        stop(server.process)
    for response in down:
        assert response.status_code == 503, response.text
        assert response.json()["status" if response.url.path == "/health" else "detail"]
    assert [response.headers.get("Retry-After") for response in down[:2]] == ["5", "5"]
    assert down[0].json() == {"detail": "the database cannot be reached; try again shortly"}
    assert waited < 4, f"a request waited {waited:.1f} s"
    for process, output in zip((indexer, standby), outputs, strict=True):
        assert process is not None and process.returncode == 0, output
        assert "Traceback" not in output, output
        assert "the database went away" in output and "taking the writer lock again" in output
    assert applied == record_log_count(chain.board), "every log applied once"
