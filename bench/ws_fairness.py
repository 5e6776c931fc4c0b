"""Websocket snapshot fairness benchmark: slow snapshot readers of one address against everyone else.

    .venv/bin/python bench/ws_fairness.py            # reduced scale: 6,000 bounties
    .venv/bin/python bench/ws_fairness.py --full     # the issue's scale: 30,000 bounties
        [--bounties N] [--slow-clients 20] [--slow-rate 35000] [--postgres-url URL] [--unshared]

On PostgreSQL (a database of its own, `bench_ws_fairness`, created and dropped on `--postgres-url`),
with the bounties seeded as the indexer writes them (each body rendered by
records.representation.record_body, a prompt of about 1.2 KB: about 2 KB a record), one daphne
process serving bountysite.asgi behind a trusted proxy address (clients are told apart by
X-Forwarded-For):

1. Baseline, nothing else running: a third address's full snapshot (seconds to
   `snapshot.complete`), and another address's 40 record reads (`GET /bounties/{id}`, 10 at a
   time; the slowest).
2. Under attack: one address opens `--slow-clients` full-snapshot websockets, each on a socket
   with an 8 KB receive buffer read a few KB at a time at `--slow-rate` bytes/s, answering pings,
   and opening a new one whenever the server closes one (as a persistent client would). After 5 s,
   the same record reads and the third address's snapshot run again; the slow clients keep going
   for `--attack-seconds` (default 40), past their snapshots' deadlines.

It also times full snapshots with the websocket's bounded kernel send buffer
(BOUNTY_WS_SEND_BUFFER_BYTES) against 4 MiB, what Linux would grow it to (the median of 6 each,
alternated), for what the bound costs a fast client. It prints the snapshot slots over time
(the server's `bounty_ws_snapshots_sending` and `_waiting` gauges, the slow sockets receiving a
snapshot, and the server's closes of slow sockets by code), the third address's snapshot time
and the slowest record read, each with its ratio to the baseline of the same run, and the
issue's targets: every record read 200 within 3 s, the third address's snapshot complete within
90 s. `--unshared` first runs the attack with the snapshot limits opened up as they were before
they were shared (8 readers, 20 per address, no minimum rate, no wait limit, a pool to match)
for comparison. Without PostgreSQL it says so and exits.
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import os
import random
import socket
import statistics
import subprocess
import sys
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

BENCH_DIR = Path(__file__).resolve().parent
PROJECT_DIR = BENCH_DIR.parent
sys.path[:0] = [str(PROJECT_DIR)]

SECRET_KEY = "bench-ws-fairness-secret-0123456789-abcdefghijklmnopqrstuvwxyz-ABCDEFGHIJKL"
CONTRACT = "0x" + "ab" * 20
USDC = "0x" + "cd" * 20
DBNAME = "bench_ws_fairness"
SLOW_ADDRESS, READS_ADDRESS, SNAPSHOT_ADDRESS = "10.66.0.1", "10.77.0.2", "10.88.0.3"
READS, READS_AT_ONCE = 40, 10
READ_TARGET_SECONDS, SNAPSHOT_TARGET_SECONDS = 3.0, 90.0
WORDS = ("bounty", "solve", "prove", "layer", "index", "ledger", "oracle", "window", "claim", "review", "tile",
         "dispute", "submit", "bond", "refund", "chain", "block", "event", "hash", "proof")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


# ---------------------------------------------------------------------------- database


def create_database(admin_url: str) -> str | None:
    """A fresh database DBNAME on the server of `admin_url`; its URL, or None if unreachable."""
    import psycopg

    try:
        with psycopg.connect(admin_url, autocommit=True, connect_timeout=5) as admin:
            admin.execute(f"DROP DATABASE IF EXISTS {DBNAME} WITH (FORCE)")
            admin.execute(f"CREATE DATABASE {DBNAME}")
    except psycopg.OperationalError as error:
        print(f"PostgreSQL cannot be reached at {admin_url.rsplit('@', 1)[-1]} ({error}); nothing measured.")
        return None
    return admin_url.rsplit("/", 1)[0] + "/" + DBNAME


def drop_database(admin_url: str) -> None:
    import psycopg

    with psycopg.connect(admin_url, autocommit=True) as admin:
        admin.execute(f"DROP DATABASE IF EXISTS {DBNAME} WITH (FORCE)")


def seed(bounties: int) -> int:
    """The active deployment with `bounties` bounties as the indexer writes them: values as stored,
    the search text and the body rendered from them. Returns the snapshot's size in bytes."""
    from datetime import UTC, datetime, timedelta

    from django.db import connection

    from indexer.models import SyncState
    from records.models import Bounty, Deployment
    from records.representation import record_body
    from records.search import join_fields, search_fields

    deployment = Deployment.objects.create(chain_id=91342, contract_address=CONTRACT, usdc_address=USDC,
                                           bounty_total=bounties)
    SyncState.objects.create(deployment=deployment)
    rng = random.Random(41)
    t0 = datetime(2026, 1, 1, tzinfo=UTC)
    size = 0
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
            size += len(bounty.body) + 60  # the message around the body, and its frame header
            rows.append(bounty)
        Bounty.objects.bulk_create(rows)
    with connection.cursor() as cursor:
        cursor.execute("VACUUM ANALYZE records_bounty")
    connection.close()
    return size


