"""Full reads from spools: what slow readers of snapshots and unpaged lists cost everyone else.

    .venv/bin/python bench/full_reads.py            # reduced scale: 6,000 bounties
    .venv/bin/python bench/full_reads.py --full     # the issue's scale: 30,000 bounties
        [--bounties N] [--slow 0,4,20,100] [--readers both|snapshots|lists] [--hold 30]
        [--ws-rate 35000] [--list-rate 2500] [--rounds 5] [--postgres-url URL]

A full read (a websocket snapshot at /ws/events, the unpaged list `GET /bounties` with no limit,
cursor or q) is read from the database once per data version into an unnamed temporary file, a
spool (records/spools.py), and delivered from it at each client's pace. On PostgreSQL (a database
of its own, `bench_full_reads`, created and dropped on `--postgres-url`), with the bounties seeded
as the indexer writes them (each body rendered by records.representation.record_body, a prompt of
about 1.2 KB: about 2 KB a record), daphne serving bountysite.asgi with the arguments of
deploy/bounty-web@.service, DEBUG off, behind a trusted proxy address (BOUNTY_TRUSTED_PROXIES=
127.0.0.1: clients are told apart by X-Forwarded-For), it measures in one run:

1. **Slow readers.** For each N of `--slow` (0 is the baseline, always run first), a fresh daphne
   process (so that each N's RSS growth is against a process no earlier N has grown), warmed by
   one fast snapshot and one fast unpaged list (their spools made, as the slow readers would
   otherwise make them) and a few record reads. Its RSS is then read (VmRSS), and N slow
   addresses each hold 2 snapshot websockets (8 KB receive buffer, read at `--ws-rate` bytes/s,
   answering pings, reconnecting a second after the server closes one), and N other addresses
   each read `GET /bounties` at `--list-rate` bytes/s (a raw socket with a 4 KB SO_RCVBUF, read
   2 KB at a time, steadily: never a pause near BOUNTY_HTTP_STALL_SECONDS; the default 2.5 KB/s
   is above the 72 KiB in 30 s, 2.4 KB/s, the service documents as its floor; reconnecting a
   second after the server closes it). `--readers` keeps one kind only. All of them are asyncio
   protocols in this process. After 5 s, at once: (a) a fresh address's websocket snapshot,
   seconds to `snapshot.complete`; (b) another fresh address's unpaged list, seconds to its whole
   body (its Content-Length, and the JSON array's length checked); (c) 40 record reads
   `GET /bounties/{id}` from a third address, 10 at a time, the slowest. The slow readers go on
   for `--hold` seconds in all, past their snapshots' deadlines. Meanwhile (d) the process's RSS
   is sampled every 0.2 s (the peak, against the RSS before the slow readers started) and (e)
   its /metrics every second, asked from loopback without X-Forwarded-For (the peak of
   `bounty_spool_bytes`, and `bounty_spools_produced_total` by kind at the end), with the
   connections open to the benchmark's database (pg_stat_activity: the server's pool, which
   DATABASE_POOL_MAX bounds, and any it holds apart). Every N's
   figures are printed with their ratio to N=0's, beside the issue's targets: the fresh
   snapshot and the unpaged list each within 10 s, every record read within 1 s, RSS growth at
   most 100 MB, the spools within BOUNTY_SPOOL_MAX_BYTES.
2. **What a spool costs.** A fresh daphne; `--rounds` times: the data version is advanced (the
   deployment's SyncState.last_seq bumped by one, as every indexer commit that changes records
   advances it; the records themselves are unchanged, so every body is the same size), then a
   fast client asks for the unpaged list (cold: its spool is read from the database, in the
   request), then another client asks for it again (warm: sent from that spool). Both are timed
   to the last byte of the body; the medians are printed, with their ratio. Bumping the version
   is what a deployment's next indexer commit does, and unlike a restart it leaves the process,
   its pool and PostgreSQL's caches warm, so the difference is the production and nothing else.
   It also prints the spool's size (`bounty_spool_bytes` with only that spool open) and its
   disk use (st_size and st_blocks of the unlinked file, through /proc/<pid>/fd) against the
   body's Content-Length.

What daphne writes (stdout and stderr, LOG_LEVEL=WARNING) is kept for each process and printed,
grouped by kind of record (a traceback by its last line), after its part. The clients' outcomes
are printed too: the slow websockets' handshakes and closes by code (1008: slower than the
snapshot's minimum rate; 1013: no spool or no slot in time; 1011: the server failed), the slow
lists' statuses, how many the server cut off and after how long, and what was still open at the
end. A step that fails (a warm-up, a fresh read, /metrics) is printed as such and the run goes
on; daphne is stopped and the database dropped however the run ends. The machine is shared and
noisy: compare ratios within one run. Without PostgreSQL it says so and exits.
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import os
import random
import re
import resource
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import traceback
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

BENCH_DIR = Path(__file__).resolve().parent
PROJECT_DIR = BENCH_DIR.parent
sys.path[:0] = [str(PROJECT_DIR)]

SECRET_KEY = "bench-full-reads-secret-0123456789-abcdefghijklmnopqrstuvwxyz-ABCDEFGHIJKLM"
CONTRACT = "0x" + "ab" * 20
USDC = "0x" + "cd" * 20
CHAIN_ID = 91342
DBNAME = "bench_full_reads"
WS_MAX_MESSAGE_BYTES = "4096"  # deploy/bounty-web@.service's Environment= for daphne's flag
READS, READS_AT_ONCE = 40, 10
WARM_READS = 10  # record reads of other IDs in each process's warm-up
SETTLE_SECONDS = 5.0  # the slow readers' head start before the measurements
FULL_READ_TIMEOUT = 60.0  # a fresh snapshot or list not done by then counts as not done
READ_TIMEOUT = 30.0
FULL_READ_TARGET_SECONDS, READ_TARGET_SECONDS, RSS_TARGET_MB = 10.0, 1.0, 100.0
WS_RECEIVE_BUFFER, LIST_RECEIVE_BUFFER, LIST_READ_BYTES = 8_192, 4_096, 2_048
RECONNECT_SECONDS = 1.0
COMPLETE = b'{"type":"snapshot.complete"'
STAMP = re.compile(r"^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d+ ")  # a log record's first line
WORDS = ("bounty", "solve", "prove", "layer", "index", "ledger", "oracle", "window", "claim", "review", "tile",
         "dispute", "submit", "bond", "refund", "chain", "block", "event", "hash", "proof")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def rss_mb(pid: int) -> float:
    """The process's resident memory (VmRSS), 0 once it has exited."""
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return 0.0
    for line in status.splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


