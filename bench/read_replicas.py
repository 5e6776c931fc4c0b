"""Web processes on a streaming replica (DATABASE_REPLICA_URLS, records/replicas.py): what still
reaches the primary, and what a lagging replica costs the websocket feed.

    .venv/bin/python bench/read_replicas.py            # about 3 minutes
    .venv/bin/python bench/read_replicas.py --quick    # about 1 minute
        [--lags 0,0.5,1,2] [--changes 24] [--share-seconds 40] [--share-lag 0] [--wait-above-ms N]
        [--clients 2] [--only share|delay] [--seed 7] [--keep]

Everything is the bench's own and started as an operator runs it: an anvil dev chain with the
reference contracts and the demo activity, a Redis (redis-server on a free port: the indexer's
wake-ups reach the web processes through it), a PostgreSQL primary (initdb, a free port) and one
streaming standby of it (`pg_basebackup -R`), both logging every statement with the client's
name and time (log_statement=all, log_line_prefix='%a|%m|'), the indexer on the primary
(`manage.py run_indexer`, PGAPPNAME=bounty-indexer) and daphne web processes with the arguments of
deploy/bounty-web@.service, DEBUG off, the rate limit off, each with a PGAPPNAME of its own. The
standby's lag is set with `recovery_min_apply_delay` (ALTER SYSTEM and a reload, so the same
standby serves every lag).

1. **What reaches the primary.** The standby at `--share-lag` (0: as a streaming replica is on a
   quiet network), a web process on it (BOUNTY_REPLICA_WAIT_MS at its default, 1000), for
   `--share-seconds`: one HTTP client reading single records and overviews (of the IDs the feed
   has announced, the newest most often), pages (following their next_cursor, with filters, a
   search) and the unpaged lists, half of them with If-None-Match from an earlier answer of the
   same URL, and /health every 5 s as a load balancer; three websocket clients following the
   feed, one of them reconnecting with its position every 10 s, another reading each new record
   (`GET /bounties/{id}`, ...) as soon as its message arrives; the chain posting bounties,
   submissions, disputes and resolutions about once a second, which the indexer indexes. The web
   process's statements in both servers' logs over that time are sorted into: **records** (a
   record, a page, a list or a data version: records_bounty / _submission / _dispute /
   _deployment, `bulk_from_block`, a stretch of the change log `"seq" >=`), **checks** (the
   replica checks: pg_current_wal_lsn, pg_is_in_recovery, the sync states' heads, a change's
   digest by seq), **health** and **metrics** (sent while a /health or /metrics request was under
   way: both read the primary by design; on the replica, the feed's reads that fell in those
   moments) and **other** (the connections' own statements: the pool's check, set_config).
   Printed: the counts on each server, the primary's share, the fallback counter
   (bounty_replica_fallbacks_total) from /metrics, the statements of each kind on the primary
   (numbers masked), whether the websocket clients got every change once and in order (no gap,
   no snapshot on a resume) and the statuses of the new records read on their messages. Target:
   on the primary, no record statement beyond the fall-backs counted.
2. **The feed's delay over a lagging replica.** Three web processes at once, each with
   `--clients` websocket clients: `base` (no replica: the baseline, measured in the same
   windows), `w1000` (the replica, BOUNTY_REPLICA_WAIT_MS=1000, the default) and `w<above>`
   (the replica, a wait above every lag: `--wait-above-ms`, by default the largest lag + 1 s).
   For each lag L of `--lags`, the standby is set to apply L late and caught up, then the chain
   posts `--changes` bounties and submissions at random pauses of 0.6-1.4 s. Each created
   record's message is timed at every client from the indexer's commit (the instant the indexer's
   wake-up for it crossed Redis: the bench listens on the feeds' channel-layer group) and from
   the chain transaction (the bench's call returning: anvil mines on receipt). Printed per L and
   process: median and 90th percentile, the median minus L, the ratio of the median to the
   baseline's in the same window, the fall-backs counted (by reason), the record statements
   each replica process sent the primary meanwhile, and how many messages reached their client
   together with (within 10 ms of) a change of a later commit: held back until the feed could
   read that later change (the slowest such message is printed with the change it came with).

The last line is `BENCH_SUMMARY {...}` with every figure. A step that fails is printed and the
run ends with status 1 after cleaning up; `--keep` keeps the servers' logs (their folder is
printed). Figures move with the machine's load: compare within a run.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import math
import os
import random
import re
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import traceback
import urllib.parse
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import httpx  # noqa: E402
import orjson  # noqa: E402
import psycopg  # noqa: E402
from websockets.exceptions import ConnectionClosed  # noqa: E402
from websockets.sync.client import connect  # noqa: E402

from contracts.demo import seed_demo_activity  # noqa: E402
from contracts.devchain import Anvil, DevChainError, anvil_binary, deploy_reference_contracts, free_port  # noqa: E402
from tests.chain import Chain  # noqa: E402
from tests.contracts.scenario import (  # noqa: E402
    BOUNTY_HASH,
    BOUNTY_URI,
    CLAIMANT,
    DISPUTE_HASH,
    DISPUTE_URI,
    DURATION,
    GROUT,
    MAX_ALLOWANCE,
    OWNER,
    POSTER,
    REWARD,
    SUBMISSION_HASH,
    SUBMISSION_URI,
    _new_id,
    allow_pulls,
    board,
)
from tests.servers import Log, Server, ThrowawayPostgres, ThrowawayRedis, stop  # noqa: E402

PYTHON = sys.executable
DAPHNE = str(Path(PYTHON).parent / "daphne")
SECRET_KEY = "read-replicas-bench-secret-key-0123456789-abcdefghijklmnopqrstuvwxyz"
WS_MAX_MESSAGE_BYTES = "4096"  # deploy/bounty-web@.service's Environment= for daphne's flag
CHANGES_GROUP = "records.changes"  # records.changes.CHANGES_GROUP: the feeds' wake-ups
DEFAULT_WAIT_MS = 1000  # BOUNTY_REPLICA_WAIT_MS's default (bountysite/settings.py)
HEALTH_EVERY = 5.0  # seconds between a load balancer's /health requests in part 1
RESUME_EVERY = 10.0  # seconds between the reconnections (with the position) of one part-1 client
LOG_PREFIX = "%a|%m|"
RESOURCES = {"bounty": "bounties", "submission": "submissions", "dispute": "disputes"}

# tests/deployment/test_read_replicas.py's RECORD_READS: a record, a page, a data version, a
# stretch of the change log.
RECORD_READS = re.compile(r"\brecords_(bounty|submission|dispute|deployment)\b|bulk_from_block|\"seq\" >= ")
# records/replicas.py's checks: the primary's WAL position and heads (_primary_state), a change's
# digest by seq (_digest_at), a replica's recovery state and heads (_check).
CHECKS = re.compile(
    r"pg_current_wal_lsn|pg_is_in_recovery|pg_last_wal_replay_lsn"
    # every deployment's head (_heads): its sync state's columns, unfiltered
    r"|^SELECT (\"indexer_syncstate\"\.\"\w+\"( AS \"\w+\")?(, )?)+ FROM \"indexer_syncstate\"\s*$"
    r"|^SELECT \"indexer_changelogentry\"\.\"digest\"( AS \"digest\")? FROM \"indexer_changelogentry\" WHERE ")
LINE = re.compile(r"^([^|\n]*)\|(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\.\d{3}) UTC\|(.*)$")
STATEMENT = re.compile(r"^LOG:\s+(?:statement|execute [^:]*): (.*)$", re.S)
CATEGORIES = ("records", "checks", "health", "metrics", "other")


# ---------------------------------------------------------------------------- the servers' logs


@dataclass(frozen=True)
class Statement:
    app: str
    at: float  # seconds since the epoch (the server's %m, UTC)
    text: str


def statements(log: Path) -> list[Statement]:
    """Every statement a PostgreSQL server logged (log_statement=all, LOG_PREFIX)."""
    found: list[Statement] = []
    current: list[str] | None = None
    header: tuple[str, float] | None = None

    def close() -> None:
        if current is not None and header is not None and (match := STATEMENT.match("\n".join(current))):
            found.append(Statement(header[0], header[1], match[1]))

    for line in log.read_text(errors="replace").splitlines():
        if match := LINE.match(line):
            close()
            header = (match[1], datetime.strptime(match[2], "%Y-%m-%d %H:%M:%S.%f").replace(tzinfo=UTC).timestamp())
            current = [match[3]]
        elif current is not None:
            current.append(line)
    close()
    return found


def category(statement: Statement, windows: dict[str, list[tuple[float, float]]]) -> str:
    if CHECKS.search(statement.text):
        return "checks"
    for name, spans in windows.items():  # sent while a /health or /metrics request was under way
        if any(start - 0.002 <= statement.at <= end + 0.002 for start, end in spans):
            return name
    return "records" if RECORD_READS.search(statement.text) else "other"


def masked(text: str) -> str:
    text = re.sub(r"'(?:[^']|'')*'", "'…'", " ".join(text.split()))
    return re.sub(r"\b\d+\b", "N", text)


def sorted_statements(found: Iterable[Statement], app: str, start: float, end: float,
                      windows: dict[str, list[tuple[float, float]]]) -> dict[str, list[Statement]]:
    sorted_: dict[str, list[Statement]] = {name: [] for name in CATEGORIES}
    for statement in found:
        if statement.app == app and start <= statement.at <= end:
            sorted_[category(statement, windows)].append(statement)
    return sorted_


# ---------------------------------------------------------------------------- the service


@dataclass
class Setup:
    anvil: Anvil
    chain: Chain
    redis: ThrowawayRedis
    primary: ThrowawayPostgres
    standby: ThrowawayPostgres
    logs: Path
    base_env: dict[str, str]
    indexer: subprocess.Popen[bytes] | None = None
    servers: list[Server] = field(default_factory=list)

    def env(self, **extra: str) -> dict[str, str]:
        return {**self.base_env, **extra}

    def web(self, app: str, replica: bool, wait_ms: int | None = None) -> Server:
        """A daphne as deploy/bounty-web@.service starts it, named `app` in the servers' logs."""
        extra = {"PGAPPNAME": app}
        if replica:
            extra["DATABASE_REPLICA_URLS"] = self.standby.url
        if wait_ms is not None:
            extra["BOUNTY_REPLICA_WAIT_MS"] = str(wait_ms)
        port = free_port()
        command = [DAPHNE, "-v", "0", "--bind", "127.0.0.1", "--port", str(port), "--ping-interval", "20",
                   "--ping-timeout", "20", "--websocket_timeout", "-1", "--websocket-max-message-size",
                   WS_MAX_MESSAGE_BYTES, "bountysite.asgi:application"]
        process = subprocess.Popen(command, cwd=ROOT, env=self.env(**extra), stdout=subprocess.DEVNULL,
                                   stderr=subprocess.PIPE)
        assert process.stderr is not None
        server = Server(process, port, Log(process.stderr))
        self.servers.append(server)  # stopped at the end, however it goes
        deadline = time.monotonic() + 60
        while True:
            if process.poll() is not None or time.monotonic() > deadline:
                stop(process)
                raise RuntimeError(f"daphne {app} did not start listening (exit {process.returncode}):\n"
                                   + "\n".join(server.log().splitlines()[-30:]))
            try:
                socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
                return server
            except OSError:
                time.sleep(0.05)