# ---------------------------------------------------------------------------- websocket clients


@dataclass
class Reader(asyncio.Protocol):
    """A websocket client on a raw socket: counts text frames, answers pings, reads the close frame.
    With `rate`, it reads at most `rate` bytes/s (the socket's receive buffer is 8 KB, so the
    server is held back by TCP, as with a client on a slow network)."""

    port: int
    address: str
    rate: float | None = None
    frames: int = 0
    received: int = 0
    close_code: int | None = None
    close_reason: str = ""
    started: float = field(default_factory=time.monotonic)
    done: asyncio.Future[None] = field(default_factory=lambda: asyncio.get_running_loop().create_future())
    buffer: bytearray = field(default_factory=bytearray)
    upgraded: bool = False
    transport: Any = None

    def connection_made(self, transport: Any) -> None:
        self.transport = transport
        key = base64.b64encode(os.urandom(16)).decode()
        transport.write((f"GET /ws/events HTTP/1.1\r\nHost: 127.0.0.1:{self.port}\r\nUpgrade: websocket\r\n"
                         f"Connection: Upgrade\r\nSec-WebSocket-Key: {key}\r\nSec-WebSocket-Version: 13\r\n"
                         f"X-Forwarded-For: {self.address}\r\n\r\n").encode())

    def connection_lost(self, exc: Exception | None) -> None:
        if not self.done.done():
            self.done.set_result(None)

    def data_received(self, data: bytes) -> None:
        self.received += len(data)
        self.buffer += data
        if not self.upgraded:
            end = self.buffer.find(b"\r\n\r\n")
            if end < 0:
                return
            self.upgraded = True
            del self.buffer[:end + 4]
        self._frames()
        if self.rate is not None and not self.transport.is_closing():
            due = self.started + self.received / self.rate
            if due > time.monotonic():
                self.transport.pause_reading()
                asyncio.get_running_loop().call_later(due - time.monotonic(), self._resume)

    def _resume(self) -> None:
        if not self.transport.is_closing():
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
            payload = bytes(buffer[start:start + size])
            position = start + size
            if opcode == 1:
                self.frames += 1
            elif opcode == 9:  # ping: a pong with the same payload, masked as a client's frames are
                self._send(0x8A, payload)
            elif opcode == 8:
                self.close_code = int.from_bytes(payload[:2], "big") if len(payload) >= 2 else 1005
                self.close_reason = payload[2:].decode(errors="replace")
                self._send(0x88, payload[:2])
                self.transport.close()
                break
        del buffer[:position]

    def _send(self, first: int, payload: bytes) -> None:
        mask = os.urandom(4)
        self.transport.write(bytes((first, 0x80 | len(payload))) + mask
                             + bytes(b ^ mask[i % 4] for i, b in enumerate(payload)))


async def connect(port: int, address: str, rate: float | None = None) -> Reader:
    loop = asyncio.get_running_loop()
    sock = socket.socket()
    sock.setblocking(False)
    if rate is not None:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 8_192)
    await loop.sock_connect(sock, ("127.0.0.1", port))
    _, reader = await loop.create_connection(lambda: Reader(port, address, rate), sock=sock)
    return reader