def spool_files(pid: int, directory: str) -> list[tuple[int, int]]:
    """(size, bytes allocated on disk) of each spool the process holds open: its deleted files in
    the spool directory (O_TMPFILE files, `#<inode>`, or unlinked `bounty-spool-*` ones), found
    through /proc/<pid>/fd."""
    files: list[tuple[int, int]] = []
    try:
        descriptors = os.listdir(f"/proc/{pid}/fd")
    except OSError:  # the process has exited
        return files
    for fd in descriptors:
        try:
            target = os.readlink(f"/proc/{pid}/fd/{fd}")
            name = target.removeprefix(directory.rstrip("/") + "/")
            if name != target and name.endswith(" (deleted)") and name.startswith(("#", "bounty-spool-")):
                stat = os.stat(f"/proc/{pid}/fd/{fd}")
                files.append((stat.st_size, stat.st_blocks * 512))
        except OSError:  # closed meanwhile
            continue
    return files


def database_connections(database_url: str) -> int:
    """The clients' connections open to the benchmark's database (the server's), but this one."""
    import psycopg

    with psycopg.connect(database_url, autocommit=True, connect_timeout=5) as connection:
        row = connection.execute("SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() "
                                 "AND backend_type = 'client backend' AND pid <> pg_backend_pid()").fetchone()
    return int(row[0]) if row else 0


def ratio(value: float | None, base: float | None) -> str:
    if value is None or base is None or base <= 0:
        return "-"
    return f"{value / base:.2f}x"


# ---------------------------------------------------------------------------- database


def create_database(admin_url: str) -> str | None:
    """A fresh database DBNAME on the server of `admin_url`; its URL, or None if unreachable."""
    import psycopg

    try:
        with psycopg.connect(admin_url, autocommit=True, connect_timeout=5) as admin:
            admin.execute(f"DROP DATABASE IF EXISTS {DBNAME} WITH (FORCE)")
            admin.execute(f"CREATE DATABASE {DBNAME}")
    except psycopg.Error as error:
        print(f"PostgreSQL cannot be reached at {admin_url.rsplit('@', 1)[-1]} ({error}); nothing measured.")
        return None
    return admin_url.rsplit("/", 1)[0] + "/" + DBNAME


def drop_database(admin_url: str) -> None:
    import psycopg

    try:
        with psycopg.connect(admin_url, autocommit=True, connect_timeout=5) as admin:
            admin.execute(f"DROP DATABASE IF EXISTS {DBNAME} WITH (FORCE)")
    except psycopg.Error as error:
        print(f"could not drop the database {DBNAME} ({error}); drop it by hand")


def seed(bounties: int) -> None:
    """The active deployment with `bounties` bounties as the indexer writes them: values as
    stored, the search text and the body rendered from them."""
    from datetime import UTC, datetime, timedelta

    from django.db import connection

    from indexer.models import SyncState
    from records.models import Bounty, Deployment
    from records.representation import record_body
    from records.search import join_fields, search_fields

    deployment = Deployment.objects.create(chain_id=CHAIN_ID, contract_address=CONTRACT, usdc_address=USDC,
                                           bounty_total=bounties)
    SyncState.objects.create(deployment=deployment, last_seq=1)
    rng = random.Random(41)
    t0 = datetime(2026, 1, 1, tzinfo=UTC)
    for start in range(1, bounties + 1, 2_000):
        rows = []
        for n in range(start, min(bounties, start + 1_999) + 1):
            prompt = " ".join(rng.choice(WORDS) for _ in range(170))[:1_200]
            bounty = Bounty(
                deployment=deployment, bounty_id=n, prompt=prompt, bounty_amount=rng.randint(10**6, 10**10),
                fee_amount=25 * 10**5, bond_amount=10**7, duration=86_400, status="open",
                poster=f"0x{rng.getrandbits(160):040x}", deadline=t0 + timedelta(days=1, seconds=n),
                challenge_window=86_400, metadata_uri=f'data:application/json,{{"title":"bounty {n}","tags":["x"]}}',
                metadata_hash=f"0x{rng.getrandbits(256):064x}", tx_hash=f"0x{rng.getrandbits(256):064x}",
                block_number=1_000 + n, log_index=0, created_at=t0 + timedelta(seconds=30 * n))
            bounty.search_text = join_fields(search_fields(bounty))
            bounty.body = record_body(bounty, chain_id=deployment.chain_id, contract_address=CONTRACT)
            rows.append(bounty)
        Bounty.objects.bulk_create(rows)
    with connection.cursor() as cursor:
        cursor.execute("VACUUM ANALYZE records_bounty")
    connection.close()


def advance_version() -> None:
    """A new data version (records.selectors.data_version) without changing a record: the
    deployment's last_seq, as an indexer commit advances it."""
    from django.db import connection
    from django.db.models import F

    from indexer.models import SyncState

    SyncState.objects.update(last_seq=F("last_seq") + 1)
    connection.close()


# ---------------------------------------------------------------------------- the server


@dataclass
class Server:
    process: subprocess.Popen[bytes]
    port: int
    log: Path

    @property
    def pid(self) -> int:
        return self.process.pid

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.terminate()  # the unit's KillSignal
            try:
                self.process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()

    def output(self) -> list[str]:
        try:
            return self.log.read_text(errors="replace").splitlines()
        except OSError:
            return []


def serve(logs: Path, name: str) -> Server:
    """A daphne process as deploy/bounty-web@.service starts it, on a free port, its output in a file."""
    port = free_port()
    log = logs / f"daphne-{name}.log"
    command = [str(Path(sys.executable).parent / "daphne"), "-v", "0", "--bind", "127.0.0.1", "--port", str(port),
               "--ping-interval", "20", "--ping-timeout", "20", "--websocket_timeout", "-1",
               "--websocket-max-message-size", WS_MAX_MESSAGE_BYTES, "bountysite.asgi:application"]
    with log.open("wb") as output:
        process = subprocess.Popen(command, cwd=PROJECT_DIR, env={**os.environ}, stdout=output,
                                   stderr=subprocess.STDOUT)
    server = Server(process, port, log)
    deadline = time.monotonic() + 60
    while True:
        if process.poll() is not None or time.monotonic() > deadline:
            server.stop()
            tail = "\n".join(server.output()[-20:])
            raise RuntimeError(f"daphne did not start (exit {process.returncode}):\n{tail}")
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
            return server
        except OSError:
            time.sleep(0.05)


