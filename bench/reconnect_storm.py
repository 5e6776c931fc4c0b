"""Reconnect storms: every websocket client of a web process back at once, after a restart or a blip.

    .venv/bin/python bench/reconnect_storm.py                       # N = 1,000 and 3,000, restart and blip
    .venv/bin/python bench/reconnect_storm.py --quick               # N = 200, shorter windows: a smoke run
    .venv/bin/python bench/reconnect_storm.py --clients 1000 --scenarios blip --replica
        [--bounties 20000] [--quiet-seconds 10] [--timeout 180] [--client-processes 2]
        [--postgres-url postgresql://postgres@127.0.0.1:5432/postgres] [--keep-logs]

One daphne started as deploy/bounty-web@.service starts it (its ExecStart, read from the unit
through the deployment tests' `unit_command`, its instance a free port; its LimitNOFILE; the
settings it reads from bounty.env: PostgreSQL, Redis, DEBUG off, BOUNTY_TRUSTED_PROXIES=127.0.0.1),
on a PostgreSQL database of the bench's own (`bench_reconnect_storm`, created and dropped) seeded
with `--bounties` bounties as the indexer writes them, and a Redis of its own (redis-server on a
free port: the indexer's wake-ups and the per-address connection counts go through it). A writer
process (bench/storm_writer.py) commits a change twice a second throughout, as the indexer does.
N clients (bench/storm_clients.py, split over `--client-processes` processes) each follow the
feed from an address of its own (X-Forwarded-For) and reconnect as the Python client does:
`bounty_client.events.Backoff` for the pauses, `?since=<the last position>`. They start from the
head's position, so no snapshot is ever due to them.

For each N, each scenario runs against the service and then against the **plain server** (the
`websockets` package, asyncio, as its documentation deploys it: on SIGTERM it closes every
connection with 1001; it sends one message on accept; it listens with the unit's backlog), each
with N clients of their own (a /16 of addresses for each run), opened in batches of 50 and
followed for `--quiet-seconds` before the storm:

- **restart**: SIGTERM to the server, and as soon as it has exited a new one on the same port
  (as systemd's restart does: Restart=, ExecStart=). Measured: the old process's exit after the
  SIGTERM (target within 2 s), and from the SIGTERM, the time until every client has resumed.
- **blip**: the clients reach the server through a loopback proxy (bench/storm_proxy.py, with the
  unit's listen backlog) that resets every connection at once, both sides, while the server runs
  on. Measured from the reset.

A client has **resumed** once its new connection has delivered every change committed before
that connection was accepted (its 101): at the message of the newest such seq, or, when it had
missed none, at its 101 (counted once that connection has delivered its next message). Against
the plain server: at the message it sends on accept. The 101s of those connections are printed
too (accepted again), to tell the wait for a server that listens from the catching up. The ratio
service / plain of the time until every client is back is the figure to judge (target at most 2:
the machine is noisy, the plain server ran beside it).

During each storm of the service: snapshots sent to the resuming clients (target none); seqs lost
or repeated, each client checking that its seqs run on by one across its connections (target
none); the delay from the writer's commit to its receipt of the live messages of the clients
already back (committed after the client resumed, and at most TAIL, 2 s, after the last client
did, so that a storm whose clients all come back together still has samples; p99, target at most
250 ms), beside the same before the storm; fresh clients (no `since`, each from a new
address) taking the whole snapshot one after another from when the server accepts again until
every client is back, the slowest (target within 0.5 s), beside three before the storm; and the
database's transactions per resumed client: `xact_commit + xact_rollback` of the bench's
database in pg_stat_database (read from another database), from just before the storm until 11 s
after its end (a backend's statistics reach the view within 10 s of its last transaction), minus
the writer's commits, divided by N (target at most 0.1). That figure includes the web process's
own steady reads over the window (its feed polls the change log every BOUNTY_WS_POLL_MS): it is
an upper bound. It is printed also net of the web process's quiet rate (measured over the quiet
window, the writer's commits taken out, and counted only while a process listened), an estimate,
beside the storm's resumes by what vouched for them (`bounty_ws_resumes_total{source}`). Also:
the close codes and failures the clients saw and their first pauses, the server's CPU, the client
processes' and the proxy's CPU and their event loops' largest lag (how busy the client side was:
a lag delays the times they note), and what daphne logged (LOG_LEVEL=WARNING).

`--replica`: the 1,000-client blip (the first N of `--clients`) once more with the web process
reading from a streaming standby 3 s behind (DATABASE_REPLICA_URLS; a PostgreSQL primary and a
`pg_basebackup -R` standby of the bench's own, `recovery_min_apply_delay` 3 s, as
bench/read_replicas.py makes them): followers' delay and fresh snapshots during the storm
against the same before it.

Settings the bench changes from a default deployment: BOUNTY_TRUSTED_PROXIES=127.0.0.1 (the
clients' addresses come from X-Forwarded-For, as behind nginx) and DJANGO_SECURE_SSL_REDIRECT=0
(its /metrics is read over plain HTTP on loopback). The websocket's caps stay at their defaults:
10,000 connections a process, 20 at once and 60 connects a minute per address (each client has
its own address), 2 snapshots at once per address (each fresh client has its own too).

The last line is `BENCH_SUMMARY {...}` with every figure. Without PostgreSQL or redis-server it
says what is missing and measures nothing.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import math
import multiprocessing
import os
import re
import resource
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import traceback
from array import array
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any

BENCH_DIR = Path(__file__).resolve().parent
PROJECT_DIR = BENCH_DIR.parent
sys.path[:0] = [str(PROJECT_DIR), str(BENCH_DIR)]

from full_reads import fresh_snapshot, grouped  # noqa: E402
from storm_clients import client_worker  # noqa: E402
from storm_proxy import proxy_worker  # noqa: E402
from storm_writer import writer_worker  # noqa: E402
from ws_broadcast import cpu_seconds, free_port  # noqa: E402

SECRET_KEY = "bench-reconnect-storm-secret-0123456789-abcdefghijklmnopqrstuvwxyz-ABCDEFG"
CONTRACT = "0x" + "ab" * 20  # bench/ws_fairness.py's seed
USDC = "0x" + "cd" * 20
DBNAME = "bench_reconnect_storm"
WEB_UNIT = "bounty-web@.service"
TWISTED_BACKLOG = 50  # daphne's listen backlog when the command line sets none
COMMIT_INTERVAL = 0.5  # a change twice a second
REPLICA_LAG = 3.0
STATS_SETTLE = 11.0  # seconds for an idle backend's statistics to reach pg_stat_database (10 s), and a margin
TAIL = 2.0  # seconds of live messages counted after the last client is back
EXIT_TARGET, RATIO_TARGET, DELAY_TARGET_MS, FRESH_TARGET, XACT_TARGET = 2.0, 2.0, 250.0, 0.5, 0.1
FRESH_BEFORE = 3  # fresh snapshots timed before each storm
METRICS = ("bounty_ws_resumes_total", "bounty_ws_closes_total", "bounty_ws_connections_open",
           "bounty_spools_produced_total")

PLAIN_SERVER = """
import asyncio, json, signal, sys, websockets
from websockets.asyncio.server import serve
HELLO = json.dumps({"type": "hello", "payload": {}, "seq": 0})
async def handler(ws):
    ws.request.headers.get("X-Forwarded-For")  # read as the service reads it, not used
    await ws.send(HELLO)
    await ws.wait_closed()