async def full_snapshot(port: int, bounties: int, timeout: float) -> tuple[float | None, int]:
    """Seconds until one client of SNAPSHOT_ADDRESS has every snapshot message (None: not within
    `timeout`, or closed), and how many it got."""
    started = time.monotonic()
    reader = await connect(port, SNAPSHOT_ADDRESS)
    while reader.frames < bounties + 1 and not reader.done.done() and time.monotonic() - started < timeout:
        await asyncio.sleep(0.01)
    seconds = time.monotonic() - started if reader.frames >= bounties + 1 else None
    reader.transport.close()
    return seconds, reader.frames


async def record_reads(port: int, bounties: int) -> tuple[list[float], Counter[int]]:
    """READS reads of single bounties by READS_ADDRESS, READS_AT_ONCE at a time: each one's
    seconds, and the statuses."""
    import httpx

    rng = random.Random(7)
    statuses: Counter[int] = Counter()
    seconds: list[float] = []
    limit = asyncio.Semaphore(READS_AT_ONCE)
    async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}", headers={"X-Forwarded-For": READS_ADDRESS},
                                 timeout=60, limits=httpx.Limits(max_connections=READS_AT_ONCE)) as client:
        async def read(bounty_id: int) -> None:
            async with limit:
                started = time.monotonic()
                try:
                    statuses[(await client.get(f"/bounties/{bounty_id}")).status_code] += 1
                except httpx.HTTPError:
                    statuses[0] += 1
                seconds.append(time.monotonic() - started)

        await asyncio.gather(*(read(rng.randint(1, bounties)) for _ in range(READS)))
    return seconds, statuses


async def gauges(port: int) -> tuple[float, float]:
    """The server's snapshot gauges: (sending, waiting)."""
    import httpx

    async with httpx.AsyncClient(timeout=10) as client:
        text = (await client.get(f"http://127.0.0.1:{port}/metrics")).text
    values = {line.split()[0]: float(line.split()[1]) for line in text.splitlines()
              if line.startswith("bounty_ws_snapshots_")}
    return values.get("bounty_ws_snapshots_sending", -1), values.get("bounty_ws_snapshots_waiting", -1)


class Attacker:
    """`count` slow full-snapshot websockets of SLOW_ADDRESS, each replaced when the server closes it."""

    def __init__(self, port: int, count: int, rate: float) -> None:
        self.port, self.count, self.rate = port, count, rate
        self.readers: list[Reader] = []
        self.closes: Counter[int | None] = Counter()
        self.reasons: set[str] = set()
        self._tasks: list[asyncio.Task[None]] = []

    def start(self) -> None:
        self._tasks = [asyncio.create_task(self._keep_one()) for _ in range(self.count)]

    async def _keep_one(self) -> None:
        while True:
            reader = await connect(self.port, SLOW_ADDRESS, self.rate)
            self.readers.append(reader)
            await reader.done
            self.readers.remove(reader)
            self.closes[reader.close_code] += 1
            if reader.close_reason:
                self.reasons.add(f"{reader.close_code} {reader.close_reason}")
            await asyncio.sleep(1)

    def receiving(self) -> int:
        """Slow sockets that have snapshot messages and are still open."""
        return sum(1 for reader in self.readers if reader.frames > 0 and not reader.done.done())

    async def stop(self) -> None:
        for task in self._tasks:
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        for reader in self.readers:
            reader.transport.close()


@dataclass
class Outcome:
    snapshot_seconds: float | None
    snapshot_frames: int
    reads: list[float]
    statuses: Counter[int]
    timeline: list[str] = field(default_factory=list)
    closes: Counter[int | None] = field(default_factory=Counter)
    reasons: set[str] = field(default_factory=set)


