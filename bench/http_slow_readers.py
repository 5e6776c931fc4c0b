"""Slow readers of the unpaged list: the web process's memory, and other clients' reads meanwhile.

    .venv/bin/python bench/http_slow_readers.py [--bounties 20000] [--readers 20] [--rate 20000]
        [--hold 20] [--database sqlite:////tmp/http-slow-bench/db.sqlite3] [--max-streams N]

1. Seeds `--bounties` bounties of one deployment as the indexer writes them (each row's stored
   JSON body rendered by records.representation.record_body), kept between runs of the same size.
2. Starts a daphne process serving bountysite.asgi as deploy/bounty-web@.service does, behind a
   trusted proxy (BOUNTY_TRUSTED_PROXIES=127.0.0.1), so that each client is the address it sends
   in X-Forwarded-For; rate limit and caches as in production.
3. Baseline: the process's RSS once warm, and other clients' record reads (`/bounties/<id>`, 40,
   4 at a time, from one address): p50 and max.
4. `--readers` clients, each from an address of its own, ask for `GET /bounties` (no limit, cursor
   or q: the whole table, streamed) on sockets with an 8 KiB receive buffer, and read it at
   `--rate` bytes/s each for `--hold` seconds. Meanwhile the process's RSS is sampled every
   0.2 s, and after a few seconds the same 40 record reads run again. A process streams at most
   BOUNTY_HTTP_MAX_STREAMS lists at once (`--max-streams` sets it; 20 lets every reader stream):
   the readers past it are answered 503 after a few seconds.

It prints the RSS growth (peak during the hold, against the baseline of the same run; the target
is at most 100 MB for 20 readers of 200,000 bounties), what the readers would make the process
hold if it buffered their whole bodies (their size times the readers), and the record reads'
p50 / max with their ratio to the baseline.
"""

from __future__ import annotations

import argparse
import os
import socket
import statistics
import subprocess
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime, timedelta
from pathlib import Path

BENCH_DIR = Path(__file__).resolve().parent
PROJECT_DIR = BENCH_DIR.parent
sys.path[:0] = [str(PROJECT_DIR)]

SECRET_KEY = "bench-http-slow-secret-key-0123456789-abcdefghijklmnopqrstuvwxyz-ABCDEFG"
CONTRACT = "0x" + "ab" * 20
USDC = "0x" + "cd" * 20
RECORD_READS = 40
RECORD_READ_CONCURRENCY = 4
TARGET_GROWTH_MB = 100


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise RuntimeError("no VmRSS")


def seed(bounties: int) -> None:
    """The deployment with `bounties` bounties, rendered as the indexer renders them."""
    from django.db import connection, transaction

    from indexer.models import SyncState
    from records.models import Bounty, Deployment
    from records.representation import record_body
    from records.search import join_fields, search_fields

    deployment, _ = Deployment.objects.get_or_create(chain_id=91342, contract_address=CONTRACT,
                                                     defaults={"usdc_address": USDC})
    SyncState.objects.get_or_create(deployment=deployment)
    if Bounty.objects.filter(deployment=deployment).count() == bounties:
        print(f"reusing {bounties:,} bounties")
        return
    with connection.cursor() as cursor:  # an ORM delete collects every row first
        cursor.execute("DELETE FROM records_bounty WHERE deployment_id = %s", [deployment.pk])
    started = time.perf_counter()
    t0 = datetime(2026, 1, 1, tzinfo=UTC)
    for first in range(1, bounties + 1, 5_000):
        rows = []
        for n in range(first, min(bounties, first + 4_999) + 1):
            bounty = Bounty(
                deployment=deployment, bounty_id=n, prompt=f"bounty {n}: translate the attached report " + "x" * 120,
                bounty_amount=10**8 + n, fee_amount=25 * 10**5, bond_amount=10**7, duration=86_400,
                poster="0x" + f"{n:040x}", deadline=t0 + timedelta(days=1, seconds=n), challenge_window=86_400,
                metadata_uri=f'data:application/json,{{"title":"bounty {n}","tags":["docs","translate"]}}',
                metadata_hash="0x" + f"{n:064x}", tx_hash="0x" + f"{n + 1:064x}", block_number=1_000 + n,
                log_index=n % 20, created_at=t0 + timedelta(seconds=30 * n), status="open")
            bounty.search_text = join_fields(search_fields(bounty))
            bounty.body = record_body(bounty, chain_id=deployment.chain_id, contract_address=CONTRACT)
            rows.append(bounty)
        with transaction.atomic():
            Bounty.objects.bulk_create(rows)
    Deployment.objects.filter(pk=deployment.pk).update(bounty_total=bounties)
    SyncState.objects.filter(deployment=deployment).update(last_seq=1)
    print(f"seeded {bounties:,} bounties in {time.perf_counter() - started:.1f} s")