def grouped(lines: list[str]) -> list[tuple[int, str]]:
    """The log records by kind, most frequent first: each record's first line with its time,
    numbers and addresses masked, and the last line of its traceback if it has one."""
    records: list[list[str]] = []
    for line in lines:
        if STAMP.match(line) or not records:
            records.append([STAMP.sub("", line)])
        elif line.strip():
            records[-1].append(line.strip())
    counts: Counter[str] = Counter()
    example: dict[str, str] = {}
    for record in records:
        text = record[0] if len(record) == 1 else f"{record[0]} ... {record[-1]}"
        key = re.sub(r"\d+", "#", text)
        counts[key] += 1
        example.setdefault(key, text)
    return [(count, example[key]) for key, count in counts.most_common()]


def print_output(server: Server) -> list[tuple[int, str]]:
    groups = grouped(server.output())
    if not groups:
        print("  daphne wrote nothing (LOG_LEVEL=WARNING)")
    for count, line in groups[:10]:
        print(f"  daphne x{count}: {line if len(line) <= 300 else line[:160] + ' ... ' + line[-135:]}")
    if len(groups) > 10:
        print(f"  daphne: {len(groups) - 10} more kinds of record, in {server.log}")
    return groups


# ---------------------------------------------------------------------------- clients


async def http_get(port: int, path: str, address: str | None = None,
                   timeout: float = READ_TIMEOUT) -> tuple[int, dict[str, str], bytes]:
    """A GET on a connection of its own, read as fast as it comes: status, headers, body."""
    forwarded = f"X-Forwarded-For: {address}\r\n" if address else ""
    async with asyncio.timeout(timeout):
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        try:
            writer.write(f"GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nAccept: application/json\r\n{forwarded}"
                         f"Connection: close\r\n\r\n".encode())
            head = await reader.readuntil(b"\r\n\r\n")
            lines = head.decode("latin1").split("\r\n")
            status = int(lines[0].split(" ", 2)[1])
            headers = {name.strip().lower(): value.strip()
                       for name, _, value in (line.partition(":") for line in lines[1:] if line)}
            if "content-length" in headers:
                body = await reader.readexactly(int(headers["content-length"]))
            else:
                body = await reader.read()
            return status, headers, body
        finally:
            writer.close()


class Snapshot(asyncio.Protocol):
    """A websocket client of /ws/events on a raw socket: reads the handshake's status, counts text
    frames, notes `snapshot.complete`, answers pings, reads the close frame. With `rate`, it
    reads at most `rate` bytes/s (on a socket with an 8 KB receive buffer, so that TCP holds the
    server back, as a client on a slow network would)."""

    def __init__(self, port: int, address: str, rate: float | None) -> None:
        self.port, self.address, self.rate = port, address, rate
        self.status = 0  # the handshake's: 101, or a refusal
        self.frames = 0
        self.received = 0
        self.close_code: int | None = None
        self.close_reason = ""
        self.started = time.monotonic()
        self.completed: float | None = None  # monotonic, at `snapshot.complete`
        loop = asyncio.get_running_loop()
        self.done: asyncio.Future[None] = loop.create_future()
        self.complete: asyncio.Future[None] = loop.create_future()
        self.buffer = bytearray()
        self.transport: asyncio.Transport | None = None

    def connection_made(self, transport: Any) -> None:
        self.transport = transport
        key = base64.b64encode(os.urandom(16)).decode()
        transport.write((f"GET /ws/events HTTP/1.1\r\nHost: 127.0.0.1:{self.port}\r\nUpgrade: websocket\r\n"
                         f"Connection: Upgrade\r\nSec-WebSocket-Key: {key}\r\nSec-WebSocket-Version: 13\r\n"
                         f"X-Forwarded-For: {self.address}\r\n\r\n").encode())

    def connection_lost(self, exc: Exception | None) -> None:
        for future in (self.done, self.complete):
            if not future.done():
                future.set_result(None)

    def close(self) -> None:
        if self.transport is not None:
            self.transport.close()

    def data_received(self, data: bytes) -> None:
        assert self.transport is not None
        self.received += len(data)
        self.buffer += data
        if not self.status:
            end = self.buffer.find(b"\r\n\r\n")
            if end < 0:
                return
            self.status = int(self.buffer[:end].split(b" ", 2)[1])
            if self.status != 101:
                self.transport.close()
                return
            del self.buffer[:end + 4]
        self._frames()
        if self.rate is not None and not self.transport.is_closing():
            due = self.started + self.received / self.rate
            if due > time.monotonic():
                self.transport.pause_reading()
                asyncio.get_running_loop().call_at(due, self._resume)

    def _resume(self) -> None:
        if self.transport is not None and not self.transport.is_closing():
            self.transport.resume_reading()

    def _frames(self) -> None:
        buffer = self.buffer
        position = 0
        while len(buffer) - position >= 2:
            opcode, size, start = buffer[position] & 0x0F, buffer[position + 1] & 0x7F, position + 2
            if size == 126:
                if len(buffer) - position < 4:
                    break
                size, start = int.from_bytes(buffer[position + 2:position + 4], "big"), position + 4
            elif size == 127:
                if len(buffer) - position < 10:
                    break
                size, start = int.from_bytes(buffer[position + 2:position + 10], "big"), position + 10
            if len(buffer) - start < size:
                break
            position = start + size
            if opcode == 1:
                self.frames += 1
                if buffer.startswith(COMPLETE, start) and self.completed is None:
                    self.completed = time.monotonic()
                    if not self.complete.done():
                        self.complete.set_result(None)
            elif opcode == 9:  # ping: a pong with the same payload, masked as a client's frames are
                self._send(0x8A, bytes(buffer[start:position]))
            elif opcode == 8:
                payload = bytes(buffer[start:position])
                self.close_code = int.from_bytes(payload[:2], "big") if len(payload) >= 2 else 1005
                self.close_reason = payload[2:].decode(errors="replace")
                self._send(0x88, payload[:2])
                assert self.transport is not None
                self.transport.close()
                break
        del buffer[:position]

    def _send(self, first: int, payload: bytes) -> None:
        assert self.transport is not None
        mask = os.urandom(4)
        self.transport.write(bytes((first, 0x80 | len(payload))) + mask
                             + bytes(b ^ mask[i % 4] for i, b in enumerate(payload)))


