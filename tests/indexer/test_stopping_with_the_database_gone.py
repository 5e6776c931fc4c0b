"""SIGTERM stops `run_indexer` within a second, with exit code 0, when its PostgreSQL database is
gone too (docs/operations.md, The indexer): a host that no longer answers (connections accepted,
nothing answered: the queries in flight, the reconnection's attempts), a server that refuses
connections or was killed under the open ones (reset) while the indexer retries reconnecting, and
a database lost mid-commit, mid-write of a bulk backfill's batch, mid-build of the indexes, while
the indexer stands by for the writer lock or as it first connects. Nothing is lost: the next
start goes on from the last batch committed, and the mirror equals the chain, every log applied
once.

The indexer reaches the test's PostgreSQL through a loopback proxy (tests/faulty_proxy.py) that the
test switches to each fault; the test's own connections go around it. SQLite has no server to
lose: the test is PostgreSQL's only."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass

import psycopg
import pytest
from django.db import connection

from indexer.locks import lock_key
from indexer.models import SyncState
from records.models import Bounty, Deployment
from tests.chain import Chain
from tests.faulty_proxy import REFUSE, FaultyProxy
from tests.indexer.conftest import post_bounty, process_env
from tests.indexer.mirror import assert_mirror_equals_chain
from tests.indexer.test_run_indexer_command import PROJECT_DIR, wait_until
from tests.indexer.test_stopping import STOP_WITHIN, _lines

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def proxy() -> Iterator[FaultyProxy]:
    if connection.vendor != "postgresql":
        pytest.skip("cuts the indexer off from its PostgreSQL server (SQLite is a file of the process's own)")
    settings = connection.settings_dict
    with FaultyProxy(settings["HOST"] or "127.0.0.1", int(settings["PORT"] or 5432)) as server:
        yield server


def _said(lines: list[str], text: str, timeout: float = 15) -> None:
    wait_until(lambda: any(text in line for line in lines), timeout=timeout)


def _following(chain: Chain, proxy: FaultyProxy, lines: list[str]) -> None:
    """Following the head, the first sync's index build done (polls every 50 ms)."""
    wait_until(lambda: Bounty.objects.exists())
    _said(lines, "index build: done")


def _no_answer(chain: Chain, proxy: FaultyProxy, lines: list[str]) -> None:
    _following(chain, proxy, lines)
    proxy.blackhole()
    time.sleep(0.5)  # the next poll's queries wait for their answers


def _refused(chain: Chain, proxy: FaultyProxy, lines: list[str]) -> None:
    _following(chain, proxy, lines)
    proxy.refuse()  # the server stopped: the open connections closed, new ones refused
    _said(lines, "the database went away")
    time.sleep(1.5)  # the reconnection's tries, and the waits between them


def _reset_then_no_answer(chain: Chain, proxy: FaultyProxy, lines: list[str]) -> None:
    _following(chain, proxy, lines)
    proxy.blackhole()
    proxy.cut()  # the server died under the open connections; its host answers nothing
    _said(lines, "the database went away")
    time.sleep(0.5)  # a reconnection's attempt waits for the server's handshake


def _reset_then_refused(chain: Chain, proxy: FaultyProxy, lines: list[str]) -> None:
    _following(chain, proxy, lines)
    proxy.refuse()
    proxy.cut()
    _said(lines, "the database went away")
    time.sleep(0.5)


def _no_answer_to_a_commit(chain: Chain, proxy: FaultyProxy, lines: list[str]) -> None:
    _following(chain, proxy, lines)
    met = proxy.blackhole_after(b"COMMIT")  # the server commits; its answer never comes
    post_bounty(chain, "ipfs://committed-unanswered")
    assert met.wait(15)
    time.sleep(0.2)


def _no_answer_at_start(chain: Chain, proxy: FaultyProxy, lines: list[str]) -> None:
    wait_until(lambda: proxy.accepted > 0)  # its first connection waits for the server's handshake
    time.sleep(0.3)


def _no_answer_while_standing_by(chain: Chain, proxy: FaultyProxy, lines: list[str]) -> None:
    _said(lines, "standing by until it stops")
    proxy.blackhole()
    time.sleep(0.5)


@dataclass(frozen=True)
class Fault:
    bring: Callable[[Chain, FaultyProxy, list[str]], None]  # after the indexer's start: the fault
    before: bytes | None = None  # a statement after which the proxy turns into a blackhole, armed before the start
    silent_from_start: bool = False
    writer_lock_held: bool = False  # by another session: the indexer stands by
    env: tuple[tuple[str, str], ...] = ()