def start_daphne(env: dict[str, str]) -> tuple[subprocess.Popen[bytes], int]:
    port = free_port()
    command = [str(Path(sys.executable).parent / "daphne"), "-v", "0", "-b", "127.0.0.1", "-p", str(port),
               "--ping-interval", "20", "--ping-timeout", "20", "--websocket_timeout", "-1",
               "bountysite.asgi:application"]
    process = subprocess.Popen(command, cwd=PROJECT_DIR, env=env, stdout=subprocess.DEVNULL)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise SystemExit(f"daphne exited with {process.returncode}")
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
            return process, port
        except OSError:
            time.sleep(0.1)
    process.kill()
    raise SystemExit("daphne did not listen within 60 s")


def get(port: int, path: str, address: str) -> tuple[int, bytes, float]:
    """A GET on a connection of its own, read as fast as it comes: status, body, seconds."""
    started = time.perf_counter()
    with socket.create_connection(("127.0.0.1", port), timeout=60) as sock:
        sock.sendall(f"GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nAccept: application/json\r\n"
                     f"X-Forwarded-For: {address}\r\nConnection: close\r\n\r\n".encode())
        received = bytearray()
        while chunk := sock.recv(1 << 16):
            received += chunk
    head, _, body = bytes(received).partition(b"\r\n\r\n")
    return int(head.split(b" ", 2)[1]), body, time.perf_counter() - started


def record_reads(port: int, bounties: int) -> list[float]:
    """RECORD_READS reads of single bounties from one address, RECORD_READ_CONCURRENCY at a time."""
    ids = [1 + (n * 7_919) % bounties for n in range(RECORD_READS)]

    def read(record_id: int) -> float:
        status, _, seconds = get(port, f"/bounties/{record_id}", "10.99.0.1")
        if status != 200:
            raise SystemExit(f"/bounties/{record_id} answered {status}")
        return seconds

    with ThreadPoolExecutor(RECORD_READ_CONCURRENCY) as pool:
        return list(pool.map(read, ids))


class SlowReader(threading.Thread):
    """GET /bounties from its own address, read at `rate` bytes/s through an 8 KiB receive buffer."""

    def __init__(self, port: int, address: str, rate: int, stop: threading.Event) -> None:
        super().__init__(daemon=True)
        self.port, self.address, self.rate, self.stop = port, address, rate, stop
        self.received = 0
        self.status = 0
        self.closed_by_server = False

    def run(self) -> None:
        sock = socket.socket()
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 8_192)
        sock.connect(("127.0.0.1", self.port))
        sock.sendall(f"GET /bounties HTTP/1.1\r\nHost: 127.0.0.1\r\nAccept: application/json\r\n"
                     f"X-Forwarded-For: {self.address}\r\n\r\n".encode())
        started = time.monotonic()
        sock.settimeout(1)
        with sock:
            while not self.stop.is_set():
                try:
                    chunk = sock.recv(2_048)
                except TimeoutError:
                    continue
                except ConnectionResetError:
                    chunk = b""
                if not chunk:
                    self.closed_by_server = True
                    return
                if not self.status:
                    self.status = int(chunk.split(b" ", 2)[1])
                self.received += len(chunk)
                ahead = self.received / self.rate - (time.monotonic() - started)
                if ahead > 0:
                    time.sleep(ahead)


