"""An upgrade done as docs/operations.md (Upgrading) says, from the last release (`.last-release`)
to this checkout: the new release's `migrate` runs while the previous release's indexer and web
process keep running on the same database (and Redis, on CI's second run), then the web process
and the indexer are replaced one at a time, the new indexer taking over from the old as its
standby. The previous release keeps indexing and answering throughout, and the mirror ends
exact (`manage.py verify_mirror`)."""

from __future__ import annotations

import io
import json
import subprocess
import sys
import tarfile
import threading
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest
from django.db import connection

from tests.chain import Chain
from tests.indexer.conftest import process_env
from tests.indexer.test_run_indexer_command import create_bounty, wait_until
from tests.servers import PROJECT_DIR, Server, start_daphne, stop

pytestmark = pytest.mark.django_db(transaction=True)

LAST_RELEASE = (PROJECT_DIR / ".last-release").read_text().strip()


def export(commit: str, into: Path) -> Path:
    """The project as it was at `commit`, as a release directory of its own (the same packages)."""
    archive = subprocess.run(["git", "archive", "--format=tar", commit], cwd=PROJECT_DIR, check=True,
                             capture_output=True).stdout
    with tarfile.open(fileobj=io.BytesIO(archive)) as tar:
        tar.extractall(into, filter="data")
    return into


@pytest.fixture
def upgrade_database(tmp_path: Path, worker_id: str) -> Iterator[str]:
    """An empty database of its own on the suite's backend: the previous release migrates it."""
    if connection.vendor == "sqlite":
        yield f"sqlite:///{tmp_path / 'upgrade.sqlite3'}"
        return
    settings = connection.settings_dict
    name = f"upgrade_{worker_id}"
    server = f"postgres://{settings['USER']}@{settings['HOST']}:{settings['PORT']}"
    with psycopg.connect(f"{server}/postgres", autocommit=True) as admin:
        admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        admin.execute(f'CREATE DATABASE "{name}"')
    yield f"{server}/{name}"
    with psycopg.connect(f"{server}/postgres", autocommit=True) as admin:
        admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


class Watch(threading.Thread):
    """Asks a web process for the bounties every 50 ms until stopped; keeps every answer's status.
    It is a client of its own (203.0.113.7 through the trusted proxy): one address reads one
    unpaged list at a time (BOUNTY_HTTP_MAX_STREAMS_PER_CLIENT), so the test's own reads of the
    list would at times overlap the watch's and be refused 429."""

    def __init__(self, server: Server) -> None:
        super().__init__(daemon=True)
        self.request = urllib.request.Request(server.http("/bounties"), headers={"X-Forwarded-For": "203.0.113.7"})
        self.statuses, self.stopped = list[int](), threading.Event()

    def run(self) -> None:
        while not self.stopped.wait(0.05):
            try:
                with urllib.request.urlopen(self.request, timeout=10) as response:
                    self.statuses.append(response.status)
            except urllib.error.HTTPError as error:
                self.statuses.append(error.code)
            except OSError:
                self.statuses.append(0)


def bounty_count(server: Server) -> int:
    with urllib.request.urlopen(server.http("/bounties"), timeout=10) as response:
        return len(json.loads(response.read()))


def manage(cwd: Path, env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "manage.py", *args], cwd=cwd, env=env, capture_output=True,
                          text=True, timeout=300)


def indexer(cwd: Path, env: dict[str, str], log: Path) -> subprocess.Popen[bytes]:
    """run_indexer, its log to a file: a pipe nobody reads would block it once 64 KiB are written."""
    with log.open("ab") as stderr:
        return subprocess.Popen([sys.executable, "manage.py", "run_indexer"], cwd=cwd, env=env,
                                stdout=subprocess.DEVNULL, stderr=stderr)


def test_an_upgrade_in_the_documented_order_keeps_the_previous_release_running(
        chain: Chain, tmp_path: Path, upgrade_database: str) -> None:
    previous = export(LAST_RELEASE, tmp_path / "previous")
    env = process_env(chain, DATABASE_URL=upgrade_database, BOUNTY_INDEXER_POLL_MS="100",
                      BOUNTY_TRUSTED_PROXIES="127.0.0.1")
    migrated = manage(previous, env, "migrate")
    assert migrated.returncode == 0, migrated.stderr
    processes: list[subprocess.Popen[bytes]] = []
    try:
        old_web = start_daphne(env, cwd=previous)
        old_indexer = indexer(previous, env, tmp_path / "old-indexer.log")
        processes += [old_web.process, old_indexer]
        create_bounty(chain, "ipfs://before")
        wait_until(lambda: bounty_count(old_web) == 1)
        watch = Watch(old_web)
        watch.start()

        # 1. The new release's migrations, while the previous release runs.
        upgraded = manage(PROJECT_DIR, env, "migrate")
        assert upgraded.returncode == 0, upgraded.stderr
        create_bounty(chain, "ipfs://during")
        wait_until(lambda: bounty_count(old_web) == 2)
        assert old_indexer.poll() is None, (tmp_path / "old-indexer.log").read_text()

        # 2. The web processes one at a time: the new one answers before the old one stops.
        new_web = start_daphne(env)
        processes.append(new_web.process)
        assert bounty_count(new_web) == 2
        watch.stopped.set()
        watch.join()
        stop(old_web.process)

        # 3. The indexer: the new one stands by until the old one stops, then takes over.
        new_indexer = indexer(PROJECT_DIR, env, tmp_path / "new-indexer.log")
        processes.append(new_indexer)
        assert old_indexer.poll() is None
        stop(old_indexer)
        assert old_indexer.returncode == 0
        create_bounty(chain, "ipfs://after")
        wait_until(lambda: bounty_count(new_web) == 3)
        assert new_indexer.poll() is None, (tmp_path / "new-indexer.log").read_text()
    finally:
        for process in processes:
            stop(process)
    assert watch.statuses and set(watch.statuses) == {200}, watch.statuses
    proof = manage(PROJECT_DIR, env, "verify_mirror")
    assert proof.returncode == 0, proof.stdout + proof.stderr
    assert "equals the contract" in proof.stdout