async def open_snapshot(port: int, address: str, rate: float | None = None) -> Snapshot:
    loop = asyncio.get_running_loop()
    sock = socket.socket()
    sock.setblocking(False)
    if rate is not None:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, WS_RECEIVE_BUFFER)
    try:
        await loop.sock_connect(sock, ("127.0.0.1", port))
        _, client = await loop.create_connection(lambda: Snapshot(port, address, rate), sock=sock)
    except BaseException:
        sock.close()
        raise
    return client


class SlowList(asyncio.BufferedProtocol):
    """`GET /bounties` on a raw socket with a small receive buffer, read LIST_READ_BYTES at a time
    at `rate` bytes/s: the status, the Content-Length and the body's bytes received."""

    def __init__(self, port: int, address: str, rate: float) -> None:
        self.port, self.address, self.rate = port, address, rate
        self.piece = bytearray(LIST_READ_BYTES)
        self.head = bytearray()
        self.status = 0
        self.length: int | None = None
        self.body = 0
        self.received = 0
        self.started = time.monotonic()
        self.done: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self.transport: asyncio.Transport | None = None

    def connection_made(self, transport: Any) -> None:
        self.transport = transport
        transport.write(f"GET /bounties HTTP/1.1\r\nHost: 127.0.0.1\r\nAccept: application/json\r\n"
                        f"X-Forwarded-For: {self.address}\r\n\r\n".encode())

    def connection_lost(self, exc: Exception | None) -> None:
        if not self.done.done():
            self.done.set_result(None)

    def close(self) -> None:
        if self.transport is not None:
            self.transport.close()

    def complete(self) -> bool:
        return self.length is not None and self.body >= self.length

    def get_buffer(self, sizehint: int) -> bytearray:
        return self.piece

    def buffer_updated(self, nbytes: int) -> None:
        assert self.transport is not None
        self.received += nbytes
        if self.status:
            self.body += nbytes
        else:
            self.head += self.piece[:nbytes]
            end = self.head.find(b"\r\n\r\n")
            if end >= 0:
                lines = bytes(self.head[:end]).decode("latin1").split("\r\n")
                self.status = int(lines[0].split(" ", 2)[1])
                for line in lines[1:]:
                    name, _, value = line.partition(":")
                    if name.strip().lower() == "content-length":
                        self.length = int(value)
                self.body = len(self.head) - end - 4
                if self.status != 200:  # a refusal's body is short: read it at once
                    self.length = self.length or 0
        if self.complete():
            self.transport.close()
            return
        if self.status and self.status != 200:
            return
        due = self.started + self.received / self.rate
        if due > time.monotonic():
            self.transport.pause_reading()
            asyncio.get_running_loop().call_at(due, self._resume)

    def _resume(self) -> None:
        if self.transport is not None and not self.transport.is_closing():
            self.transport.resume_reading()


async def open_slow_list(port: int, address: str, rate: float) -> SlowList:
    loop = asyncio.get_running_loop()
    sock = socket.socket()
    sock.setblocking(False)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, LIST_RECEIVE_BUFFER)
    try:
        await loop.sock_connect(sock, ("127.0.0.1", port))
        _, client = await loop.create_connection(lambda: SlowList(port, address, rate), sock=sock)
    except BaseException:
        sock.close()
        raise
    return client


class Crowd:
    """`count` slow addresses holding 2 snapshot websockets each (`snapshots`), and `count` others
    reading the unpaged list (`lists`); each client opens a new connection a second after the
    server closes its own. What the server did to them is counted as they end; those still open
    at `stop()` are counted apart (`open_at_end`)."""

    def __init__(self, port: int, count: int, args: argparse.Namespace) -> None:
        self.port, self.count, self.ws_rate, self.list_rate = port, count, args.ws_rate, args.list_rate
        self.kinds = {"both": ("snapshots", "lists")}.get(args.readers, (args.readers,))
        self.snapshots: set[Snapshot] = set()
        self.lists: set[SlowList] = set()
        self.handshakes: Counter[int] = Counter()  # statuses of the websocket handshakes (0: none)
        self.closes: Counter[int | None] = Counter()  # the server's close codes (None: no close frame)
        self.reasons: Counter[str] = Counter()
        self.list_statuses: Counter[int] = Counter()  # of the lists' responses (0: closed without one)
        self.lists_cut: list[tuple[float, int]] = []  # (seconds, body bytes) of those ended before their length
        self.lists_complete = 0
        self.open_at_end: Counter[str] = Counter()
        self.errors: Counter[str] = Counter()
        self.ws_bytes = 0
        self.list_bytes = 0
        self._tasks: list[asyncio.Task[None]] = []

    def start(self) -> None:
        for n in range(self.count):
            if "snapshots" in self.kinds:
                address = f"10.66.{n // 250}.{n % 250 + 1}"
                self._tasks += [asyncio.create_task(self._keep_snapshot(address)) for _ in range(2)]
            if "lists" in self.kinds:
                self._tasks.append(asyncio.create_task(self._keep_list(f"10.67.{n // 250}.{n % 250 + 1}")))

    async def _keep_snapshot(self, address: str) -> None:
        while True:
            try:
                client = await open_snapshot(self.port, address, self.ws_rate)
            except OSError as error:
                self.errors[f"websocket connect: {error}"] += 1
                await asyncio.sleep(RECONNECT_SECONDS)
                continue
            self.snapshots.add(client)
            try:
                await client.done
            finally:
                self.snapshots.discard(client)
                self.ws_bytes += client.received
                if client.done.cancelled():  # stopped by `stop()`, still open
                    self.open_at_end["websockets receiving" if client.frames
                                     else "websockets accepted, no message yet" if client.status
                                     else "websockets awaiting the handshake"] += 1
            self.handshakes[client.status] += 1
            if client.status == 101:
                self.closes[client.close_code] += 1
                if client.close_reason:
                    self.reasons[f"{client.close_code} {client.close_reason}"] += 1
            await asyncio.sleep(RECONNECT_SECONDS)

    async def _keep_list(self, address: str) -> None:
        while True:
            try:
                client = await open_slow_list(self.port, address, self.list_rate)
            except OSError as error:
                self.errors[f"list connect: {error}"] += 1
                await asyncio.sleep(RECONNECT_SECONDS)
                continue
            self.lists.add(client)
            try:
                await client.done
            finally:
                self.lists.discard(client)
                self.list_bytes += client.received
                if client.done.cancelled():  # stopped by `stop()`, still open
                    self.open_at_end["lists receiving (200)" if client.status == 200
                                     else "lists awaiting a response"] += 1
            self.list_statuses[client.status] += 1
            if client.status == 200:
                if client.complete():
                    self.lists_complete += 1
                else:
                    self.lists_cut.append((time.monotonic() - client.started, client.body))
            await asyncio.sleep(RECONNECT_SECONDS)

    def receiving(self) -> tuple[int, int]:
        """Open slow websockets receiving their snapshot, and slow lists receiving their body."""
        return (sum(1 for client in self.snapshots if client.frames and not client.done.done()),
                sum(1 for client in self.lists if client.status == 200 and not client.done.done()))

    async def stop(self) -> None:
        clients: list[Snapshot | SlowList] = [*self.snapshots, *self.lists]
        for task in self._tasks:
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)  # each counts its client
        for client in clients:
            client.close()