FAULTS = {
    "no answer": Fault(_no_answer),
    "refused, while it retries": Fault(_refused),
    "reset, then no answer": Fault(_reset_then_no_answer),
    "reset, then refused": Fault(_reset_then_refused),
    "no answer to a commit": Fault(_no_answer_to_a_commit),
    # The first sync's batch, by range (no blocks left to the realtime phase): the writer thread's COPY.
    "no answer mid-write": Fault(lambda chain, proxy, lines: time.sleep(0.2), before=b"COPY ",
                                 env=(("BOUNTY_LIVE_BLOCKS", "0"),)),
    # The first sync's index build, on sessions of its own.
    "no answer mid-build": Fault(lambda chain, proxy, lines: time.sleep(0.2), before=b"CREATE INDEX"),
    "no answer, standing by": Fault(_no_answer_while_standing_by, writer_lock_held=True),
    "no answer at start": Fault(_no_answer_at_start, silent_from_start=True),
}


def _start(env: dict[str, str]) -> tuple[subprocess.Popen[str], list[str]]:
    process = subprocess.Popen([sys.executable, "manage.py", "run_indexer"], cwd=PROJECT_DIR, env=env,
                               stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    return process, _lines(process)


def _stop(process: subprocess.Popen[str]) -> float:
    """SIGTERM; the seconds to the process's exit. One still running after 5 s is made to print
    every thread's stack (faulthandler) before it is killed."""
    started = time.monotonic()
    process.send_signal(signal.SIGTERM)
    try:
        process.wait(timeout=5)
    except subprocess.TimeoutExpired:
        os.kill(process.pid, signal.SIGABRT)
        process.wait(timeout=10)
    return time.monotonic() - started


def _writer_lock(chain: Chain) -> psycopg.Connection[tuple[object, ...]]:
    """The deployment's writer lock, held by a session of the test's, around the proxy."""
    settings = connection.settings_dict
    session = psycopg.connect(host=settings["HOST"], port=settings["PORT"], user=settings["USER"],
                              dbname=settings["NAME"], autocommit=True)
    session.execute("SELECT pg_advisory_lock(%s)", (lock_key(chain.deployment.chain_id,
                                                            chain.deployment.contract_address),))
    return session


@pytest.mark.parametrize("fault", list(FAULTS))
def test_sigterm_stops_it_within_a_second_with_the_database_gone(chain: Chain, proxy: FaultyProxy,
                                                                 fault: str) -> None:
    settings = connection.settings_dict
    proxied = f"postgres://{settings['USER']}@127.0.0.1:{proxy.port}/{settings['NAME']}"
    case = FAULTS[fault]
    env = process_env(chain, DATABASE_URL=proxied, PYTHONFAULTHANDLER="1", **dict(case.env))
    env.pop("REDIS_URL", None)  # this test is about the database alone
    post_bounty(chain, "ipfs://before-the-fault")
    lock = _writer_lock(chain) if case.writer_lock_held else None
    met = proxy.blackhole_after(case.before) if case.before is not None else None
    if case.silent_from_start:
        proxy.blackhole()
    process, lines = _start(env)
    try:
        if met is not None:
            assert met.wait(30), "".join(lines)
        case.bring(chain, proxy, lines)
        # The fault is in effect as the signal comes: what the indexer or its server sent went
        # nowhere, or its server is gone and it said so.
        assert proxy.swallowed > 0 or (proxy.mode == REFUSE and any("went away" in line for line in lines)), \
            "".join(lines)
        seconds = _stop(process)
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
        if lock is not None:
            lock.close()
    time.sleep(0.1)  # the last lines read
    output = "".join(lines)
    assert process.returncode == 0, output
    assert seconds < STOP_WITHIN, f"stopped after {seconds:.2f} s\n{output}"
    assert "indexer stopped" in output
    assert "Traceback" not in output, output

    # Nothing lost, nothing applied twice: the next start goes on from the last batch committed.
    proxy.forward()
    process, lines = _start(env)
    try:
        _said(lines, "indexing chain")  # it holds the lock (and SIGTERM's handler is in place)
        head = chain.w3.eth.block_number
        wait_until(lambda: SyncState.objects.filter(last_indexed_block__gte=head).exists())
        assert _stop(process) < STOP_WITHIN
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
    assert process.returncode == 0, "".join(lines)
    assert_mirror_equals_chain(chain.board, Deployment.objects.get())
