"""Fixtures shared by the whole suite: a real anvil chain with the reference contracts, and a real
browser (Debian's Chromium driven by Playwright)."""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import signal
from collections.abc import Iterator
from typing import Any

import pytest
import redis
from django.core.cache import cache
from django.db import connections
from playwright.sync_api import Browser, sync_playwright
from web3 import Web3

from contracts.devchain import Anvil, DevDeployment, deploy_reference_contracts, free_port
from tests.chain import Chain

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
CHROMIUM_FLAGS = ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                  "--disable-background-networking", "--disable-component-update", "--disable-sync"]


@pytest.fixture(scope="session")
def anvil_chain() -> Iterator[tuple[Web3, DevDeployment]]:
    """One anvil per test session, with the reference contracts deployed as `devchain` does."""
    anvil = Anvil(port=free_port())
    w3 = anvil.start()
    try:
        yield w3, deploy_reference_contracts(w3, anvil.rpc_url)
    finally:
        anvil.stop()


@pytest.fixture
def chain(anvil_chain: tuple[Web3, DevDeployment]) -> Iterator[Chain]:
    """The deployed chain, reset to its freshly deployed state after each test."""
    w3, deployment = anvil_chain
    snapshot = w3.provider.make_request("evm_snapshot", [])["result"]  # type: ignore[arg-type]
    try:
        yield Chain(w3, deployment)
    finally:
        assert w3.provider.make_request("evm_revert", [snapshot])["result"] is True  # type: ignore[arg-type]


@pytest.fixture(autouse=True)
def _fast_password_hashing(settings: Any) -> None:
    """PBKDF2 at production strength costs a second per test user; tests need no strength."""
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]


@pytest.fixture(autouse=True)
def _redis_database_per_worker(settings: Any, worker_id: str) -> None:
    """Parallel test workers share one Redis server: each gets a database of its own, so that
    one worker's cache.clear() (FLUSHDB) and rate-limit counters never reach another's."""
    if not settings.REDIS_URL:
        return
    number = 1 + (int(worker_id.removeprefix("gw")) if worker_id.startswith("gw") else 0)
    location = re.sub(r"(/\d*)?$", f"/{number}", settings.REDIS_URL.split("?")[0], count=1)
    settings.CACHES = {"default": {**settings.CACHES["default"], "LOCATION": location}}
    layer = settings.CHANNEL_LAYERS["default"]
    settings.CHANNEL_LAYERS = {"default": {**layer, "CONFIG": {**layer["CONFIG"], "hosts": [location]}}}
    cache.clear()  # nothing left from earlier tests: counters of killed servers, cached bodies


@pytest.fixture(autouse=True)
def _spools_of_this_test(monkeypatch: pytest.MonkeyPatch) -> None:
    """No spool of an earlier test (records.spools): a test's records are rolled back, and the next
    test's may have the same data version (the factories number changes without a history)."""
    from records import spools  # after Django's setup: it reads the models

    monkeypatch.setattr(spools, "_registry", spools._Registry())
    monkeypatch.setattr(spools, "_disk", spools._Disk())


def _manage_py_children() -> set[int]:
    """This process's children that run manage.py (an indexer, a server, a delivery worker)."""
    found = set()
    for task in os.listdir(f"/proc/{os.getpid()}/task"):
        try:
            with open(f"/proc/{os.getpid()}/task/{task}/children") as listed:
                pids = [int(pid) for pid in listed.read().split()]
        except OSError:
            continue
        for pid in pids:
            try:
                with open(f"/proc/{pid}/cmdline", "rb") as cmdline:
                    if b"manage.py" in cmdline.read().split(b"\0"):
                        found.add(pid)
            except OSError:
                continue
    return found


@pytest.fixture(autouse=True)
def _no_process_outlives_its_test() -> Iterator[None]:
    """A manage.py process a test started and left running (the test failed before it could stop
    it) is killed: an indexer left behind would hold its deployment's writer lock, and every
    later test of this worker that runs an indexer would wait for it."""
    before = _manage_py_children()
    yield
    for pid in _manage_py_children() - before:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
        with contextlib.suppress(ChildProcessError):
            os.waitpid(pid, 0)


@pytest.fixture
def shared_redis(worker_id: str) -> Iterator[str]:
    """A Redis database of this test worker's own, empty (the counters of earlier runs gone), for
    tests that run several server processes which must share one Redis whatever the run's backend."""
    number = 9 + (int(worker_id.removeprefix("gw")) if worker_id.startswith("gw") else 0)
    url = f"redis://127.0.0.1:6379/{number}"
    client = redis.Redis.from_url(url)
    client.flushdb()
    yield url
    client.flushdb()
    client.close()


@pytest.fixture(autouse=True)
def _secondary_indexes_restored(request: pytest.FixtureRequest, django_db_blocker: Any) -> Iterator[None]:
    """Builds again the record tables' secondary indexes a test's bulk backfill dropped: DDL is
    not undone by the flush between transactional tests, and the next test expects them."""
    yield
    if not request.node.get_closest_marker("django_db") and not {"db", "transactional_db"} & set(request.fixturenames):
        return
    from indexer import indexes

    with django_db_blocker.unblock():
        if indexes.missing_indexes():
            indexes.build()


@pytest.fixture(scope="session")
def django_db_setup(django_db_setup: None, django_db_blocker: Any) -> Iterator[None]:
    """pytest-django's, freeing PostgreSQL's test databases before it drops them: connections that
    other threads (asgiref's executors, the indexer's COPY thread) or test processes left open
    would keep them "being accessed by other users", and the pools' idle connections too."""
    yield
    with django_db_blocker.unblock():
        for connection in connections.all(initialized_only=True):
            if connection.vendor == "postgresql":
                with connection.cursor() as cursor:
                    cursor.execute("SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                                   "WHERE datname = current_database() AND pid <> pg_backend_pid()")
            close_pool = getattr(connection, "close_pool", None)
            if close_pool is not None:
                close_pool()


@pytest.fixture
def browser(django_db_setup: None, monkeypatch: pytest.MonkeyPatch) -> Iterator[Browser]:
    # Playwright's sync API runs an event loop in this thread, which makes Django refuse its
    # (still synchronous) ORM calls here unless told that this is fine.
    monkeypatch.setenv("DJANGO_ALLOW_ASYNC_UNSAFE", "true")
    with sync_playwright() as playwright:
        instance = playwright.chromium.launch(executable_path=CHROMIUM, headless=True, args=CHROMIUM_FLAGS)
        yield instance
        instance.close()