# ---------------------------------------------------------------------------- measurements


async def fresh_snapshot(port: int, address: str) -> tuple[float | None, str]:
    """Seconds until a fast client of `address` has `snapshot.complete` (None: not within
    FULL_READ_TIMEOUT, or refused or closed first), and what happened otherwise."""
    started = time.monotonic()
    try:
        client = await open_snapshot(port, address)
    except OSError as error:
        return None, f"connect failed: {error}"
    try:
        async with asyncio.timeout(FULL_READ_TIMEOUT):
            await client.complete
    except TimeoutError:
        return None, f"not complete in {FULL_READ_TIMEOUT:.0f} s ({client.frames:,} messages)"
    finally:
        client.close()
    if client.completed is None:
        if client.status != 101:
            return None, (f"handshake answered {client.status}" if client.status
                          else "closed before the handshake was answered")
        return None, f"closed {client.close_code} {client.close_reason!r} after {client.frames:,} messages"
    return client.completed - started, f"{client.frames:,} messages"


async def fresh_list(port: int, address: str, bounties: int) -> tuple[float | None, str, int]:
    """Seconds until a fast client of `address` has the unpaged list's whole body (None: not a
    complete 200), what it got, and the body's size."""
    import orjson

    started = time.monotonic()
    try:
        status, headers, body = await http_get(port, "/bounties", address, timeout=FULL_READ_TIMEOUT)
    except (OSError, TimeoutError, asyncio.IncompleteReadError, ValueError) as error:
        return None, f"failed: {type(error).__name__} {error}", 0
    seconds = time.monotonic() - started
    if status != 200:
        return None, f"answered {status}: {body[:200].decode(errors='replace')}", len(body)
    length = int(headers.get("content-length", "-1"))
    try:
        records = len(orjson.loads(body))
    except orjson.JSONDecodeError:
        return None, f"not a JSON array ({len(body):,} bytes of Content-Length {length:,})", len(body)
    if length != len(body) or records != bounties:
        return None, f"{len(body):,} bytes of Content-Length {length:,}, {records:,} records", len(body)
    return seconds, f"{len(body) / 1e6:.1f} MB", len(body)


async def record_reads(port: int, address: str, ids: list[int]) -> tuple[list[float], Counter[int]]:
    """Reads of single bounties by `address`, READS_AT_ONCE at a time: each one's seconds, and
    the statuses (0: failed or not within READ_TIMEOUT)."""
    statuses: Counter[int] = Counter()
    seconds: list[float] = []
    limit = asyncio.Semaphore(READS_AT_ONCE)

    async def read(bounty_id: int) -> None:
        async with limit:
            started = time.monotonic()
            try:
                statuses[(await http_get(port, f"/bounties/{bounty_id}", address))[0]] += 1
            except (OSError, TimeoutError, asyncio.IncompleteReadError, ValueError):
                statuses[0] += 1
            seconds.append(time.monotonic() - started)

    await asyncio.gather(*(read(bounty_id) for bounty_id in ids))
    return seconds, statuses


async def metrics(port: int) -> dict[str, float]:
    """The server's spool and snapshot metrics, asked from loopback (no X-Forwarded-For)."""
    _, _, body = await http_get(port, "/metrics", timeout=10)
    values = {}
    for line in body.decode().splitlines():
        if line.startswith(("bounty_spool", "bounty_ws_snapshots_")):
            name, _, value = line.rpartition(" ")
            values[name] = float(value)
    return values


async def metrics_or_none(port: int) -> dict[str, float]:
    """`metrics`, or {} when the server does not answer them."""
    try:
        return await metrics(port)
    except (OSError, TimeoutError, asyncio.IncompleteReadError, ValueError):
        return {}


def produced(values: dict[str, float]) -> tuple[int, int]:
    """bounty_spools_produced_total: (snapshots, unpaged lists)."""
    return (int(values.get('bounty_spools_produced_total{kind="snapshot"}', 0)),
            int(values.get('bounty_spools_produced_total{kind="unpaged list"}', 0)))


@dataclass
class Phase:
    slow: int
    snapshot_seconds: float | None = None
    snapshot_note: str = ""
    list_seconds: float | None = None
    list_note: str = ""
    reads: list[float] = field(default_factory=list)
    statuses: Counter[int] = field(default_factory=Counter)
    rss_before: float = 0.0
    rss_peak: float = 0.0
    spool_peak: float = 0.0
    spools_open_peak: float = 0.0
    db_peak: int = 0
    produced: tuple[int, int] = (0, 0)
    metrics_failed: int = 0
    timeline: list[str] = field(default_factory=list)
    crowd: Crowd | None = None
    output: list[tuple[int, str]] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    @property
    def slowest(self) -> float | None:
        return max(self.reads) if self.reads else None

    @property
    def growth(self) -> float:
        return self.rss_peak - self.rss_before