async def main():
    stop = asyncio.get_running_loop().create_future()
    asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, stop.set_result, None)
    async with serve(handler, "127.0.0.1", int(sys.argv[1]), compression=None, ping_interval=20, ping_timeout=20,
                     backlog=int(sys.argv[2])):
        await stop  # leaving closes every connection with 1001, as websockets' deployment guide does
asyncio.run(main())
"""


# ---------------------------------------------------------------------------- small helpers


def quantile(values: list[float], q: float) -> float | None:
    if not values:
        return None
    ordered = sorted(values)
    return ordered[max(0, math.ceil(q * len(ordered)) - 1)]


def fmt(value: float | None, digits: int = 2, unit: str = "") -> str:
    return "-" if value is None else f"{value:.{digits}f}{unit}"


def met(ok: bool | None) -> str:
    return "-" if ok is None else ("met" if ok else "NOT met")


def process_cpu(pid: int) -> float:
    try:
        return sum(cpu_seconds(pid))
    except OSError:  # exited
        return 0.0


def wait_listening(port: int, process: subprocess.Popen[bytes], timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while True:
        if process.poll() is not None:
            raise RuntimeError(f"the server on port {port} exited with {process.returncode}")
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
            return
        except OSError:
            if time.monotonic() > deadline:
                raise RuntimeError(f"the server on port {port} did not listen within {timeout:.0f} s") from None
            time.sleep(0.01)


def web_command(port: int, env: dict[str, str]) -> list[str]:
    """deploy/bounty-web@.service's ExecStart for the instance `port`, with this virtualenv's daphne."""
    from tests.deployment.test_deploy_files import unit_command

    return unit_command(WEB_UNIT, str(port), env)


def listen_backlog(command: list[str]) -> int:
    """The listen backlog a daphne command line asks for (its endpoint's `backlog=`)."""
    found = re.search(r"\bbacklog=(\d+)", " ".join(command))
    return int(found[1]) if found else TWISTED_BACKLOG


def unit_nofile() -> int:
    """The open files deploy/bounty-web@.service lets a web process have (LimitNOFILE=)."""
    from tests.deployment.shipped import limit_nofile

    return limit_nofile()


def set_nofile(wanted: int) -> None:
    """In the server's child process: `wanted` open files, raising the hard limit if this user may
    (as systemd does), else as far as it allows."""
    _soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    try:
        resource.setrlimit(resource.RLIMIT_NOFILE, (wanted, max(hard, wanted)))
    except (ValueError, OSError):
        resource.setrlimit(resource.RLIMIT_NOFILE, (min(hard, wanted), hard))


def xacts(admin_url: str, database: str) -> int:
    """The database's transactions so far (pg_stat_database), read from another database."""
    import psycopg

    with psycopg.connect(admin_url, autocommit=True, connect_timeout=5) as admin:
        row = admin.execute("SELECT xact_commit + xact_rollback FROM pg_stat_database WHERE datname = %s",
                            (database,)).fetchone()
    return int(row[0]) if row else 0


# ---------------------------------------------------------------------------- the processes


class Pipe:
    """A child process driven over a pipe: each command answered once."""

    def __init__(self, target: Callable[..., None], *args: Any) -> None:
        context = multiprocessing.get_context("spawn")
        self.pipe, theirs = context.Pipe()
        self.process = context.Process(target=target, args=(theirs, *args), daemon=True)
        self.process.start()

    @property
    def pid(self) -> int:
        return self.process.pid or 0

    def ask(self, *command: Any, timeout: float = 120) -> Any:
        self.pipe.send(command)
        return self.answer(timeout)

    def answer(self, timeout: float = 120) -> Any:
        if not self.pipe.poll(timeout):
            raise RuntimeError(f"a child process did not answer {timeout:.0f} s")
        answer = self.pipe.recv()
        if isinstance(answer, Exception):
            raise RuntimeError(f"a child process failed: {answer}")
        return answer

    def stop(self) -> None:
        if self.process.is_alive():
            with contextlib.suppress(OSError):
                self.pipe.send(("exit",))
            self.process.join(10)
            if self.process.is_alive():
                self.process.kill()
                self.process.join()


class Clients:
    """The client processes (bench/storm_clients.py), their share of each command."""

    def __init__(self, count: int, head: Any) -> None:
        self.workers = [Pipe(client_worker, head) for _ in range(count)]

    def all(self, *command: Any, timeout: float = 120) -> list[Any]:
        for worker in self.workers:
            worker.pipe.send(command)
        return [worker.answer(timeout) for worker in self.workers]

    def open(self, port: int, addresses: list[str], position: str, seq: int, plain: bool) -> int:
        shares = [addresses[n::len(self.workers)] for n in range(len(self.workers))]
        for worker, share in zip(self.workers, shares, strict=True):
            worker.pipe.send(("open", "127.0.0.1", port, share, position, seq, plain))
        return sum(worker.answer(600) for worker in self.workers)

    def cpu(self) -> float:
        return sum(process_cpu(worker.pid) for worker in self.workers)

    def stop(self) -> None:
        for worker in self.workers:
            worker.stop()


@dataclass
class Setup:
    args: argparse.Namespace
    logs: Path
    env: dict[str, str]  # the web process's
    admin_url: str  # a database on the same server, for pg_stat_database
    database: str
    writer: Pipe
    clients: Clients
    head: Any
    runs: int = 0  # each run's clients take addresses of a /16 of their own
    fresh: int = 0

    def addresses(self, count: int) -> list[str]:
        self.runs += 1
        return [f"10.{self.runs}.{n // 250}.{n % 250 + 1}" for n in range(count)]

    def fresh_address(self) -> str:
        self.fresh += 1
        return f"172.16.{self.fresh // 250}.{self.fresh % 250 + 1}"


class Server:
    """The service's daphne, or the plain server, on `port`; restarted as systemd does."""

    def __init__(self, setup: Setup, plain: bool, port: int, name: str, env: dict[str, str] | None = None) -> None:
        self.setup, self.plain, self.port, self.name = setup, plain, port, name
        self.env = env or setup.env
        self.generation = 0
        self.process = self._start()

    def _start(self) -> subprocess.Popen[bytes]:
        self.generation += 1
        log = (self.setup.logs / f"{self.name}-{self.generation}.log").open("wb")
        command = web_command(self.port, self.env)
        if self.plain:  # with the web unit's listen backlog: what is compared is what each does with the connections
            command = [sys.executable, "-c", PLAIN_SERVER, str(self.port), str(listen_backlog(command))]
        with log:
            return subprocess.Popen(command, cwd=PROJECT_DIR, env=self.env, stdout=log, stderr=subprocess.STDOUT,
                                    preexec_fn=partial(set_nofile, unit_nofile()))

    def wait_listening(self) -> None:
        wait_listening(self.port, self.process)

    def restart(self) -> tuple[float, float, float]:
        """SIGTERM, and a new process once it has exited: (exited, spawned, listening), perf_counter."""
        self.process.send_signal(signal.SIGTERM)
        deadline = time.perf_counter() + 30  # the unit's TimeoutStopSec, then SIGKILL
        while self.process.poll() is None:
            if time.perf_counter() > deadline:
                self.process.kill()
            time.sleep(0.002)
        exited = time.perf_counter()
        self.process = self._start()
        spawned = time.perf_counter()
        self.wait_listening()
        return exited, spawned, time.perf_counter()

    def log_lines(self) -> list[str]:
        lines: list[str] = []
        for generation in range(1, self.generation + 1):
            path = self.setup.logs / f"{self.name}-{generation}.log"
            if path.exists():
                lines += path.read_text(errors="replace").splitlines()
        return lines

    def metrics(self) -> dict[str, float]:
        from full_reads import http_get

        try:
            _, _, body = asyncio.run(http_get(self.port, "/metrics", timeout=10))
        except (OSError, TimeoutError, ValueError, asyncio.IncompleteReadError):
            return {}
        values = {}
        for line in body.decode(errors="replace").splitlines():
            if line.startswith(METRICS):
                name, _, value = line.rpartition(" ")
                values[name] = float(value)
        return values

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()


class Proxy:
    def __init__(self, upstream_port: int, backlog: int) -> None:
        self.port = free_port()
        self.worker = Pipe(proxy_worker, self.port, upstream_port, backlog)
        self.worker.answer(30)

    def cut(self) -> tuple[int, float]:
        return self.worker.ask("cut")  # type: ignore[no-any-return]

    def stop(self) -> None:
        self.worker.stop()


class FreshSnapshots(threading.Thread):
    """Fresh clients (no `since`), one after another, each from a new address: seconds to
    `snapshot.complete` (full_reads.fresh_snapshot)."""

    def __init__(self, setup: Setup, port: int) -> None:
        super().__init__(daemon=True)
        self.setup, self.port = setup, port
        self.stopped = threading.Event()
        self.results: list[tuple[float | None, str]] = []

    def run(self) -> None:
        while True:
            self.results.append(asyncio.run(fresh_snapshot(self.port, self.setup.fresh_address())))
            if self.stopped.wait(0.1):
                return

    def seconds(self) -> list[float]:
        return [seconds for seconds, _ in self.results if seconds is not None]

    def failures(self) -> list[str]:
        return [note for seconds, note in self.results if seconds is None]


def fresh_before(setup: Setup, port: int) -> tuple[list[float], list[str]]:
    results = [asyncio.run(fresh_snapshot(port, setup.fresh_address())) for _ in range(FRESH_BEFORE)]
    return [s for s, _ in results if s is not None], [note for s, note in results if s is None]


# ---------------------------------------------------------------------------- one storm


@dataclass
class Storm:
    kind: str  # restart or blip
    server: str  # service, plain, or service-replica
    clients: int
    opened: int = 0
    resumed: int = 0
    all_back: float | None = None  # seconds from the storm's start until every client resumed
    resume_p50: float | None = None
    resume_p90: float | None = None
    accepted_p50: float | None = None  # the 101 of the connection each client resumed on
    accepted_max: float | None = None
    dropped_by: float | None = None  # seconds until the last old connection ended
    old_exit: float | None = None  # restart: seconds from the SIGTERM to the old process's exit
    new_listening: float | None = None  # restart: from the SIGTERM until the new one listened
    new_start: float | None = None  # restart: from its spawn until it listened
    cut: tuple[int, float] | None = None  # blip: connections reset, and how long the proxy took
    snapshots: int = 0
    gaps: int = 0
    repeats: int = 0
    delay_quiet_p99: float | None = None  # ms
    delay_quiet_p50: float | None = None
    delay_storm_p99: float | None = None
    delay_storm_p50: float | None = None
    delay_storm_max: float | None = None
    delay_samples: int = 0
    fresh_before: list[float] = field(default_factory=list)
    fresh_during: list[float] = field(default_factory=list)
    fresh_failures: list[str] = field(default_factory=list)
    xacts_storm: int | None = None
    xacts_writer: int | None = None
    xacts_quiet_rate: float | None = None
    xacts_window: float | None = None
    xacts_replica: int | None = None  # on the standby, over the same window
    replica_per_client_net: float | None = None  # (standby - its quiet rate * window) / N
    per_client: float | None = None  # (storm - writer) / N
    per_client_net: float | None = None  # (storm - quiet rate * window) / N
    outcomes: dict[str, int] = field(default_factory=dict)
    attempts: int = 0
    first_pauses: tuple[float, float, float] | None = None  # min, median, max of the first pause after the drop
    server_cpu: float | None = None
    clients_cpu: float | None = None
    proxy_cpu: float | None = None
    storm_seconds: float | None = None
    client_lag: float | None = None
    metrics: dict[str, float] = field(default_factory=dict)
    resumes: dict[str, int] = field(default_factory=dict)  # the storm's, by source (bounty_ws_resumes_total)
    log: list[tuple[int, str]] = field(default_factory=list)
    error: str | None = None

    @property
    def fresh_during_max(self) -> float | None:
        return max(self.fresh_during) if self.fresh_during else None


def commits(setup: Setup) -> dict[int, float]:
    return setup.writer.ask("commits")  # type: ignore[no-any-return]


def run_storm(setup: Setup, kind: str, plain: bool, count: int, *, name: str = "service",
              env: dict[str, str] | None = None, stats: list[tuple[str, str]] | None = None) -> Storm:
    """One storm: a server (behind the proxy for a blip), `count` clients following it, the quiet
    window, the storm, until every client is back (or `--timeout`), its figures.

    `stats`: the (admin URL, database) whose transactions are counted: the bench's database by
    default, the primary and the standby with a replica."""
    args = setup.args
    storm = Storm(kind, "plain" if plain else name, count)
    stats = stats if stats is not None else [(setup.admin_url, setup.database)]
    port = free_port()
    server = Server(setup, plain, port, f"{storm.server}-{kind}-{count}", env)
    proxy: Proxy | None = None
    fresh: FreshSnapshots | None = None
    try:
        server.wait_listening()
        proxy = Proxy(port, listen_backlog(web_command(port, server.env))) if kind == "blip" else None
        client_port = proxy.port if proxy else port
        position, seq = setup.writer.ask("position")
        storm.opened = setup.clients.open(client_port, setup.addresses(count), position, seq, plain)
        deadline = time.monotonic() + 60
        while sum(setup.clients.all("following")) < count:  # every client follows the feed
            if time.monotonic() > deadline:
                raise RuntimeError(f"{sum(setup.clients.all('following'))} of {count} clients got a message in 60 s")
            time.sleep(0.2)
        print(f"  {storm.server} {kind}, N={count}: {storm.opened} clients opened and following; load average "
              f"{os.getloadavg()[0]:.1f}", flush=True)

        if not plain:
            storm.fresh_before, failures = fresh_before(setup, client_port)
            storm.fresh_failures += [f"before: {note}" for note in failures]
        quiet_start = time.perf_counter()
        before = [xacts(url, database) for url, database in stats] if not plain else []
        writer_before = len(commits(setup))
        time.sleep(max(0.0, quiet_start + args.quiet_seconds - time.perf_counter()))
        quiet_end = time.perf_counter()
        at_start = [xacts(url, database) for url, database in stats] if not plain else []
        writer_at_start = len(commits(setup))
        if not plain:  # the web process's own, with every client following and nothing else going on
            storm.xacts_quiet_rate = (at_start[0] - before[0] - (writer_at_start - writer_before)) / (
                quiet_end - quiet_start)

        cpu = (setup.clients.cpu(), process_cpu(proxy.worker.pid) if proxy else 0.0)
        metrics_before = server.metrics() if not plain and kind == "blip" else {}
        started = time.perf_counter()
        setup.clients.all("mark", started)
        if kind == "restart":
            exited, spawned, listening = server.restart()
            storm.old_exit, storm.new_listening = exited - started, listening - started
            storm.new_start = listening - spawned
        else:
            assert proxy is not None
            storm.cut = proxy.cut()
        if not plain:
            fresh = FreshSnapshots(setup, client_port)
            fresh.start()
        server_cpu = process_cpu(server.process.pid)
        lag = 0.0
        while True:
            statuses = setup.clients.all("status")
            resumed = sum(status[0] for status in statuses)
            lag = max([lag, *(status[2] for status in statuses)])
            if resumed >= count or time.perf_counter() - started > args.timeout:
                break
            time.sleep(0.05)
        back = time.perf_counter()
        storm.storm_seconds = back - started
        storm.server_cpu = process_cpu(server.process.pid) - (0.0 if kind == "restart" else server_cpu)
        storm.clients_cpu = setup.clients.cpu() - cpu[0]
        storm.proxy_cpu = process_cpu(proxy.worker.pid) - cpu[1] if proxy else None
        storm.client_lag = lag
        time.sleep(TAIL)
        if fresh is not None:
            fresh.stopped.set()
            fresh.join(120)
            storm.fresh_during = fresh.seconds()
            storm.fresh_failures += [f"during: {note}" for note in fresh.failures()]
        if not plain:
            time.sleep(max(0.0, back + STATS_SETTLE - time.perf_counter()))
            after = [xacts(url, database) for url, database in stats]
            window = time.perf_counter() - quiet_end
            storm.xacts_storm = after[0] - at_start[0]
            storm.xacts_writer = len(commits(setup)) - writer_at_start
            storm.xacts_window = window
            storm.per_client = (storm.xacts_storm - storm.xacts_writer) / count
            # The web process's quiet rate, over the window but while no process listened (a restart).
            served = window - (storm.new_listening or 0.0)
            storm.per_client_net = (storm.per_client * count - (storm.xacts_quiet_rate or 0.0) * served) / count
            if len(stats) > 1:
                storm.xacts_replica = after[1] - at_start[1]
                replica_rate = (at_start[1] - before[1]) / (quiet_end - quiet_start)
                storm.replica_per_client_net = (storm.xacts_replica - replica_rate * window) / count
        analyse(storm, setup.clients.all("collect", timeout=300), commits(setup), quiet_start, started,
                started + storm.storm_seconds)
        if not plain:
            storm.metrics = server.metrics()
            for name, value in storm.metrics.items():
                if found := re.match(r'bounty_ws_resumes_total\{source="(\w+)"\}', name):
                    storm.resumes[found[1]] = round(value - metrics_before.get(name, 0.0))
    except Exception as error:  # printed; the next storm runs all the same
        traceback.print_exc()
        storm.error = f"{type(error).__name__}: {error}"
    finally:
        if fresh is not None:
            fresh.stopped.set()
        try:
            setup.clients.all("close", timeout=120)
        except RuntimeError as error:
            storm.error = storm.error or str(error)
        if proxy is not None:
            proxy.stop()
        server.stop()
        storm.log = grouped(server.log_lines())
    report(storm)
    return storm


def analyse(storm: Storm, collected: list[list[dict[str, Any]]], committed: dict[int, float], quiet_start: float,
            started: float, back: float) -> None:
    quiet: list[float] = []
    during: list[float] = []
    resumed: list[float] = []
    accepted: list[float] = []
    dropped: list[float] = []
    outcomes: Counter[str] = Counter()
    pauses: list[float] = []
    for share in collected:
        for client in share:
            storm.gaps += client["gaps"]
            storm.repeats += client["repeats"]
            storm.snapshots += client["snapshots"]
            storm.attempts += client["attempts"]
            outcomes.update(client["outcomes"])
            if client["pauses"]:
                pauses.append(client["pauses"][0])
            if client["dropped"] is not None:
                dropped.append(client["dropped"] - started)
            if client["resumed"] is not None:
                resumed.append(client["resumed"] - started)
                if client["accepted"] is not None:
                    accepted.append(client["accepted"] - started)
            if storm.server == "plain":
                continue
            seqs, times = array("q"), array("d")
            seqs.frombytes(client["seqs"])
            times.frombytes(client["times"])
            for seq, at in zip(seqs, times, strict=True):
                commit = committed.get(seq)
                if commit is None:
                    continue
                if quiet_start <= commit < started:
                    quiet.append((at - commit) * 1000)
                elif started <= commit <= back + TAIL and client["resumed"] is not None and commit >= client["resumed"]:
                    during.append((at - commit) * 1000)
    storm.resumed = len(resumed)
    storm.all_back = max(resumed) if len(resumed) >= storm.clients else None
    storm.resume_p50, storm.resume_p90 = quantile(resumed, 0.5), quantile(resumed, 0.9)
    storm.accepted_p50, storm.accepted_max = quantile(accepted, 0.5), max(accepted) if accepted else None
    storm.dropped_by = max(dropped) if dropped else None
    storm.outcomes = dict(outcomes.most_common())
    if pauses:
        storm.first_pauses = (min(pauses), statistics.median(pauses), max(pauses))
    storm.delay_quiet_p50, storm.delay_quiet_p99 = quantile(quiet, 0.5), quantile(quiet, 0.99)
    storm.delay_storm_p50, storm.delay_storm_p99 = quantile(during, 0.5), quantile(during, 0.99)
    storm.delay_storm_max = max(during) if during else None
    storm.delay_samples = len(during)
    # The commits are the writer's: the seqs a client got are checked against them above.
    del committed


def report(storm: Storm) -> None:
    s = storm
    head = f"  {s.server} {s.kind}, N={s.clients}:"
    if s.error:
        print(f"{head} FAILED: {s.error}")
    back = fmt(s.all_back, 2, " s") if s.all_back is not None else f"NOT all back ({s.resumed} of {s.clients})"
    line = (f"{head} every client back after {back} (p50 {fmt(s.resume_p50)} s, p90 {fmt(s.resume_p90)} s; "
            f"accepted again: p50 {fmt(s.accepted_p50)} s, the last {fmt(s.accepted_max)} s)")
    if s.kind == "restart":
        line += (f"; old process exited {fmt(s.old_exit)} s after SIGTERM, the new one listened at "
                 f"{fmt(s.new_listening)} s ({fmt(s.new_start)} s after its start)")
    elif s.cut is not None:
        line += f"; the proxy reset {s.cut[0]} sockets in {s.cut[1] * 1000:.0f} ms"
    print(line)
    pauses = "-" if s.first_pauses is None else "/".join(f"{x:.2f}" for x in s.first_pauses)
    print(f"    old connections ended by {fmt(s.dropped_by)} s; connection attempts {s.attempts}: {s.outcomes}; the "
          f"first pause (Backoff) min/median/max {pauses} s")
    if s.server != "plain":
        print(f"    snapshots to resumed clients {s.snapshots}, gaps {s.gaps}, repeats {s.repeats}; live delay p50/p99 "
              f"{fmt(s.delay_storm_p50, 0)}/{fmt(s.delay_storm_p99, 0)} ms (max {fmt(s.delay_storm_max, 0)}, "
              f"{s.delay_samples} messages) against {fmt(s.delay_quiet_p50, 0)}/{fmt(s.delay_quiet_p99, 0)} ms before")
        failed = f"; failed: {s.fresh_failures[:3]}" if s.fresh_failures else ""
        print(f"    fresh snapshots: before {[round(x, 3) for x in s.fresh_before]}, during "
              f"{[round(x, 3) for x in s.fresh_during]}{failed}")
        print(f"    transactions: {s.xacts_storm} in {fmt(s.xacts_window, 1)} s, the writer's {s.xacts_writer}, "
              f"the web process's quiet rate {fmt(s.xacts_quiet_rate, 1)}/s: {fmt(s.per_client, 3)} per client "
              f"({fmt(s.per_client_net, 3)} net of the quiet rate)")
        if s.xacts_replica is not None:
            print(f"    on the standby: {s.xacts_replica} transactions, {fmt(s.replica_per_client_net, 3)} per client "
                  "net of its quiet rate")
        if s.metrics:
            print(f"    the storm's resumes by source: {s.resumes}; server metrics after: {s.metrics}")
    print(f"    CPU during the storm ({fmt(s.storm_seconds)} s): server {fmt(s.server_cpu)} s, client processes "
          f"{fmt(s.clients_cpu)} s{f', proxy {fmt(s.proxy_cpu)} s' if s.proxy_cpu is not None else ''}; the clients' "
          f"event loops lagged at most {fmt(s.client_lag * 1000 if s.client_lag is not None else None, 0)} ms")
    for count, line in s.log[:8]:
        print(f"    server log: {count} x {line[:300]}")
    sys.stdout.flush()


# ---------------------------------------------------------------------------- the table


def table(storms: list[Storm]) -> None:
    print("\n== Figures (targets; ratios against the plain server of the same run)")
    header = (f"{'N':>6} {'scenario':<8} {'server':<16} {'back':>8} {'plain':>8} {'ratio':>6} {'exit':>6} "
              f"{'snap':>5} {'gap/rep':>8} {'p99 ms':>8} {'before':>7} {'fresh s':>8} {'before':>7} "
              f"{'xact/N':>7} {'net':>7} {'resumes mem/db/none':>20}")
    print(header)
    for s in storms:
        if s.server == "plain":
            continue
        plain = next((p for p in storms if p.server == "plain" and p.kind == s.kind and p.clients == s.clients), None)
        ratio = s.all_back / plain.all_back if s.all_back and plain and plain.all_back else None
        print(f"{s.clients:>6} {s.kind:<8} {s.server:<16} {fmt(s.all_back):>8} "
              f"{fmt(plain.all_back if plain else None):>8} {fmt(ratio):>6} {fmt(s.old_exit):>6} {s.snapshots:>5} "
              f"{f'{s.gaps}/{s.repeats}':>8} {fmt(s.delay_storm_p99, 0):>8} {fmt(s.delay_quiet_p99, 0):>7} "
              f"{fmt(s.fresh_during_max, 3):>8} "
              f"{fmt(statistics.median(s.fresh_before) if s.fresh_before else None, 3):>7} "
              f"{fmt(s.per_client, 3):>7} {fmt(s.per_client_net, 3):>7} {resumes(s):>20}")
    print(f"targets: back within {RATIO_TARGET:g}x the plain server's time; old process exits within "
          f"{EXIT_TARGET:g} s; no snapshot, gap or repeat; live delay p99 <= {DELAY_TARGET_MS:g} ms; fresh "
          f"snapshot during the storm <= {FRESH_TARGET:g} s; <= {XACT_TARGET:g} transactions per resumed client")
    for s in storms:
        if s.server == "plain":
            continue
        plain = next((p for p in storms if p.server == "plain" and p.kind == s.kind and p.clients == s.clients), None)
        ratio = s.all_back / plain.all_back if s.all_back and plain and plain.all_back else None
        checks = [
            ("ratio", None if ratio is None else ratio <= RATIO_TARGET),
            ("exit", None if s.old_exit is None else s.old_exit <= EXIT_TARGET),
            ("no snapshot", s.snapshots == 0), ("no gap or repeat", s.gaps == 0 and s.repeats == 0),
            ("delay p99", None if s.delay_storm_p99 is None else s.delay_storm_p99 <= DELAY_TARGET_MS),
            ("fresh snapshot", None if s.fresh_during_max is None else
             s.fresh_during_max <= FRESH_TARGET and not [f for f in s.fresh_failures if f.startswith("during")]),
            ("transactions", None if s.per_client is None else s.per_client <= XACT_TARGET),
        ]
        verdicts = [f"{name} {met(ok)}" for name, ok in checks]
        if s.per_client is not None and s.per_client > XACT_TARGET and s.per_client_net is not None:
            verdicts[-1] += f" ({'met' if s.per_client_net <= XACT_TARGET else 'NOT met'} net of the quiet rate)"
        print(f"  N={s.clients} {s.kind} {s.server}: " + ", ".join(verdicts))
    print("  (transactions per client include the web process's own steady reads over the window, the feed's polls: "
          "an upper bound; net of the quiet rate, an estimate that a busy process's slower polls move below zero)")


def resumes(storm: Storm) -> str:
    if not storm.resumes:
        return "-"
    return "/".join(str(storm.resumes.get(source, 0)) for source in ("memory", "database", "none"))


# ---------------------------------------------------------------------------- main


def missing(admin_url: str) -> list[str]:
    problems = []
    try:
        import psycopg
    except ImportError:
        return ["psycopg (./scripts/setup)"]
    try:
        psycopg.connect(admin_url, connect_timeout=5).close()
    except psycopg.Error as error:
        problems.append(f"PostgreSQL at {admin_url.rsplit('@', 1)[-1]} ({str(error).strip()})")
    if shutil.which("redis-server") is None:
        problems.append("redis-server on PATH (apt-get install redis-server)")
    daphne = Path(sys.executable).parent / "daphne"
    if not daphne.exists():
        problems.append(f"daphne in the virtualenv ({daphne}; ./scripts/setup)")
    return problems


def database(admin_url: str, name: str, drop_only: bool = False) -> str:
    import psycopg

    with psycopg.connect(admin_url, autocommit=True, connect_timeout=5) as admin:
        admin.execute(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")
        if not drop_only:
            admin.execute(f"CREATE DATABASE {name}")
    return admin_url.rsplit("/", 1)[0] + "/" + name


def web_env(database_url: str, redis_url: str) -> dict[str, str]:
    inherited = {name: value for name, value in os.environ.items()
                 if not name.startswith(("BOUNTY_", "DATABASE_", "REDIS_", "DJANGO_", "PG"))}
    return {**inherited, "DATABASE_URL": database_url, "REDIS_URL": redis_url,
            "DJANGO_SETTINGS_MODULE": "bountysite.settings", "DJANGO_DEBUG": "0", "DJANGO_SECRET_KEY": SECRET_KEY,
            "DJANGO_ALLOWED_HOSTS": "127.0.0.1,localhost", "DJANGO_SECURE_SSL_REDIRECT": "0",
            "BOUNTY_CHAIN_ID": "91342", "BOUNTY_CONTRACT_ADDRESS": CONTRACT, "BOUNTY_USDC_ADDRESS": USDC,
            "BOUNTY_TRUSTED_PROXIES": "127.0.0.1", "LOG_LEVEL": "WARNING"}


def start_writer(env: dict[str, str], head: Any, bounties: int) -> Pipe:
    writer = Pipe(writer_worker, env, head, bounties, COMMIT_INTERVAL)
    seeded, size = writer.answer(900)
    print(f"seeded {bounties:,} bounties in {seeded:.0f} s (a snapshot of about {size / 1e6:.0f} MB)", flush=True)
    writer.ask("start")
    return writer


def replica_storm(setup: Setup, count: int, redis_url: str) -> Storm | None:
    """The blip of `count` clients with the web process on a standby REPLICA_LAG behind."""
    from read_replicas import set_lag

    from tests.servers import ThrowawayPostgres

    print(f"\n== blip, N={count}, the web process reading a standby {REPLICA_LAG:g} s behind", flush=True)
    primary = ThrowawayPostgres()
    primary.__enter__()
    standby: ThrowawayPostgres | None = None
    writer: Pipe | None = None
    main_writer = setup.writer
    try:
        standby = ThrowawayPostgres(standby_of=primary.port)
        standby.__enter__()
        main_writer.ask("pause")
        env = web_env(primary.url, redis_url)
        writer = start_writer(env, setup.head, setup.args.bounties)
        set_lag(standby, REPLICA_LAG)
        setup.writer = writer
        replica_env = {**env, "DATABASE_REPLICA_URLS": standby.url}
        time.sleep(REPLICA_LAG + 1)
        return run_storm(setup, "blip", False, count, name="service-replica", env=replica_env,
                         stats=[(primary.url_of("postgres"), "bounty"), (standby.url_of("postgres"), "bounty")])
    finally:
        setup.writer = main_writer
        if writer is not None:
            writer.stop()
        main_writer.ask("start")
        if standby is not None:
            standby.__exit__(None, None, None)
        primary.__exit__(None, None, None)


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--clients", default="1000,3000", help="client counts, comma-separated")
    parser.add_argument("--quick", action="store_true", help="200 clients, 5 s quiet windows: a smoke run")
    parser.add_argument("--scenarios", default="restart,blip", help="restart, blip or both")
    parser.add_argument("--replica", action="store_true", help="also the blip of the first N over a lagging standby")
    parser.add_argument("--bounties", type=int, default=20_000)
    parser.add_argument("--quiet-seconds", type=float, help="followed before each storm (default 10; 5 with --quick)")
    parser.add_argument("--timeout", type=float, default=180, help="the longest wait for every client to be back")
    parser.add_argument("--client-processes", type=int, default=2)
    parser.add_argument("--postgres-url", default="postgresql://postgres@127.0.0.1:5432/postgres",
                        help="a database on the server to create the bench's own from")
    parser.add_argument("--keep-logs", action="store_true", help="keep the servers' logs (their folder is printed)")
    args = parser.parse_args()
    counts = [200] if args.quick else [int(n) for n in args.clients.split(",") if n.strip()]
    scenarios = [s for s in args.scenarios.split(",") if s in ("restart", "blip")]
    args.quiet_seconds = args.quiet_seconds or (5.0 if args.quick else 10.0)
    if not counts or min(counts) < 1 or not scenarios:
        parser.error("--clients takes counts of 1 or more; --scenarios restart, blip or both")
    if problems := missing(args.postgres_url):
        print("this bench needs " + "; ".join(problems) + ". Nothing measured.")
        return
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)  # the clients' sockets, and the proxy's two a client
    wanted = 4 * max(counts) + 1_024
    if soft != resource.RLIM_INFINITY and soft < wanted:
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (wanted, max(hard, wanted)))
        except (ValueError, OSError):
            resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
            print(f"open files are limited to {hard} (ulimit -Hn): {wanted} wanted")

    from tests.servers import ThrowawayRedis

    logs = Path(tempfile.mkdtemp(prefix="bench-reconnect-storm-"))
    stack: list[Callable[[], object]] = []
    storms: list[Storm] = []
    began = time.monotonic()
    status = 0
    try:
        redis = ThrowawayRedis()
        redis.start()
        stack.append(redis.stop)
        database_url = database(args.postgres_url, DBNAME)
        stack.append(lambda: database(args.postgres_url, DBNAME, drop_only=True))
        env = web_env(database_url, redis.url)
        os.environ.update(env)  # the unit's command line is read by the deployment tests' helpers, with Django's
        import django

        django.setup()
        context = multiprocessing.get_context("spawn")
        head = context.Value("q", 0, lock=False)
        writer = start_writer(env, head, args.bounties)
        stack.append(writer.stop)
        clients = Clients(args.client_processes, head)
        stack.append(clients.stop)
        setup = Setup(args, logs, env, args.postgres_url, DBNAME, writer, clients, head)
        stack.append(lambda: setup.writer.stop())
        print(f"PostgreSQL database {DBNAME}, Redis :{redis.port}, a change every {COMMIT_INTERVAL:g} s, "
              f"{args.client_processes} client processes, {os.cpu_count()} cores, load average "
              f"{os.getloadavg()[0]:.1f}; server logs in {logs}", flush=True)
        for count in counts:
            for kind in scenarios:
                print(f"\n== {kind}, N={count}", flush=True)
                for plain in (False, True):
                    storms.append(run_storm(setup, kind, plain, count))
        if args.replica:
            storm = replica_storm(setup, counts[0], redis.url)
            if storm is not None:
                storms.append(storm)
        table(storms)
    except Exception as error:  # printed; everything started is stopped below
        traceback.print_exc()
        print(f"the benchmark stopped: {type(error).__name__}: {error}")
        status = 1
    finally:
        for undo in reversed(stack):
            try:
                undo()
            except Exception as error:
                print(f"cleaning up: {type(error).__name__}: {error}")
        if not args.keep_logs:
            shutil.rmtree(logs, ignore_errors=True)
    summary = {"seconds": round(time.monotonic() - began), "storms": [
        {key: value for key, value in vars(s).items() if key not in ("log",)} for s in storms]}
    print(f"\nran {summary['seconds']} s")
    print("BENCH_SUMMARY " + json.dumps(summary, default=str))
    if any(s.error for s in storms):
        status = 1
    sys.exit(status)


if __name__ == "__main__":
    main()