def percentiles(samples: list[float]) -> str:
    return f"p50 {statistics.median(samples) * 1000:.0f} ms, max {max(samples) * 1000:.0f} ms"


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--bounties", type=int, default=20_000)
    parser.add_argument("--readers", type=int, default=20)
    parser.add_argument("--rate", type=int, default=20_000, help="bytes/s each slow reader takes")
    parser.add_argument("--hold", type=float, default=20, help="seconds the slow readers read")
    parser.add_argument("--database", default="sqlite:////tmp/http-slow-bench/db.sqlite3")
    parser.add_argument("--max-streams", type=int, help="the server's BOUNTY_HTTP_MAX_STREAMS (default: the service's)")
    args = parser.parse_args()
    Path("/tmp/http-slow-bench").mkdir(exist_ok=True)
    env = {**os.environ, "DATABASE_URL": args.database, "DJANGO_SECRET_KEY": SECRET_KEY, "DJANGO_DEBUG": "0",
           "DJANGO_ALLOWED_HOSTS": "127.0.0.1", "DJANGO_SECURE_SSL_REDIRECT": "0",
           "BOUNTY_CHAIN_ID": "91342", "BOUNTY_CONTRACT_ADDRESS": CONTRACT, "BOUNTY_USDC_ADDRESS": USDC,
           "BOUNTY_TRUSTED_PROXIES": "127.0.0.1/32", "LOG_LEVEL": "WARNING"}
    for name in ("REDIS_URL", "BOUNTY_RPC_URL"):
        env.pop(name, None)
    if args.max_streams:
        env["BOUNTY_HTTP_MAX_STREAMS"] = str(args.max_streams)
    os.environ.update(env)
    os.environ.pop("REDIS_URL", None)
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "bountysite.settings")
    import django

    django.setup()
    from django.core.management import call_command

    call_command("migrate", verbosity=0)
    seed(args.bounties)

    process, port = start_daphne(env)
    stop = threading.Event()
    readers: list[SlowReader] = []
    try:
        status, body, seconds = get(port, "/bounties", "10.99.0.2")  # the whole list once, read fast
        if status != 200 or not body:
            raise SystemExit(f"GET /bounties answered {status}")
        body_mb = len(body) / 1e6  # chunked: a little more than the array
        print(f"GET /bounties read fast: {body_mb:.1f} MB in {seconds:.1f} s")
        record_reads(port, args.bounties)  # warm
        time.sleep(1)
        baseline = rss_mb(process.pid)
        quiet = record_reads(port, args.bounties)
        print(f"baseline: RSS {baseline:.0f} MB; record reads alone: {percentiles(quiet)}")

        readers = [SlowReader(port, f"10.98.{n // 250}.{n % 250 + 1}", args.rate, stop) for n in range(args.readers)]
        for reader in readers:
            reader.start()
        peak = baseline
        started = time.monotonic()
        busy: list[float] = []
        while time.monotonic() - started < args.hold:
            peak = max(peak, rss_mb(process.pid))
            if not busy and time.monotonic() - started > min(5, args.hold / 2):
                sampler = threading.Thread(target=lambda: busy.extend(record_reads(port, args.bounties)))
                sampler.start()
                while sampler.is_alive():
                    peak = max(peak, rss_mb(process.pid))
                    sampler.join(0.2)
            time.sleep(0.2)
        taken = sum(reader.received for reader in readers) / 1e6
        cut = sum(reader.closed_by_server for reader in readers)
        streamed = sum(reader.status == 200 for reader in readers)
        refused = sum(reader.status == 503 for reader in readers)
        growth = peak - baseline
        print(f"{args.readers} slow readers at {args.rate / 1000:.0f} KB/s for {args.hold:.0f} s took {taken:.1f} MB: "
              f"{streamed} streamed, {refused} answered 503, {cut} closed by the server")
        print(f"RSS: baseline {baseline:.0f} MB, peak {peak:.0f} MB: growth {growth:.0f} MB "
              f"(whole bodies buffered would be {args.readers * body_mb:,.0f} MB; "
              f"target <= {TARGET_GROWTH_MB} MB: {'met' if growth <= TARGET_GROWTH_MB else 'NOT met'})")
        print(f"record reads while they read: {percentiles(busy)} "
              f"(p50 x{statistics.median(busy) / statistics.median(quiet):.1f}, "
              f"max x{max(busy) / max(quiet):.1f} of the baseline)")
        print(f"BENCH_SUMMARY bounties={args.bounties} readers={args.readers} streamed={streamed} "
              f"baseline_mb={baseline:.0f} peak_mb={peak:.0f} growth_mb={growth:.0f} body_mb={body_mb:.1f} "
              f"reads_p50_ms={statistics.median(busy) * 1000:.0f} reads_max_ms={max(busy) * 1000:.0f} "
              f"quiet_p50_ms={statistics.median(quiet) * 1000:.0f} quiet_max_ms={max(quiet) * 1000:.0f}")
    finally:
        stop.set()
        for reader in readers:
            reader.join(5)
        process.terminate()
        try:
            process.wait(10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


if __name__ == "__main__":
    main()