async def run_phase(server: Server, slow: int, index: int, args: argparse.Namespace) -> Phase:
    phase = Phase(slow)
    rng = random.Random(7)
    ids = [rng.randint(1, args.bounties) for _ in range(READS)]
    # Warm-up: the spools made, the code paths loaded, the pool opened, by other addresses.
    seconds, note = await fresh_snapshot(server.port, f"10.55.{index}.1")
    if seconds is None:
        phase.notes.append(f"the warm-up snapshot failed: {note}")
    seconds, note, _ = await fresh_list(server.port, f"10.55.{index}.2", args.bounties)
    if seconds is None:
        phase.notes.append(f"the warm-up list failed: {note}")
    await record_reads(server.port, f"10.55.{index}.3", [rng.randint(1, args.bounties) for _ in range(WARM_READS)])
    await asyncio.sleep(1)
    phase.rss_before = phase.rss_peak = rss_mb(server.pid)

    crowd = Crowd(server.port, slow, args)
    phase.crowd = crowd
    started = time.monotonic()

    async def sample_rss() -> None:
        while True:
            phase.rss_peak = max(phase.rss_peak, rss_mb(server.pid))
            await asyncio.sleep(0.2)

    async def sample_metrics() -> None:
        last = 0.0
        while True:
            asked = time.monotonic()
            try:
                values, note = await metrics(server.port), ""
            except (OSError, TimeoutError, asyncio.IncompleteReadError, ValueError) as error:
                phase.metrics_failed += 1
                values, note = {}, f"/metrics failed after {time.monotonic() - asked:.0f} s ({type(error).__name__})"
            try:
                connections = await asyncio.to_thread(database_connections, args.database_url)
            except Exception as error:  # a figure missing, not a reason to stop
                connections = -1
                note += f" database connections not counted ({error})"
            phase.db_peak = max(phase.db_peak, connections)
            phase.spool_peak = max(phase.spool_peak, values.get("bounty_spool_bytes", 0))
            phase.spools_open_peak = max(phase.spools_open_peak, values.get("bounty_spools_open", 0))
            if values:
                phase.produced = produced(values)
            if time.monotonic() - last >= 5:
                last = time.monotonic()
                snapshots, lists = crowd.receiving()
                server_side = note or (
                    f"spools {values.get('bounty_spools_open', 0):.0f} open, "
                    f"{values.get('bounty_spool_bytes', 0) / 1e6:.1f} MB, snapshots sending "
                    f"{values.get('bounty_ws_snapshots_sending', 0):.0f}, waiting "
                    f"{values.get('bounty_ws_snapshots_waiting', 0):.0f}")
                phase.timeline.append(
                    f"{last - started:5.1f} s  RSS {rss_mb(server.pid):4.0f} MB  {connections} db connections  "
                    f"{server_side}  slow receiving: {snapshots} websockets, {lists} lists  "
                    f"closes {dict(crowd.closes)}")
            await asyncio.sleep(max(0.0, asked + 1 - time.monotonic()))

    samplers = [asyncio.create_task(sample_rss()), asyncio.create_task(sample_metrics())]
    try:
        if slow:
            crowd.start()
            await asyncio.sleep(SETTLE_SECONDS)
        (phase.snapshot_seconds, phase.snapshot_note), (phase.list_seconds, phase.list_note, _), \
            (phase.reads, phase.statuses) = await asyncio.gather(
                fresh_snapshot(server.port, f"10.88.{index}.1"),
                fresh_list(server.port, f"10.89.{index}.1", args.bounties),
                record_reads(server.port, f"10.77.{index}.1", ids))
        if slow:  # long enough for the slow snapshots to pass their deadlines and come back
            await asyncio.sleep(max(0.0, started + args.hold - time.monotonic()))
        if values := await metrics_or_none(server.port):
            phase.produced = produced(values)
        else:
            phase.metrics_failed += 1
    finally:
        for task in samplers:
            task.cancel()
        await asyncio.gather(*samplers, return_exceptions=True)
        await crowd.stop()
    return phase


def report_phase(phase: Phase, baseline: Phase | None, args: argparse.Namespace, max_bytes: int) -> None:
    crowd = phase.crowd
    if phase.slow:
        kinds = [f"{phase.slow} addresses x 2 snapshot websockets at {args.ws_rate / 1000:.0f} KB/s",
                 f"{phase.slow} addresses x 1 unpaged list at {args.list_rate / 1000:.1f} KB/s"]
        shown = {"snapshots": kinds[:1], "lists": kinds[1:]}.get(args.readers, kinds)
        print(f"\nN = {phase.slow}: {', '.join(shown)}, for {args.hold:.0f} s")
    else:
        print("\nN = 0 (the baseline: no slow readers)")
    for note in phase.notes:
        print(f"  NOTE {note}")
    for line in phase.timeline:
        print("  " + line)
    if crowd is not None and phase.slow:
        print(f"  slow websockets: handshakes {dict(crowd.handshakes)}, closes by code {dict(crowd.closes)}, "
              f"{crowd.ws_bytes / 1e6:.1f} MB received")
        for reason, count in crowd.reasons.most_common(6):
            print(f"    x{count}: {reason[:200]}")
        cut = ", ".join(f"{seconds:.0f} s/{size / 1000:.0f} KB" for seconds, size in sorted(crowd.lists_cut)[:8])
        print(f"  slow lists: responses ended {dict(crowd.list_statuses)} (of which complete {crowd.lists_complete}, "
              f"cut off by the server {len(crowd.lists_cut)}{f': after {cut}' if cut else ''}), "
              f"{crowd.list_bytes / 1e6:.2f} MB received")
        print(f"  still open at the end: {dict(crowd.open_at_end)}")
        for error, count in crowd.errors.most_common(4):
            print(f"    x{count}: {error}")
    base = baseline or phase

    def full(seconds: float | None, base_seconds: float | None, note: str) -> str:
        if seconds is None:
            return f"NOT complete: {note}"
        return f"{seconds:.2f} s ({ratio(seconds, base_seconds)} N=0; {note})"

    print(f"  (a) fresh snapshot: {full(phase.snapshot_seconds, base.snapshot_seconds, phase.snapshot_note)}")
    print(f"  (b) fresh unpaged list: {full(phase.list_seconds, base.list_seconds, phase.list_note)}")
    median = statistics.median(phase.reads) if phase.reads else 0.0
    print(f"  (c) record reads: {dict(phase.statuses)}, median {median:.3f} s, slowest {phase.slowest or 0:.3f} s "
          f"({ratio(phase.slowest, base.slowest)} N=0)")
    print(f"  (d) RSS: {phase.rss_before:.0f} MB before, peak {phase.rss_peak:.0f} MB: growth {phase.growth:.1f} MB "
          f"(N=0: {base.growth:.1f} MB)")
    print(f"  (e) spools: peak {phase.spool_peak / 1e6:.1f} MB in {phase.spools_open_peak:.0f} open "
          f"({ratio(phase.spool_peak, base.spool_peak)} N=0); produced: {phase.produced[0]} snapshot, "
          f"{phase.produced[1]} unpaged list" + (f"; /metrics failed {phase.metrics_failed}x" if phase.metrics_failed
                                                 else ""))
    print(f"  database connections to the benchmark's database: peak {phase.db_peak} (DATABASE_POOL_MAX "
          f"{args.pool_max})")
    met = targets(phase, max_bytes)
    print("  targets: " + "; ".join(f"{name} {'met' if ok else 'NOT met'}" for name, ok in met))