def pg(url: str) -> str:
    return url.replace("postgres://", "postgresql://")


def head(url: str) -> int:
    """The newest change's seq as the database at `url` holds it (-1 while it cannot say)."""
    try:
        with psycopg.connect(pg(url), connect_timeout=2, application_name="bench") as db:
            row = db.execute("SELECT max(last_seq) FROM indexer_syncstate").fetchone()
    except psycopg.Error:
        return -1
    return int(row[0]) if row and row[0] is not None else 0


def indexed_block(url: str) -> int:
    try:
        with psycopg.connect(pg(url), connect_timeout=2, application_name="bench") as db:
            row = db.execute("SELECT max(last_indexed_block) FROM indexer_syncstate").fetchone()
    except psycopg.Error:
        return -1
    return int(row[0]) if row and row[0] is not None else -1


def wait_until(done: Callable[[], bool], timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not done():
        if time.monotonic() > deadline:
            raise RuntimeError(f"{what}: not within {timeout:g} s")
        time.sleep(0.02)


def indexed(setup: Setup, timeout: float = 60) -> int:
    """Waits until the indexer has indexed the chain's head; the newest change's seq."""
    newest = setup.chain.w3.eth.block_number
    wait_until(lambda: indexed_block(setup.primary.url) >= newest, timeout, "the indexer did not catch up")
    return head(setup.primary.url)


def replayed(setup: Setup, timeout: float = 60) -> None:
    """Waits until the standby holds the primary's newest change."""
    newest = head(setup.primary.url)
    wait_until(lambda: head(setup.standby.url) >= newest, timeout, "the standby did not replay the primary")


def set_lag(standby: ThrowawayPostgres, seconds: float) -> None:
    """The standby applies each commit `seconds` after the primary made it (recovery_min_apply_delay)."""
    wanted = str(round(seconds * 1000))
    with psycopg.connect(pg(standby.url), autocommit=True, application_name="bench") as db:
        db.execute(f"ALTER SYSTEM SET recovery_min_apply_delay = '{wanted}ms'")
        db.execute("SELECT pg_reload_conf()")
        deadline = time.monotonic() + 10
        while True:
            row = db.execute("SELECT setting FROM pg_settings WHERE name = 'recovery_min_apply_delay'").fetchone()
            if row is not None and row[0] == wanted:
                return
            if time.monotonic() > deadline:
                raise RuntimeError(f"the standby did not take recovery_min_apply_delay = {wanted} ms")
            time.sleep(0.05)


def fallbacks(server: Server) -> dict[str, float]:
    """bounty_replica_fallbacks_total by reason, from the process's /metrics."""
    text = httpx.get(server.http("/metrics"), timeout=10).text
    found: dict[str, float] = {}
    for line in text.splitlines():
        if match := re.match(r'^bounty_replica_fallbacks_total\{reason="([^"]+)"\} (\S+)$', line):
            found[match[1]] = float(match[2])
    return found


def delta(after: dict[str, float], before: dict[str, float]) -> dict[str, int]:
    return {reason: int(value - before.get(reason, 0)) for reason, value in after.items()
            if value - before.get(reason, 0)}


def warnings_of(server: Server) -> list[str]:
    """What a daphne wrote (LOG_LEVEL=WARNING), one line a record, most frequent first."""
    lines = [line for line in server.log().splitlines() if line.strip()]
    counts = Counter(re.sub(r"\d+", "N", line)[:200] for line in lines if not line.startswith((" ", "\t")))
    return [f"{count} x {line}" for line, count in counts.most_common(8)]


# ---------------------------------------------------------------------------- the clients


class Announcements(threading.Thread):
    """The indexer's wake-ups as the web processes' feeds receive them (the channel layer's group,
    over the bench's Redis): (arrival, seq) each, the instant of the commit to within Redis's
    round trip."""

    def __init__(self, redis_url: str) -> None:
        super().__init__(daemon=True)
        self.redis_url = redis_url
        self.seen: list[tuple[float, int]] = []
        self.errors: list[str] = []
        self.ready = threading.Event()

    def run(self) -> None:
        asyncio.run(self._listen())

    async def _listen(self) -> None:
        from channels_redis.core import RedisChannelLayer

        # A read timeout past the layer's 5 s BZPOPMIN: an idle channel is no error.
        layer = RedisChannelLayer(hosts=[{"address": self.redis_url, "socket_timeout": 30}])
        channel = await layer.new_channel()
        await layer.group_add(CHANGES_GROUP, channel)
        self.ready.set()
        while True:
            try:
                message = await layer.receive(channel)
            except Exception as error:  # said, and listened to again
                self.errors.append(f"{type(error).__name__}: {error}")
                await asyncio.sleep(0.1)
                await layer.group_add(CHANGES_GROUP, channel)
                continue
            if isinstance(message.get("seq"), int):
                self.seen.append((time.time(), int(message["seq"])))

    def commit_of(self, seq: int) -> float | None:
        """When the commit that wrote `seq` was announced: the first wake-up for it or later."""
        for at, announced in list(self.seen):
            if announced >= seq:
                return at
        return None


@dataclass
class Arrival:
    at: float
    type: str
    seq: int
    record_id: int | None


class Follower(threading.Thread):
    """A websocket client of /ws/events: its snapshot, then live messages, each stamped on arrival;
    with `resume_every`, it reconnects that often with its position (`?since=`)."""

    def __init__(self, server: Server, name: str, resume_every: float | None = None, fetch: bool = False) -> None:
        super().__init__(daemon=True, name=name)
        self.server, self.resume_every, self.fetch = server, resume_every, fetch
        self.fetched: Counter[int] = Counter()  # with `fetch`: each new record read as soon as it is announced
        self.stopped, self.ready = threading.Event(), threading.Event()
        self.arrivals: list[Arrival] = []
        self.position: str | None = None
        self.seq = -1
        self.gaps: list[tuple[int, int]] = []
        self.connects = self.snapshots = self.resumes = self.resume_snapshots = 0
        self.errors: list[str] = []

    def _fetch(self, kind: str, record_id: int) -> None:
        """What a front end does on a new record's message: reads it (no If-None-Match: none yet)."""
        try:
            self.fetched[httpx.get(self.server.http(f"/{RESOURCES[kind]}/{record_id}"), timeout=30).status_code] += 1
        except httpx.HTTPError as error:
            self.errors.append(f"{type(error).__name__}: {error}"[:200])

    def created(self) -> dict[tuple[str, int], Arrival]:
        return {(arrival.type, arrival.record_id): arrival for arrival in self.arrivals
                if arrival.type.endswith(".created") and arrival.record_id is not None}

    def run(self) -> None:
        while not self.stopped.is_set():
            resumed = self.position is not None
            query = "?since=" + urllib.parse.quote(self.position, safe="") if self.position else ""
            try:
                with connect(self.server.url(query), open_timeout=10, max_size=None) as ws:
                    self.connects += 1
                    self.resumes += resumed
                    opened, first, expected = time.monotonic(), True, (self.seq + 1 if resumed else None)
                    while not self.stopped.is_set():
                        if (self.resume_every and self.position is not None
                                and time.monotonic() - opened > self.resume_every):
                            break
                        try:
                            text = ws.recv(timeout=0.2)
                        except TimeoutError:
                            continue
                        now = time.time()
                        message = orjson.loads(text)
                        kind = message.get("type", "")
                        if message.get("snapshot"):
                            if first and resumed:
                                self.resume_snapshots += 1
                        elif kind == "snapshot.complete":
                            self.snapshots += 1
                            self.seq, self.position, expected = message["seq"], message["position"], message["seq"] + 1
                            self.ready.set()
                        elif kind == "resync":
                            expected = None
                        elif "seq" in message:
                            if expected is not None and message["seq"] != expected:
                                self.gaps.append((expected, message["seq"]))
                            expected = message["seq"] + 1
                            self.seq, self.position = message["seq"], message["position"]
                            payload = message.get("payload") or {}
                            self.arrivals.append(Arrival(now, kind, message["seq"], payload.get("id")))
                            self.ready.set()
                            if self.fetch and kind.endswith(".created") and payload.get("id") is not None:
                                self._fetch(kind.partition(".")[0], payload["id"])
                        first = False
            except (ConnectionClosed, OSError, TimeoutError) as error:
                self.errors.append(f"{type(error).__name__}: {error}"[:200])
                time.sleep(0.5)


class Reader(threading.Thread):
    """One HTTP client reading as the front ends do: records, overviews, pages (and their next
    pages), filters, a search and the unpaged lists, half of them with If-None-Match from an
    earlier answer of the same URL; /health every HEALTH_EVERY seconds. The requests go one at a
    time, so what the process sends the primary during /health is /health's."""

    def __init__(self, server: Server, counts: dict[str, int], seed: int) -> None:
        super().__init__(daemon=True)
        self.server, self.counts, self.random = server, counts, random.Random(seed)
        self.stopped = threading.Event()
        self.tags: dict[str, str] = {}
        self.cursors: dict[str, str] = {}
        self.statuses: Counter[int] = Counter()
        self.kinds: Counter[str] = Counter()
        self.conditional = self.not_modified = 0
        self.windows: dict[str, list[tuple[float, float]]] = {"health": [], "metrics": []}
        self.errors: list[str] = []

    def path(self) -> tuple[str, str]:
        r, counts = self.random, self.counts
        resource = r.choice(["bounties", "bounties", "submissions", "disputes"])
        count = counts[resource]
        pick = r.random()
        if pick < 0.30:
            recent = r.random() < 0.6  # the newest records are read most
            return "record", f"/{resource}/{r.randint(max(1, count - 5), count) if recent else r.randint(1, count)}"
        if pick < 0.50:
            return "overview", f"/{resource}/{r.randint(1, count)}/overview"
        if pick < 0.80:
            page = r.choice([f"/{resource}?limit=5", f"/{resource}?limit=20&sort=created_at",
                             "/bounties?status=open&limit=10", "/submissions?bounty_id=1&limit=10",
                             "/bounties?q=translate&limit=10"])
            if page in self.cursors and r.random() < 0.5:
                return "page", f"{page}&cursor={self.cursors[page]}"
            return "page", page
        return "list", f"/{resource}"

    def run(self) -> None:
        with httpx.Client(timeout=30) as client:
            last_health = 0.0
            while not self.stopped.is_set():
                try:
                    if time.monotonic() - last_health >= HEALTH_EVERY:
                        last_health = time.monotonic()
                        start = time.time()
                        answer = client.get(self.server.http("/health"))
                        self.windows["health"].append((start, time.time()))
                        self.statuses[answer.status_code] += 1
                        self.kinds["health"] += 1
                        continue
                    kind, path = self.path()
                    headers = {}
                    if path in self.tags and self.random.random() < 0.5:
                        headers["If-None-Match"] = self.tags[path]
                        self.conditional += 1
                    answer = client.get(self.server.http(path), headers=headers)
                    self.statuses[answer.status_code] += 1
                    self.kinds[kind] += 1
                    self.not_modified += answer.status_code == 304
                    if "ETag" in answer.headers:
                        self.tags[path] = answer.headers["ETag"]
                    if kind == "page" and answer.status_code == 200:
                        following = answer.json().get("next_cursor")
                        base = path.split("&cursor=")[0]
                        if following:
                            self.cursors[base] = following
                        else:
                            self.cursors.pop(base, None)
                except (httpx.HTTPError, ValueError) as error:
                    self.errors.append(f"{type(error).__name__}: {error}"[:200])
                time.sleep(self.random.uniform(0.01, 0.04))

    def health(self) -> dict[str, Any]:
        """/health, its time noted (it reads the primary by design)."""
        start = time.time()
        try:
            return dict(httpx.get(self.server.http("/health"), timeout=10).json())
        finally:
            self.windows["health"].append((start, time.time()))

    def scrape(self) -> dict[str, float]:
        """/metrics, its time noted (the process reads the primary for it)."""
        start = time.time()
        try:
            return fallbacks(self.server)
        finally:
            self.windows["metrics"].append((start, time.time()))


# ---------------------------------------------------------------------------- the chain


@dataclass
class Made:
    mined: float  # when the bench's call returned: anvil mines a transaction on receipt
    type: str  # the message it brings: bounty.created, submission.created, dispute.created, ...
    record_id: int


class Activity:
    """Transactions of the reference contracts, as their users send them."""

    def __init__(self, chain: Chain, seed: int) -> None:
        self.chain, self.random = chain, random.Random(seed)
        self.bounties: list[int] = []
        self.submissions: list[int] = []
        self.disputes: list[int] = []
        for party in (POSTER, CLAIMANT, GROUT):
            allow_pulls(self.chain, party, MAX_ALLOWANCE // 2)

    def _send(self, call: Any, party: int) -> tuple[float, Any]:
        tx = call.transact({"from": self.chain.account(party)})
        mined = time.time()
        receipt = self.chain.w3.eth.wait_for_transaction_receipt(tx, poll_latency=0.01)
        if receipt["status"] != 1:
            raise RuntimeError(f"a transaction reverted: {receipt}")
        return mined, receipt

    def bounty(self) -> Made:
        mined, receipt = self._send(board(self.chain).functions.createBounty(BOUNTY_URI, BOUNTY_HASH, REWARD,
                                                                             DURATION), POSTER)
        self.bounties.append(_new_id(self.chain, receipt, "BountyCreated"))
        return Made(mined, "bounty.created", self.bounties[-1])

    def submission(self) -> Made:
        bounty = self.bounties[-1] if self.bounties else self.bounty().record_id
        mined, receipt = self._send(board(self.chain).functions.submit(bounty, SUBMISSION_URI, SUBMISSION_HASH),
                                    CLAIMANT)
        self.submissions.append(_new_id(self.chain, receipt, "SubmissionCreated"))
        return Made(mined, "submission.created", self.submissions[-1])

    def dispute(self) -> Made:
        submission = self.submissions[-1] if self.submissions else self.submission().record_id
        mined, receipt = self._send(board(self.chain).functions.dispute(submission, DISPUTE_URI, DISPUTE_HASH), GROUT)
        self.disputes.append(_new_id(self.chain, receipt, "DisputeCreated"))
        return Made(mined, "dispute.created", self.disputes[-1])

    def resolution(self) -> Made | None:
        if not self.disputes:
            return None
        dispute = self.disputes.pop()
        mined, _ = self._send(board(self.chain).functions.resolveDispute(dispute, self.random.random() < 0.5), OWNER)
        return Made(mined, "dispute.updated", dispute)

    def mixed(self) -> Made | None:
        """One of a realistic mix: new bounties, submissions, disputes and their resolutions."""
        pick = self.random.random()
        if pick < 0.35 or not self.bounties:
            return self.bounty()
        if pick < 0.75:
            return self.submission()
        if pick < 0.9:
            return self.dispute()
        return self.resolution()


def counts_of(chain: Chain) -> dict[str, int]:
    functions = board(chain).functions
    return {"bounties": int(functions.bountyCount().call()), "submissions": int(functions.submissionCount().call()),
            "disputes": int(functions.disputeCount().call())}


# ---------------------------------------------------------------------------- part 1


def share(setup: Setup, args: argparse.Namespace) -> dict[str, Any]:
    print(f"\n== 1. What reaches the primary: standby {args.share_lag:g} s behind, "
          f"BOUNTY_REPLICA_WAIT_MS {DEFAULT_WAIT_MS} (default), {args.share_seconds:g} s of reads; "
          f"load average {os.getloadavg()[0]:.1f}", flush=True)
    set_lag(setup.standby, args.share_lag)
    replayed(setup)
    app = "bounty-web"
    start = time.time()
    web = setup.web(app, replica=True)
    counts = counts_of(setup.chain)
    followers = [Follower(web, f"share-{n}", resume_every=RESUME_EVERY if n == 0 else None, fetch=n == 1)
                 for n in range(3)]
    for follower in followers:
        follower.start()
    for follower in followers:
        if not follower.ready.wait(30):
            raise RuntimeError(f"{follower.name} got no snapshot within 30 s: {follower.errors[-3:]}")
    reader = Reader(web, counts, seed=args.seed)
    reader.start()
    activity = Activity(setup.chain, seed=args.seed)
    made: list[Made] = []
    end_at = time.monotonic() + args.share_seconds
    while time.monotonic() < end_at:
        step = activity.mixed()
        if step is not None:
            made.append(step)
        time.sleep(random.uniform(0.6, 1.4))
        for kind, resource in RESOURCES.items():  # the reader learns the new IDs from the feed, as a front end
            ids = [arrival.record_id for arrival in list(followers[2].arrivals)
                   if arrival.type == f"{kind}.created" and arrival.record_id is not None]
            reader.counts[resource] = max([reader.counts[resource], *ids])
    newest = indexed(setup)
    wait_until(lambda: all(follower.seq >= newest for follower in followers), 30 + args.share_lag,
               "the websocket clients did not receive every change")
    reader.stopped.set()
    reader.join(30)
    for follower in followers:
        follower.stopped.set()
    for follower in followers:
        follower.join(5)
    health = reader.health()
    metrics = reader.scrape()
    end = time.time()
    time.sleep(0.5)  # the servers' last lines in their logs
    on_primary = sorted_statements(statements(setup.primary.data / "server.log"), app, start, end, reader.windows)
    on_replica = sorted_statements(statements(setup.standby.data / "server.log"), app, start, end, reader.windows)
    stop(web.process)

    primary_total = sum(len(found) for found in on_primary.values())
    replica_total = sum(len(found) for found in on_replica.values())
    total = primary_total + replica_total
    records_total = len(on_primary["records"]) + len(on_replica["records"])
    fallback_total = int(sum(metrics.values()))
    requests = sum(reader.kinds.values())
    print(f"{requests} requests ({dict(reader.kinds)}), statuses {dict(reader.statuses)}, "
          f"{reader.conditional} with If-None-Match ({reader.not_modified} answered 304); "
          f"{len(made)} transactions on the chain, changes up to seq {newest}; "
          f"{len(followers)} websocket clients")
    print(f"{'statements':<12}{'primary':>10}{'replica':>10}")
    for name in CATEGORIES:
        print(f"{name:<12}{len(on_primary[name]):>10}{len(on_replica[name]):>10}")
    print(f"{'total':<12}{primary_total:>10}{replica_total:>10}")
    primary_share = primary_total / total if total else 0.0
    records_share = len(on_primary["records"]) / records_total if records_total else 0.0
    print(f"share on the primary: {primary_share:.1%} of the web process's statements; record statements "
          f"{len(on_primary['records'])} of {records_total} ({records_share:.1%}); fallbacks counted "
          f"{metrics or 'none'}")
    for name in CATEGORIES:
        found = Counter(masked(statement.text) for statement in on_primary[name])
        if found:
            print(f"  on the primary, {name}:")
            for text, count in found.most_common(6 if name != "records" else 20):
                print(f"    {count:>5} x {text[:300]}")
    feed_ok = all(not follower.gaps and not follower.resume_snapshots for follower in followers)
    print(f"websocket clients: connects {[f.connects for f in followers]}, resumes {[f.resumes for f in followers]}, "
          f"snapshots on a resume {[f.resume_snapshots for f in followers]}, gaps {[f.gaps for f in followers]}, "
          f"errors {[len(f.errors) for f in followers]}; each new record read on its message: "
          f"{dict(followers[1].fetched)}; /health {health.get('status')}, replicas "
          f"{[(r['status'], r['lag_seconds']) for r in health.get('replicas') or []]}")
    met = len(on_primary["records"]) <= fallback_total
    print(f"target: on the primary no record statement beyond the fall-backs counted ({fallback_total}): "
          f"{'met' if met else 'NOT met'}")
    for line in warnings_of(web):
        print(f"  daphne: {line}")
    if reader.errors:
        print(f"  reader errors: {reader.errors[:5]}")
    return {
        "share_lag_s": args.share_lag, "seconds": args.share_seconds, "requests": requests,
        "requests_by_kind": dict(reader.kinds), "statuses": {str(k): v for k, v in reader.statuses.items()},
        "conditional": reader.conditional, "not_modified": reader.not_modified, "transactions": len(made),
        "primary": {name: len(found) for name, found in on_primary.items()},
        "replica": {name: len(found) for name, found in on_replica.items()},
        "primary_share": round(primary_share, 4), "records_share": round(records_share, 4),
        "fallbacks": metrics, "feed_exact": feed_ok, "met": met,
        "new_records_read_on_their_message": {str(k): v for k, v in followers[1].fetched.items()},
        "records_on_primary": [masked(statement.text)[:300] for statement in on_primary["records"][:20]],
    }


# ---------------------------------------------------------------------------- part 2


def quantile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[max(0, math.ceil(q * len(ordered)) - 1)]


def delays(setup: Setup, args: argparse.Namespace, announcements: Announcements) -> list[dict[str, Any]]:
    above = args.wait_above_ms
    print(f"\n== 2. The feed's delay over a lagging replica: {args.changes} changes per lag, {args.clients} "
          f"websocket clients per process; load average {os.getloadavg()[0]:.1f}", flush=True)
    processes = {"base": setup.web("bounty-base", replica=False),
                 f"w{DEFAULT_WAIT_MS}": setup.web(f"bounty-w{DEFAULT_WAIT_MS}", replica=True, wait_ms=DEFAULT_WAIT_MS),
                 f"w{above}": setup.web(f"bounty-w{above}", replica=True, wait_ms=above)}
    followers = {name: [Follower(server, f"{name}-{n}") for n in range(args.clients)]
                 for name, server in processes.items()}
    for group in followers.values():
        for follower in group:
            follower.start()
    for group in followers.values():
        for follower in group:
            if not follower.ready.wait(30):
                raise RuntimeError(f"{follower.name} got no snapshot within 30 s: {follower.errors[-3:]}")
    activity = Activity(setup.chain, seed=args.seed + 1)
    rows: list[dict[str, Any]] = []
    try:
        for lag in args.lags:
            set_lag(setup.standby, lag)
            replayed(setup, timeout=60 + lag)
            time.sleep(1.0)  # the processes' feeds read up to it
            before = {name: fallbacks(server) for name, server in processes.items() if name != "base"}
            start = time.time()
            made: list[Made] = []
            for n in range(args.changes):
                made.append(activity.bounty() if n % 2 == 0 or not activity.bounties else activity.submission())
                time.sleep(random.uniform(0.6, 1.4))
            newest = indexed(setup)
            wait_until(lambda: all(f.seq >= newest for group in followers.values() for f in group),  # noqa: B023
                       30 + 2 * lag, f"lag {lag:g} s: the websocket clients did not receive every change")
            end = time.time()
            after = {name: fallbacks(server) for name, server in processes.items() if name != "base"}
            time.sleep(0.3)
            found = statements(setup.primary.data / "server.log")
            row: dict[str, Any] = {"lag_s": lag, "changes": len(made), "processes": {}}
            for name, group in followers.items():
                from_commit, from_tx, missing, held = [], [], 0, 0
                slowest: dict[str, Any] | None = None
                for follower in group:
                    arrived = follower.created()
                    for step in made:
                        arrival = arrived.get((step.type, step.record_id))
                        committed = announcements.commit_of(arrival.seq) if arrival else None
                        if arrival is None or committed is None:
                            missing += 1
                            continue
                        from_commit.append(arrival.at - committed)
                        from_tx.append(arrival.at - step.mined)
                        later = held_back(follower, arrival, committed, announcements)
                        held += later is not None
                        if slowest is None or arrival.at - committed > slowest["delay_s"]:
                            slowest = {"seq": arrival.seq, "delay_s": round(arrival.at - committed, 3),
                                       "delivered_with_seq": later[0] if later else None,
                                       "whose_commit_came_s_later": round(later[1] - committed, 3) if later else None}
                app = "bounty-" + name
                on_primary = sorted_statements(found, app, start, end, {}) if name != "base" else None
                row["processes"][name] = {
                    "samples": len(from_commit), "missing": missing, "held_for_a_later_commit": held,
                    "slowest": slowest, "delays_s": sorted(round(value, 3) for value in from_commit),
                    "median_s": round(statistics.median(from_commit), 3) if from_commit else None,
                    "p90_s": round(quantile(from_commit, 0.9), 3) if from_commit else None,
                    "max_s": round(max(from_commit), 3) if from_commit else None,
                    "tx_median_s": round(statistics.median(from_tx), 3) if from_tx else None,
                    "tx_p90_s": round(quantile(from_tx, 0.9), 3) if from_tx else None,
                    "fallbacks": delta(after[name], before[name]) if name in after else None,
                    "primary_record_statements": len(on_primary["records"]) if on_primary else None,
                    "primary_statements": sum(map(len, on_primary.values())) if on_primary else None,
                }
            base = row["processes"]["base"]["median_s"]
            for figures in row["processes"].values():
                median = figures["median_s"]
                figures["median_minus_lag_s"] = None if median is None else round(median - lag, 3)
                figures["ratio_to_base"] = round(median / base, 2) if median is not None and base else None
            rows.append(row)
            print_row(row)
    finally:
        for group in followers.values():
            for follower in group:
                follower.stopped.set()
        for group in followers.values():
            for follower in group:
                follower.join(5)
        for server in processes.values():
            stop(server.process)
    gaps = {follower.name: follower.gaps for group in followers.values() for follower in group if follower.gaps}
    errors = {follower.name: follower.errors[:3] for group in followers.values() for follower in group
              if follower.errors}
    print(f"websocket clients: gaps {gaps or 'none'}, connection errors {errors or 'none'}")
    for name, server in processes.items():
        for line in warnings_of(server):
            print(f"  daphne {name}: {line}")
    return rows


def held_back(follower: Follower, arrival: Arrival, committed: float,
              announcements: Announcements) -> tuple[int, float] | None:
    """The newest change of a later commit that the message reached the client with (within 10 ms),
    and when that commit was announced: the feed held the message until it could read that change."""
    found = None
    for other in follower.arrivals:
        if other.seq > arrival.seq and abs(other.at - arrival.at) < 0.01:
            later = announcements.commit_of(other.seq)
            if later is not None and later > committed + 0.05:
                found = (other.seq, later)
    return found


def print_row(row: dict[str, Any]) -> None:
    lag = row["lag_s"]
    print(f"-- lag {lag:g} s, {row['changes']} changes: seconds from the indexer's commit to the client (tx: from "
          f"the chain transaction; held: messages held back for a later commit's change)")
    print(f"   {'process':<8}{'median':>9}{'p90':>9}{'max':>9}{'med-L':>9}{'x base':>8}{'tx med':>9}{'tx p90':>9}"
          f"{'held':>6}{'missing':>8}  fallbacks; record statements on the primary")
    for name, f in row["processes"].items():
        def s(value: float | None) -> str:
            return "-" if value is None else f"{value:.3f}"
        ratio = "-" if f["ratio_to_base"] is None else f"{f['ratio_to_base']:.2f}"
        extra = "" if name == "base" else f"  {f['fallbacks'] or 'none'}; {f['primary_record_statements']}"
        print(f"   {name:<8}{s(f['median_s']):>9}{s(f['p90_s']):>9}{s(f['max_s']):>9}{s(f['median_minus_lag_s']):>9}"
              f"{ratio:>8}{s(f['tx_median_s']):>9}{s(f['tx_p90_s']):>9}{f['held_for_a_later_commit']:>6}"
              f"{f['missing']:>8}{extra}")
    for name, f in row["processes"].items():
        slowest = f["slowest"]
        if slowest and slowest["delivered_with_seq"] is not None:
            print(f"   {name}: the slowest, seq {slowest['seq']} ({slowest['delay_s']:.3f} s), reached the client "
                  f"with seq {slowest['delivered_with_seq']}, committed {slowest['whose_commit_came_s_later']:.3f} s "
                  "after it")
    sys.stdout.flush()


# ---------------------------------------------------------------------------- main


def stopped_indexer(setup: Setup) -> None:
    """Stops the indexer; prints what it logged at ERROR, if anything."""
    if setup.indexer is None:
        return
    stop(setup.indexer)
    lines = (setup.logs / "indexer.log").read_text(errors="replace").splitlines()
    problems = [line for line in lines if "Traceback" in line or "ERROR" in line]
    if problems:
        print(f"indexer: {len(problems)} error lines, e.g. {problems[:3]}")


def start(args: argparse.Namespace, logs: Path, stack: list[Callable[[], object]]) -> Setup:
    anvil = Anvil(port=free_port())
    w3 = anvil.start()
    stack.append(anvil.stop)
    deployment = deploy_reference_contracts(w3, anvil.rpc_url)
    records = seed_demo_activity(w3, deployment)
    chain = Chain(w3, deployment)
    redis = ThrowawayRedis()
    redis.start()
    stack.append(redis.stop)
    primary = ThrowawayPostgres(log_statement="all", log_line_prefix=LOG_PREFIX, log_timezone="UTC")
    primary.__enter__()
    stack.append(lambda: primary.__exit__(None, None, None))
    standby = ThrowawayPostgres(standby_of=primary.port, log_statement="all", log_line_prefix=LOG_PREFIX,
                                log_timezone="UTC")
    standby.__enter__()
    stack.append(lambda: standby.__exit__(None, None, None))
    inherited = {name: value for name, value in os.environ.items()
                 if not name.startswith(("BOUNTY_", "DATABASE_", "REDIS_", "DJANGO_", "PG"))}
    base_env = {
        **inherited, "DATABASE_URL": primary.url, "REDIS_URL": redis.url,
        "DJANGO_SETTINGS_MODULE": "bountysite.settings", "DJANGO_DEBUG": "0", "DJANGO_SECRET_KEY": SECRET_KEY,
        "DJANGO_ALLOWED_HOSTS": "127.0.0.1,localhost", "DJANGO_SECURE_SSL_REDIRECT": "0",
        "BOUNTY_RPC_URL": deployment.rpc_url, "BOUNTY_CHAIN_ID": str(deployment.chain_id),
        "BOUNTY_CONTRACT_ADDRESS": deployment.contract_address, "BOUNTY_USDC_ADDRESS": deployment.usdc_address,
        "BOUNTY_START_BLOCK": str(deployment.start_block), "BOUNTY_CONFIRMATIONS": "0",
        "BOUNTY_RATE_LIMIT": "0", "BOUNTY_WS_MAX_MESSAGE_BYTES": WS_MAX_MESSAGE_BYTES, "LOG_LEVEL": "WARNING",
    }
    setup = Setup(anvil, chain, redis, primary, standby, logs, base_env)

    def keep_logs() -> None:
        for name, server in (("primary", primary), ("standby", standby)):
            shutil.copy(server.data / "server.log", logs / f"{name}.log")

    def stop_servers() -> None:
        for server in setup.servers:
            stop(server.process)

    if args.keep:
        stack.append(keep_logs)
    stack.append(stop_servers)
    migrated = subprocess.run([PYTHON, "manage.py", "migrate", "--no-input", "-v0"], cwd=ROOT,
                              env=setup.env(PGAPPNAME="bounty-migrate"), capture_output=True, text=True, timeout=300)
    if migrated.returncode != 0:
        raise RuntimeError(f"migrate failed:\n{migrated.stderr[-3000:]}")
    with (logs / "indexer.log").open("wb") as log:
        setup.indexer = subprocess.Popen([PYTHON, "manage.py", "run_indexer"], cwd=ROOT,
                                         env=setup.env(PGAPPNAME="bounty-indexer"), stdout=log,
                                         stderr=subprocess.STDOUT)
    stack.append(lambda: stopped_indexer(setup))
    newest = indexed(setup, timeout=120)
    replayed(setup)
    print(f"dev chain: {w3.eth.block_number} blocks, demo records {records}; indexed to change {newest}; "
          f"PostgreSQL primary :{primary.port} and standby :{standby.port} ({standby.bin.parent.name}); "
          f"Redis :{redis.port}; logs in {logs}", flush=True)
    return setup


def missing_tools() -> list[str]:
    """What the bench needs of the machine and does not find."""
    missing = []
    if shutil.which("redis-server") is None:
        missing.append("redis-server on PATH (apt-get install redis-server)")
    if not sorted(Path("/usr/lib/postgresql").glob("*/bin")):
        missing.append("PostgreSQL's binaries under /usr/lib/postgresql (apt-get install postgresql)")
    try:
        anvil_binary()
    except DevChainError as error:
        missing.append(str(error))
    return missing


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="lags 0,1,2, 6 changes each, 15 s of reads")
    parser.add_argument("--lags", help="the standby's lags in seconds (default 0,0.5,1,2)")
    parser.add_argument("--changes", type=int, help="changes per lag (default 24; 6 with --quick)")
    parser.add_argument("--share-seconds", type=float, help="part 1's reads (default 40 s; 15 with --quick)")
    parser.add_argument("--share-lag", type=float, default=0.0, help="the standby's lag in part 1 (seconds)")
    parser.add_argument("--wait-above-ms", type=int, help="the second wait (default the largest lag + 1000 ms)")
    parser.add_argument("--clients", type=int, default=2, help="websocket clients per process in part 2")
    parser.add_argument("--only", choices=("share", "delay"), help="run one part")
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--keep", action="store_true", help="keep the servers' logs")
    args = parser.parse_args()
    args.lags = [float(lag) for lag in (args.lags or ("0,1,2" if args.quick else "0,0.5,1,2")).split(",")]
    args.changes = args.changes or (6 if args.quick else 24)
    args.share_seconds = args.share_seconds or (15.0 if args.quick else 40.0)
    args.wait_above_ms = args.wait_above_ms or round(max(args.lags) * 1000) + 1000
    if args.wait_above_ms == DEFAULT_WAIT_MS:
        args.wait_above_ms += 1000  # a second process with the default's wait would measure nothing new
    if min(args.lags) < 0 or args.changes < 1 or args.clients < 1 or args.share_seconds <= 0:
        parser.error("lags are 0 or more; --changes, --clients and --share-seconds more than 0")
    random.seed(args.seed)
    if missing := missing_tools():
        print("this bench needs " + "; ".join(missing) + ". Nothing measured.")
        return

    logs = Path(tempfile.mkdtemp(prefix="bench-read-replicas-"))
    stack: list[Callable[[], object]] = []
    summary: dict[str, Any] = {"lags_s": args.lags, "wait_above_ms": args.wait_above_ms}
    status = 0
    began = time.monotonic()
    try:
        setup = start(args, logs, stack)
        announcements = Announcements(setup.redis.url)
        announcements.start()
        if not announcements.ready.wait(10):
            raise RuntimeError("the bench could not listen on the channel layer")
        if args.only != "delay":
            summary["share"] = share(setup, args)
        if args.only != "share":
            summary["delays"] = delays(setup, args, announcements)
        if announcements.errors:
            print(f"listening for the indexer's wake-ups: {len(announcements.errors)} errors, e.g. "
                  f"{announcements.errors[:2]}")
    except Exception as error:  # printed; the cleanup below runs all the same
        traceback.print_exc()
        print(f"the benchmark stopped: {type(error).__name__}: {error}")
        summary["error"] = f"{type(error).__name__}: {error}"
        status = 1
    finally:
        for undo in reversed(stack):
            try:
                undo()
            except Exception as error:
                print(f"cleaning up: {type(error).__name__}: {error}")
        if not args.keep:
            shutil.rmtree(logs, ignore_errors=True)
    summary["seconds"] = round(time.monotonic() - began)
    print(f"\nran {summary['seconds']} s")
    print("BENCH_SUMMARY " + json.dumps(summary, default=str))
    sys.exit(status)


if __name__ == "__main__":
    main()
