"""Web processes on streaming replicas (docs/operations.md, "Read replicas"), as an operator runs
them on PostgreSQL with Redis: a primary that logs every statement with the client's name, two
standbys made with `pg_basebackup -R`, one 2 s behind (what it receives held back 1 s by a proxy,
applied 1 s later: `recovery_min_apply_delay`), one applying 8 s late, the indexer on the primary
and one web process on each standby.

Live websocket clients are gap-free and end with exactly the served records; a client that
moves to the process whose replica is further behind resumes with no snapshot and never an
older state; a tag from the fresher process never brings an older body; the primary serves none
of the web processes' record or change-log reads; a stopped standby is set aside within its
bound, /health says so, and reads go on from the primary."""

from __future__ import annotations

import hashlib
import itertools
import re
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
import psycopg
import pytest
from django.db import connection

from tests.chain import Chain
from tests.contracts.scenario import make_bounty, make_submission
from tests.deployment.test_one_history import (
    Follower,
    Listening,
    Service,
    assert_holds_what_is_served,
    some_changes,
)
from tests.faulty_proxy import FaultyProxy
from tests.indexer.test_run_indexer_command import wait_until
from tests.servers import Server, ThrowawayPostgres

pytestmark = pytest.mark.django_db(transaction=True)

WEB = "bounty-web"  # the web processes' application_name (PGAPPNAME), as the primary logs it
CHECK_SECONDS, TIMEOUT_MS = 1, 1_000
SET_ASIDE_WITHIN = CHECK_SECONDS + TIMEOUT_MS / 1000 + 1  # docs/operations.md: a check's period and timeout
# What a web process may still ask the primary (docs/operations.md, "Read replicas"): its replica
# checks (the WAL position, each deployment's newest change, the digest of a change by its seq)
# and its connections' own settings. Never a record, a page, a data version or a stretch of the
# change log.
RECORD_READS = re.compile(r"\brecords_(bounty|submission|dispute|deployment)\b|bulk_from_block|\"seq\" >= ")


def tagged_body(answer: httpx.Response) -> str:
    """The body part of an answer's ETag (before its floor)."""
    return answer.headers["ETag"].removeprefix("W/").strip('"').partition("@")[0]


def floor_of(tag: str) -> dict[int, int]:
    floor = tag.removeprefix("W/").strip('"').partition("@")[2]
    return {int(item.split(":")[0]): int(item.split(":")[1]) for item in floor.split("+") if item}


def head_of(url: str) -> int:
    """The seq of the newest change a server holds; -1 while it cannot be asked (a standby may
    cancel the query when its replay overtakes it)."""
    try:
        with psycopg.connect(url.replace("postgres://", "postgresql://"), connect_timeout=2) as db:
            row = db.execute("SELECT last_seq FROM indexer_syncstate").fetchone()
    except psycopg.Error:
        return -1
    return int(row[0]) if row else 0


def replayed(url: str) -> int:
    """`head_of` a standby, asked again while it cancels the question."""
    for _ in range(50):
        if (seq := head_of(url)) >= 0:
            return seq
        time.sleep(0.1)
    raise AssertionError(f"the standby at {url} did not answer")


def indexed(service: Service) -> int:
    """Waits until the indexer has indexed the chain's newest block; the seq of its newest change."""
    newest = service.chain.w3.eth.block_number

    def done() -> bool:
        with psycopg.connect(service.database_url.replace("postgres://", "postgresql://"), connect_timeout=2) as db:
            row = db.execute("SELECT last_indexed_block FROM indexer_syncstate").fetchone()
        return row is not None and row[0] is not None and int(row[0]) >= newest

    wait_until(done, timeout=60)
    return service.head()


def web_statements(primary: ThrowawayPostgres) -> list[str]:
    """The statements the web processes sent the primary, from its log (log_line_prefix `%a|`)."""
    statements, current = [], None
    for line in (primary.data / "server.log").read_text(errors="replace").splitlines():
        if re.match(r"^[^|\s]*\|", line):
            if current is not None:
                statements.append(current)
            name, _, rest = line.partition("|")
            current = rest if name == WEB and re.search(r"(statement|execute [^:]*):", rest) else None
        elif current is not None:
            current += "\n" + line
    if current is not None:
        statements.append(current)
    return statements