def targets(phase: Phase, max_bytes: int) -> list[tuple[str, bool]]:
    return [
        (f"snapshot <= {FULL_READ_TARGET_SECONDS:.0f} s",
         phase.snapshot_seconds is not None and phase.snapshot_seconds <= FULL_READ_TARGET_SECONDS),
        (f"list <= {FULL_READ_TARGET_SECONDS:.0f} s",
         phase.list_seconds is not None and phase.list_seconds <= FULL_READ_TARGET_SECONDS),
        (f"reads 200 <= {READ_TARGET_SECONDS:.0f} s", phase.statuses == Counter({200: READS})
         and phase.slowest is not None and phase.slowest <= READ_TARGET_SECONDS),
        (f"RSS growth <= {RSS_TARGET_MB:.0f} MB", phase.growth <= RSS_TARGET_MB),
        (f"spools <= {max_bytes / 2**20:,.0f} MiB", phase.spool_peak <= max_bytes),
    ]


def summary(phases: list[Phase], max_bytes: int) -> None:
    base = phases[0]
    print("\nsummary (ratios to N=0 of this run)")
    print(f"  {'N':>4} | {'snapshot s':>14} | {'unpaged list s':>14} | {'slowest read s':>15} | "
          f"{'RSS growth MB':>13} | {'spools peak MB':>14} | produced (snapshot, list) | db conns | targets")

    def cell(value: float | None, base_value: float | None, digits: int) -> str:
        return "NOT done" if value is None else f"{value:.{digits}f} ({ratio(value, base_value)})"

    for phase in phases:
        met = targets(phase, max_bytes)
        print(f"  {phase.slow:>4} | {cell(phase.snapshot_seconds, base.snapshot_seconds, 2):>14} | "
              f"{cell(phase.list_seconds, base.list_seconds, 2):>14} | {cell(phase.slowest, base.slowest, 3):>15} | "
              f"{phase.growth:>13.1f} | {phase.spool_peak / 1e6:>14.1f} | {phase.produced!s:>25} | "
              f"{phase.db_peak:>8} | {sum(ok for _, ok in met)}/{len(met)} met")
    print(f"  targets: fresh snapshot and unpaged list each within {FULL_READ_TARGET_SECONDS:.0f} s, record reads "
          f"within {READ_TARGET_SECONDS:.0f} s, RSS growth at most {RSS_TARGET_MB:.0f} MB, spools within "
          f"BOUNTY_SPOOL_MAX_BYTES ({max_bytes:,} bytes)")


# ---------------------------------------------------------------------------- what a spool costs


def spool_cost(server: Server, args: argparse.Namespace) -> None:
    """Cold (the spool made in the request) and warm (sent from it) unpaged lists, alternated,
    after one untimed list that warms the process."""
    cold: list[float] = []
    warm: list[float] = []
    failures: list[str] = []
    sizes: set[int] = set()
    spool_bytes: set[int] = set()
    disk: list[tuple[int, int]] = []

    def timed(address: str) -> float | None:
        seconds, note, size = asyncio.run(fresh_list(server.port, address, args.bounties))
        if seconds is None:
            failures.append(f"{address}: {note}")
        else:
            sizes.add(size)
        return seconds

    asyncio.run(fresh_list(server.port, "10.90.255.1", args.bounties))  # the process warmed, not timed
    before = produced(asyncio.run(metrics_or_none(server.port)))[1]
    for round_ in range(args.rounds):
        advance_version()
        if (seconds := timed(f"10.90.{round_}.1")) is not None:
            cold.append(seconds)
        values = asyncio.run(metrics_or_none(server.port))
        spool_bytes.add(int(values.get("bounty_spool_bytes", -1)))
        disk = spool_files(server.pid, args.spool_dir) or disk
        if (seconds := timed(f"10.90.{round_}.2")) is not None:
            warm.append(seconds)
    made = produced(asyncio.run(metrics_or_none(server.port)))[1] - before
    print(f"\nwhat a spool costs: the unpaged list, {args.rounds} rounds of a new data version, then a cold read "
          f"(its spool made in the request) and a warm one (from that spool), each by a fast client")
    for failure in failures:
        print(f"  FAILED {failure}")
    if cold and warm:
        print(f"  cold: median {statistics.median(cold):.2f} s ({', '.join(f'{s:.2f}' for s in cold)}); warm: median "
              f"{statistics.median(warm):.2f} s ({', '.join(f'{s:.2f}' for s in warm)}); cold / warm "
              f"{statistics.median(cold) / statistics.median(warm):.2f}; spools produced: {made} "
              f"(expected {args.rounds})")
    body = max(sizes) if sizes else 0
    print(f"  body (Content-Length): {body:,} bytes; bounty_spool_bytes after each cold read: "
          f"{', '.join(f'{b:,}' for b in sorted(spool_bytes))}; the spool file{'s' if len(disk) > 1 else ''} "
          f"open then: " + ", ".join(f"{size:,} bytes, {blocks:,} on disk" for size, blocks in disk)
          + (f" ({disk[0][1] / body:.3f} of the body)" if disk and body else ""))