async def run(port: int, bounties: int, slow_clients: int, slow_rate: float, attack: bool,
              attack_seconds: float) -> Outcome:
    attacker = Attacker(port, slow_clients, slow_rate)
    timeline: list[str] = []
    started = time.monotonic()

    async def sample() -> None:
        while True:
            sending, waiting = await gauges(port)
            timeline.append(f"{time.monotonic() - started:6.1f} s  {sending:4.0f} sending  {waiting:4.0f} waiting  "
                            f"{attacker.receiving():3d} slow sockets receiving  closes {dict(attacker.closes)}")
            await asyncio.sleep(2)

    sampler = asyncio.create_task(sample())
    if attack:
        attacker.start()
        await asyncio.sleep(5)
    (snapshot_seconds, frames), (reads, statuses) = await asyncio.gather(
        full_snapshot(port, bounties, SNAPSHOT_TARGET_SECONDS * 2), record_reads(port, bounties))
    if attack:  # long enough for the slow snapshots to pass their deadlines
        await asyncio.sleep(max(2.0, started + attack_seconds - time.monotonic()))
    sampler.cancel()
    await attacker.stop()
    return Outcome(snapshot_seconds, frames, reads, statuses, timeline, attacker.closes, attacker.reasons)


def serve(database_url: str, **settings: str) -> tuple[subprocess.Popen[bytes], int]:
    port = free_port()
    env = {**{k: v for k, v in os.environ.items() if k != "REDIS_URL"}, "DATABASE_URL": database_url,
           "DJANGO_SECRET_KEY": SECRET_KEY, "DJANGO_ALLOWED_HOSTS": "127.0.0.1", "DJANGO_SECURE_SSL_REDIRECT": "0",
           "BOUNTY_CONTRACT_ADDRESS": CONTRACT, "BOUNTY_USDC_ADDRESS": USDC, "BOUNTY_TRUSTED_PROXIES": "127.0.0.1",
           "LOG_LEVEL": "WARNING", **settings}
    server = subprocess.Popen([str(Path(sys.executable).parent / "daphne"), "-b", "127.0.0.1", "-p", str(port),
                               "bountysite.asgi:application"], cwd=PROJECT_DIR, env=env,
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 60
    while True:
        if server.poll() is not None or time.monotonic() > deadline:
            raise SystemExit("daphne did not start")
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
            return server, port
        except OSError:
            time.sleep(0.05)


def measure(database_url: str, args: argparse.Namespace, attack: bool, **settings: str) -> Outcome:
    server, port = serve(database_url, **settings)
    try:
        return asyncio.run(run(port, args.bounties, args.slow_clients, args.slow_rate, attack, args.attack_seconds))
    finally:
        server.terminate()
        server.wait(timeout=30)


def snapshot_seconds(database_url: str, bounties: int, rounds: int, **settings: str) -> list[float]:
    """One full snapshot after another, `rounds` times, nothing else running: their seconds."""
    server, port = serve(database_url, **settings)
    try:
        return [seconds for _ in range(rounds)
                if (seconds := asyncio.run(full_snapshot(port, bounties, SNAPSHOT_TARGET_SECONDS))[0]) is not None]
    finally:
        server.terminate()
        server.wait(timeout=30)


def report(name: str, outcome: Outcome, baseline: Outcome | None) -> None:
    print(f"\n{name}")
    for line in outcome.timeline:
        print("  " + line)
    if outcome.closes:
        print(f"  slow sockets closed by the server, by code: {dict(outcome.closes)}; "
              f"reasons: {sorted(outcome.reasons)}")
    snapshot = (f"{outcome.snapshot_seconds:.1f} s" if outcome.snapshot_seconds is not None
                else f"NOT complete ({outcome.snapshot_frames:,} messages received)")
    slowest = max(outcome.reads)
    ratios = ""
    if baseline is not None and outcome.snapshot_seconds is not None and baseline.snapshot_seconds:
        ratios = f" ({outcome.snapshot_seconds / baseline.snapshot_seconds:.2f}x the baseline)"
    print(f"  third address's full snapshot: {snapshot}{ratios}")
    read_ratio = f" ({slowest / max(baseline.reads):.2f}x the baseline)" if baseline is not None else ""
    print(f"  record reads: {dict(outcome.statuses)}, median {statistics.median(outcome.reads):.3f} s, "
          f"slowest {slowest:.3f} s{read_ratio}")
    if baseline is not None:
        reads_met = outcome.statuses == Counter({200: READS}) and slowest <= READ_TARGET_SECONDS
        snapshot_met = outcome.snapshot_seconds is not None and outcome.snapshot_seconds <= SNAPSHOT_TARGET_SECONDS
        print(f"  target: every record read 200 within {READ_TARGET_SECONDS:.0f} s: "
              f"{'met' if reads_met else 'NOT met'}; "
              f"the snapshot within {SNAPSHOT_TARGET_SECONDS:.0f} s: {'met' if snapshot_met else 'NOT met'}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--full", action="store_true", help="the issue's scale: 30,000 bounties")
    parser.add_argument("--bounties", type=int, help="bounties to seed (default 6,000; 30,000 with --full)")
    parser.add_argument("--slow-clients", type=int, default=20)
    parser.add_argument("--slow-rate", type=float, default=35_000, help="bytes/s each slow client reads")
    parser.add_argument("--attack-seconds", type=float, default=40, help="how long the slow clients run at least")
    parser.add_argument("--postgres-url", default="postgresql://postgres@127.0.0.1:5432/postgres",
                        help="a database on the server to create the benchmark's own from")
    parser.add_argument("--unshared", action="store_true", help="also run the attack with the limits opened up")
    args = parser.parse_args()
    args.bounties = args.bounties or (30_000 if args.full else 6_000)
    database_url = create_database(args.postgres_url)
    if database_url is None:
        return
    try:
        env = {"DATABASE_URL": database_url, "DJANGO_DEBUG": "1", "DJANGO_SETTINGS_MODULE": "bountysite.settings"}
        os.environ.update(env)
        os.environ.pop("REDIS_URL", None)
        import django

        django.setup()
        from django.conf import settings
        from django.core.management import call_command

        call_command("migrate", verbosity=0)
        started = time.monotonic()
        size = seed(args.bounties)
        print(f"PostgreSQL, {args.bounties:,} bounties seeded in {time.monotonic() - started:.0f} s; snapshot about "
              f"{size / 1e6:.0f} MB ({size / args.slow_rate / 60:.0f} min at {args.slow_rate / 1000:.0f} KB/s); "
              f"{args.slow_clients} slow websockets of one address at {args.slow_rate / 1000:.0f} KB/s each; "
              f"limits: {settings.BOUNTY_WS_SNAPSHOT_READERS} snapshot readers, "
              f"{settings.BOUNTY_WS_SNAPSHOT_READERS_PER_CLIENT} per address, wait "
              f"{settings.BOUNTY_WS_SNAPSHOT_WAIT_SECONDS} s, deadline {settings.BOUNTY_WS_SNAPSHOT_BASE_SECONDS} s + "
              f"bytes at {settings.BOUNTY_WS_SNAPSHOT_MIN_BYTES_PER_SECOND:,} bytes/s; load average "
              f"{os.getloadavg()[0]:.1f}", flush=True)
        baseline = measure(database_url, args, attack=False)
        report("baseline (no slow clients)", baseline, None)
        # What the bounded kernel send buffer costs a fast client (loopback), alternated against the noise.
        bounded: list[float] = []
        kernel: list[float] = []
        for _ in range(3):
            bounded += snapshot_seconds(database_url, args.bounties, 2)
            kernel += snapshot_seconds(database_url, args.bounties, 2, BOUNTY_WS_SEND_BUFFER_BYTES="4194304")
        ratio = statistics.median(bounded) / statistics.median(kernel)
        print(f"  full snapshot, median of {len(bounded)}: {statistics.median(bounded):.2f} s with the websocket's "
              f"send buffer of {settings.BOUNTY_WS_SEND_BUFFER_BYTES:,} bytes, {statistics.median(kernel):.2f} s "
              f"with 4 MiB (the kernel's own maximum): ratio {ratio:.2f}")
        if args.unshared:
            unshared = measure(database_url, args, attack=True, BOUNTY_WS_SNAPSHOT_READERS="8",
                               BOUNTY_WS_SNAPSHOT_READERS_PER_CLIENT="20", BOUNTY_WS_SNAPSHOT_WAIT_SECONDS="3600",
                               BOUNTY_WS_SNAPSHOT_MIN_BYTES_PER_SECOND="1", DATABASE_POOL_MAX="14")
            report("under attack, limits opened up as before (8 readers, 20 per address, no minimum rate)",
                   unshared, baseline)
        report("under attack, the service's limits", measure(database_url, args, attack=True), baseline)
    finally:
        from django.db import connections

        connections.close_all()
        drop_database(args.postgres_url)


if __name__ == "__main__":
    main()