@contextmanager
def web_on(service: Service, replica: ThrowawayPostgres) -> Iterator[Server]:
    web = Service(service.chain, service.logs, service.database_url, {
        **service.extra, "DATABASE_REPLICA_URLS": replica.url, "PGAPPNAME": WEB})
    web.start_web()
    assert web.web is not None
    try:
        yield web.web
    finally:
        web.stop()


def test_web_processes_on_lagging_replicas_never_show_the_lag(chain: Chain, tmp_path: Path) -> None:
    if connection.vendor != "postgresql":
        pytest.skip("streams PostgreSQL servers of its own to standbys")
    with ThrowawayPostgres(log_statement="all", log_line_prefix="%a|") as primary:
        service = Service(chain, tmp_path, primary.url, {
            "BOUNTY_REPLICA_CHECK_SECONDS": str(CHECK_SECONDS),
            "BOUNTY_REPLICA_TIMEOUT_MS": str(TIMEOUT_MS), "BOUNTY_REPLICA_WAIT_MS": "15000",
            "BOUNTY_REPLICA_MAX_LAG_SECONDS": "30"})
        service.migrate()
        # The nearer standby is 2 s behind in two halves: what it receives comes 1 s late (its
        # replication connection through a proxy that holds every byte back), and it applies it
        # 1 s later still. The further one applies 8 s late.
        with (FaultyProxy("127.0.0.1", primary.port) as replication,
              ThrowawayPostgres(standby_of=replication.port, recovery_min_apply_delay="1s") as near,
              ThrowawayPostgres(standby_of=primary.port, recovery_min_apply_delay="8s") as far):
            replication.delay(1.0)
            try:
                service.start_indexer(PGAPPNAME="bounty-indexer")
                with web_on(service, near) as fresher, web_on(service, far) as behind:
                    listening = Listening(fresher)
                    listening.start()
                    make_bounty(chain)
                    head = indexed(service)
                    wait_until(lambda: head_of(far.url) == head, timeout=60)

                    some_changes(chain)
                    # A client on the fresher process follows it to the newest change, then moves
                    # to the process whose replica has not replayed that change yet.
                    mover = Follower()
                    head = indexed(service)
                    mover.follow(fresher, lambda: mover.seq >= head, timeout=60)
                    position = mover.seq
                    assert replayed(far.url) < position
                    make_bounty(chain)
                    head = indexed(service)
                    mover.follow(behind, lambda: mover.seq >= head, timeout=60)
                    assert not mover.snapshot_on_connect()
                    assert all(message["seq"] > position for message in mover.connections[-1]), \
                        "the moved client was sent changes it had already"

                    # A tag from the fresher process, sent to the one behind, never brings an older body.
                    some_changes(chain)
                    head = indexed(service)
                    wait_until(lambda: head_of(near.url) == head, timeout=60)
                    tags = {path: httpx.get(fresher.http(path), timeout=10)
                            for path in ("/bounties/1", "/bounties/2/overview", "/bounties?limit=2", "/submissions")}
                    assert replayed(far.url) < head
                    for path, answer in tags.items():
                        again = httpx.get(behind.http(path), headers={"If-None-Match": answer.headers["ETag"]},
                                          timeout=30)
                        assert again.status_code in (200, 304), (path, again.text)
                        assert all(floor_of(again.headers["ETag"]).get(deployment, -1) >= seq
                                   for deployment, seq in floor_of(answer.headers["ETag"]).items()), path
                        if again.status_code == 304:
                            assert tagged_body(again) == tagged_body(answer), path

                    make_submission(chain, 1)
                    head = indexed(service)
                    wait_until(lambda: head_of(far.url) == head_of(near.url) == head, timeout=60)
                    served = {(kind, record["id"]): record for kind, resource in
                              (("bounty", "bounties"), ("submission", "submissions"), ("dispute", "disputes"))
                              for record in httpx.get(behind.http(f"/{resource}"), timeout=10).json()}
                    mover.follow(behind, lambda: mover.seq >= head, timeout=60)
                    wait_until(lambda: listening.follower.seq >= head, timeout=60)
                    listening.stopped.set()
                    listening.join(30)
                    for follower in (listening.follower, mover):
                        assert follower.gaps() == []
                        assert_holds_what_is_served(follower, served)
                    for path in ("/bounties/1", "/bounties/2/overview", "/bounties?limit=2", "/submissions/1"):
                        for web in (fresher, behind):
                            answer = httpx.get(web.http(path), timeout=10)
                            assert tagged_body(answer) == hashlib.sha256(answer.content).hexdigest()[:32], path

                    # Nothing of the records or the change log was read from the primary.
                    record_reads = [statement for statement in web_statements(primary)
                                    if RECORD_READS.search(statement)]
                    assert record_reads == [], "\n".join(statement[:300] for statement in record_reads)
                    assert metric(behind, 'bounty_replica_fallbacks_total{reason="behind"}') == 0
                    assert metric(fresher, 'bounty_replica_fallbacks_total{reason="behind"}') == 0

                    # The further standby stops under reads in flight: each is read again on the
                    # primary (none fails), and its process sets it aside.
                    with ReadsInFlight(behind) as reads:
                        far.stop()
                        stopped = time.monotonic()
                        wait_until(lambda: replica_status(behind) == "set_aside", timeout=SET_ASIDE_WITHIN + 5)
                        set_aside_after = time.monotonic() - stopped
                    assert reads.statuses and set(reads.statuses) == {200}, sorted(set(reads.statuses))
                    # The fault was in effect: a read met the stopped standby.
                    assert metric(behind, 'bounty_replica_fallbacks_total{reason="failed"}') >= 1
                    health = httpx.get(behind.http("/health"), timeout=10).json()
                    assert health["status"] == "degraded"
                    assert health["replicas"][0]["reason"], health
                    assert replica_status(fresher) == "in_use"
                    listed = httpx.get(behind.http("/bounties"), timeout=10)
                    assert listed.status_code == 200 and len(listed.json()) == len(served_bounties(served))
            finally:
                service.stop()
    assert set_aside_after < SET_ASIDE_WITHIN, f"set aside {set_aside_after:.1f} s after it stopped"