# ---------------------------------------------------------------------------- main


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--full", action="store_true", help="the issue's scale: 30,000 bounties")
    parser.add_argument("--bounties", type=int, help="bounties to seed (default 6,000; 30,000 with --full)")
    parser.add_argument("--slow", default="0,4,20,100", help="slow addresses per kind, for each measurement")
    parser.add_argument("--hold", type=float, default=30, help="seconds the slow readers read, at least")
    parser.add_argument("--ws-rate", type=float, default=35_000, help="bytes/s each slow websocket reads")
    parser.add_argument("--list-rate", type=float, default=2_500, help="bytes/s each slow list reader reads")
    parser.add_argument("--readers", choices=("both", "snapshots", "lists"), default="both",
                        help="the slow readers' kinds (default both: N of each)")
    parser.add_argument("--rounds", type=int, default=5, help="cold and warm unpaged lists for the spool's cost")
    parser.add_argument("--postgres-url", default="postgresql://postgres@127.0.0.1:5432/postgres",
                        help="a database on the server to create the benchmark's own from")
    args = parser.parse_args()
    args.bounties = args.bounties or (30_000 if args.full else 6_000)
    try:
        counts = sorted({0, *(int(n) for n in args.slow.split(",") if n.strip())})
    except ValueError:
        parser.error("--slow takes numbers separated by commas, such as 0,4,20,100")
    if any(n < 0 for n in counts) or args.bounties < 1 or args.rounds < 1:
        parser.error("--slow takes counts of 0 or more; --bounties and --rounds, 1 or more")
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)  # the unit's LimitNOFILE, as far as allowed
    wanted = 32_768 if hard == resource.RLIM_INFINITY else min(hard, 32_768)
    if soft != resource.RLIM_INFINITY and soft < wanted:
        resource.setrlimit(resource.RLIMIT_NOFILE, (wanted, hard))

    try:
        import psycopg  # noqa: F401
    except ImportError:
        print("psycopg is not installed (./scripts/setup); nothing measured.")
        return
    database_url = create_database(args.postgres_url)
    if database_url is None:
        return
    servers: list[Server] = []
    logs = Path(tempfile.mkdtemp(prefix="bench-full-reads-"))
    try:
        os.environ.update({
            "DATABASE_URL": database_url, "DJANGO_SETTINGS_MODULE": "bountysite.settings", "DJANGO_DEBUG": "0",
            "DJANGO_SECRET_KEY": SECRET_KEY, "DJANGO_ALLOWED_HOSTS": "127.0.0.1", "DJANGO_SECURE_SSL_REDIRECT": "0",
            "BOUNTY_CHAIN_ID": str(CHAIN_ID), "BOUNTY_CONTRACT_ADDRESS": CONTRACT, "BOUNTY_USDC_ADDRESS": USDC,
            "BOUNTY_TRUSTED_PROXIES": "127.0.0.1", "BOUNTY_WS_MAX_MESSAGE_BYTES": WS_MAX_MESSAGE_BYTES,
            "LOG_LEVEL": "WARNING"})
        for name in ("REDIS_URL", "BOUNTY_RPC_URL"):  # one process: its own rate limits and caches
            os.environ.pop(name, None)
        import django

        django.setup()
        from django.conf import settings
        from django.core.management import call_command

        call_command("migrate", verbosity=0)
        started = time.monotonic()
        seed(args.bounties)
        max_bytes: int = settings.BOUNTY_SPOOL_MAX_BYTES
        args.database_url = database_url
        args.pool_max = settings.DATABASES["default"].get("OPTIONS", {}).get("pool", {}).get("max_size", "?")
        args.spool_dir = settings.BOUNTY_SPOOL_DIR or tempfile.gettempdir()
        print(f"PostgreSQL, {args.bounties:,} bounties seeded in {time.monotonic() - started:.0f} s; slow readers: "
              f"snapshots at {args.ws_rate / 1000:.0f} KB/s, lists at {args.list_rate / 1000:.1f} KB/s; limits: "
              f"{settings.BOUNTY_WS_SNAPSHOT_READERS} snapshot and {settings.BOUNTY_HTTP_MAX_STREAMS} list "
              f"productions at once, {settings.BOUNTY_WS_SNAPSHOT_READERS_PER_CLIENT} snapshots and "
              f"{settings.BOUNTY_HTTP_MAX_STREAMS_PER_CLIENT} list per address, snapshot deadline "
              f"{settings.BOUNTY_WS_SNAPSHOT_BASE_SECONDS} s + bytes at "
              f"{settings.BOUNTY_WS_SNAPSHOT_MIN_BYTES_PER_SECOND:,} bytes/s, HTTP stall "
              f"{settings.BOUNTY_HTTP_STALL_SECONDS} s, spools at most {max_bytes:,} bytes in "
              f"{args.spool_dir}, database pool {args.pool_max}; load average {os.getloadavg()[0]:.1f}; "
              f"daphne output in {logs}", flush=True)

        phases: list[Phase] = []
        for index, slow in enumerate(counts):
            server = serve(logs, f"slow-{slow}")
            servers.append(server)
            try:
                phase = asyncio.run(run_phase(server, slow, index, args))
            finally:
                server.stop()
            report_phase(phase, phases[0] if phases else None, args, max_bytes)
            phase.output = print_output(server)
            phases.append(phase)
            sys.stdout.flush()
        summary(phases, max_bytes)

        server = serve(logs, "spool-cost")
        servers.append(server)
        try:
            spool_cost(server, args)
        finally:
            server.stop()
        print_output(server)
    except Exception as error:  # printed; the cleanup below runs all the same
        traceback.print_exc()
        print(f"the benchmark stopped: {type(error).__name__}: {error}")
        sys.exit(1)
    finally:
        for server in servers:
            server.stop()
        try:
            from django.db import connections

            connections.close_all()
        except Exception as error:  # Django may not be set up; the database is dropped regardless
            print(f"closing the connections failed: {error}")
        drop_database(args.postgres_url)


if __name__ == "__main__":
    main()