class ReadsInFlight:
    """Threads reading pages no cache holds (each at another offset) from a web process, back to
    back, until the block ends; the status of each answer."""

    def __init__(self, web: Server, threads: int = 4) -> None:
        self.web, self.statuses, self.stopped = web, list[int](), threading.Event()
        self.offsets = itertools.count()
        self.threads = [threading.Thread(target=self._read) for _ in range(threads)]

    def _read(self) -> None:
        with httpx.Client(timeout=30) as client:
            while not self.stopped.is_set():
                offset = next(self.offsets) % 1_000
                self.statuses.append(client.get(self.web.http(f"/bounties?limit=1&offset={offset}")).status_code)

    def __enter__(self) -> ReadsInFlight:
        for thread in self.threads:
            thread.start()
        while len(self.statuses) < 20:
            time.sleep(0.01)
        return self

    def __exit__(self, *exc: object) -> None:
        time.sleep(0.5)  # reads after it was set aside, from the primary
        self.stopped.set()
        for thread in self.threads:
            thread.join(60)


def served_bounties(served: dict[tuple[str, int], dict[str, Any]]) -> list[int]:
    return [record_id for kind, record_id in served if kind == "bounty"]


def replica_status(web: Server) -> str | None:
    try:
        replicas = httpx.get(web.http("/health"), timeout=10).json()["replicas"]
    except (httpx.HTTPError, ValueError, KeyError):
        return None
    return str(replicas[0]["status"])


def metric(web: Server, sample: str) -> float:
    text = httpx.get(web.http("/metrics"), timeout=10).text
    for line in text.splitlines():
        if line.startswith(sample + " "):
            return float(line.split()[-1])
    return 0.0
