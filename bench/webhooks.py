"""Webhooks under load: the change log delivered by `manage.py run_webhooks` to many endpoints of a
real receiver process, from the indexer's commit of a change to its arrival at each endpoint.

    .venv/bin/python bench/webhooks.py                                 # the issue's figures: 1,000 endpoints,
                                                                       # 20 changes a second for 60 s
    .venv/bin/python bench/webhooks.py --seconds 10 --endpoints 200    # a smoke run, about 2 minutes
        [--rate 20] [--hanging 10] [--failing 10] [--backlog 100] [--scenarios floor,healthy,faulty,workers]
        [--floor-seconds 10]
        [--timeout-seconds N] [--drain-timeout 3600] [--profile SECONDS] [--keep-logs]
        [--postgres-url postgresql://postgres@127.0.0.1:5432/postgres] [--redis-url redis://127.0.0.1:6379/14]

Everything is set up as an operator runs it: a PostgreSQL database of the bench's own
(`bench_webhooks`, created, migrated with `manage.py migrate`'s command, dropped at the end), a
Redis database of its own (14 by default, emptied), one deployment active in every process
(BOUNTY_CHAIN_ID, BOUNTY_CONTRACT_ADDRESS) with its sync state, and the workers started as
deploy/bounty-webhooks@.service starts them, `manage.py run_webhooks`, DEBUG off, every webhook
setting at its default but the two a receiver on loopback over plain HTTP needs
(BOUNTY_WEBHOOKS_ALLOW_PLAIN_HTTP=1, BOUNTY_WEBHOOKS_ALLOWED_NETWORKS=127.0.0.0/8): so
BOUNTY_WEBHOOKS_TIMEOUT_SECONDS is 10 (`--timeout-seconds` changes it), the concurrency 1,000 a
worker, the lease 60 s. The receiver is tests/webhooks/receiver.py in a process of its own
(bench/webhook_receiver.py: the same, with each delivery's seq in its /stats). `--endpoints`
healthy endpoints are registered as the admin registers them (webhooks.endpoints.start), each a
name of its own on the receiver (`/hook/e<n>`), and beside them `--hanging` endpoints that answer
after 30 s and `--failing` ones that answer 500, enabled only in the faulty scenario.

Changes are appended as the indexer appends them (tests.history.append_changes: the next seqs in
one transaction with the sync state, then the wake-up through Redis, records.changes.notify_changes),
by the bench process, each a `bounty.updated` of about 400 bytes. A change's commit time is taken
as its transaction commits (an on-commit hook ahead of the wake-up); a delivery's arrival is the
receiver's clock, once it has read the body. Commit to delivered = arrival - commit, for every
delivery of every healthy endpoint, matched to its change by the body's `seq`.

Each scenario starts from fresh processes (the workers, the receiver) and every endpoint at the
head; a first change, not counted, shows that every healthy endpoint is served, then:

- **floor**: what the machine can deliver at most, with no worker: bench/webhook_floor.py, a bare
  sender in a process of its own, posts a signed body of a change's size to every healthy
  endpoint's name on a fresh receiver, one request at a time per endpoint and all endpoints at
  once, for `--floor-seconds`. Its deliveries a second are the ceiling the others are compared to:
  each scenario's deliveries a second as a share of it, and the offered load (endpoints x rate)
  as a multiple of it (above 1, no worker could keep up and the delay grows with the run).
- **healthy**: the healthy endpoints only, one worker, `--rate` changes a second for `--seconds`;
  then until every endpoint has every change (at most `--drain-timeout` s after the last commit).
  Printed: the p50, p99 and largest commit-to-delivered, the deliveries a second over the run
  against what was offered (endpoints x rate), how long after the last commit the last endpoint
  had it, whether every endpoint got every change once and in order, and the p50 and p99 of the
  changes of each tenth of the run (how the delay grows).
- **faulty**: the same with the hanging and failing endpoints beside them. The figure is the
  healthy endpoints' p99 against the healthy scenario's (target: moves by less than 20%), and
  what the faulty ones were sent (attempts, outcomes: the worker's own counters, from its
  /metrics).
- **workers**: throughput. With every healthy endpoint at the head and the workers idle, a backlog
  of `--backlog` changes is committed at once (one transaction), and timed from its commit until
  every endpoint has received all of it: once with one worker, once with two (each from the same
  positions, the head before the backlog). The figure is the ratio of deliveries a second, two
  workers against one.

`--scenarios` runs them in the order given (the floor, when named, first), a scenario named twice
twice (`healthy,faulty,healthy,faulty`: two pairs, each compared within itself, to see the machine's
noise).

For each scenario also: the CPU seconds of the workers, the receiver, the bench process (the
writer) and the database's backends (PostgreSQL's processes of `bench_webhooks`, from /proc, so
only with the server on this machine), deliveries per CPU second of the workers and of the
receiver (what the machine's load moves least), how long the workers and the receiver were
runnable but waited for a core (/proc/<pid>/task/*/schedstat: the share other work took), the
machine's busy cores over the run (/proc/stat), its load average, the database's transactions
and rows written (pg_stat_database), and how soon each worker exited after its SIGTERM (SIGKILL
after 10 s, the unit's TimeoutStopSec). `--profile SECONDS` samples the one worker of the healthy scenario with
py-spy (.venv/bin/py-spy, `record --threads --nonblocking`) for the first SECONDS of its writing
and prints where its threads spent the time.

The last line is `BENCH_SUMMARY {...}` with every figure. Without PostgreSQL or Redis it says what
is missing and measures nothing. The machine is shared: compare the ratios within a run.
"""

from __future__ import annotations

import argparse
import contextlib
import itertools
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import traceback
import urllib.request
from collections import Counter, defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

BENCH_DIR = Path(__file__).resolve().parent
PROJECT_DIR = BENCH_DIR.parent
# This file is bench/webhooks.py: its folder, first on the path when it runs as a script, would make
# `import webhooks` (the service's app) import it. The project goes first, the benches after it.
sys.path[:] = [str(PROJECT_DIR), *(p for p in sys.path if Path(p or ".").resolve() != BENCH_DIR), str(BENCH_DIR)]

from reconnect_storm import database, fmt, met, quantile  # noqa: E402
from ws_broadcast import cpu_seconds, free_port  # noqa: E402

from tests.servers import kill  # noqa: E402

SECRET_KEY = "bench-webhooks-secret-key-0123456789-abcdefghijklmnopqrstuvwxyz-ABCDEFGHI"
CHAIN_ID = 91342
CONTRACT = "0x" + "ab" * 20
USDC = "0x" + "cd" * 20
DBNAME = "bench_webhooks"
HANG_SECONDS = 30.0
PAD = "x" * 300  # a change's payload: about the size of a record's (bench/ws_broadcast.py's PAYLOAD)
P99_MOVE_TARGET = 0.20  # the healthy endpoints' p99 beside faulty ones, against without them
P99_TARGET = 1.0  # seconds, commit to delivered
BODY_BYTES = 400  # a change's body as the worker sends it (the envelope around PAD), for the floor
STOP_TIMEOUT = 10.0  # deploy/bounty-webhooks@.service's TimeoutStopSec: SIGKILL after it
READY_TIMEOUT = 180.0  # a worker's start (Django's imports on a busy machine) and the first change everywhere
WORKER_SETTINGS = {"BOUNTY_WEBHOOKS_ALLOW_PLAIN_HTTP": "1", "BOUNTY_WEBHOOKS_ALLOWED_NETWORKS": "127.0.0.0/8"}


# ---------------------------------------------------------------------------- measuring


def process_cpu(pid: int) -> float:
    try:
        return sum(cpu_seconds(pid))
    except (OSError, IndexError):  # exited
        return 0.0


def run_queue_wait(pid: int) -> float:
    """Seconds the process's threads have so far spent runnable, waiting for a core (schedstat)."""
    total = 0.0
    try:
        for task in Path(f"/proc/{pid}/task").iterdir():
            with contextlib.suppress(OSError, IndexError, ValueError):
                total += int((task / "schedstat").read_text().split()[1]) / 1e9
    except OSError:  # exited
        pass
    return total


def machine_ticks() -> tuple[int, int]:
    """(busy, total) clock ticks of every core so far (/proc/stat)."""
    fields = [int(n) for n in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
    idle = fields[3] + (fields[4] if len(fields) > 4 else 0)  # idle, iowait
    return sum(fields) - idle, sum(fields)


@dataclass
class Meter:
    """CPU seconds of the bench's processes, the machine's, and the database's work, between
    `start` and `stop`."""

    admin_url: str
    pids: dict[str, list[int]]  # role -> processes
    started: float = 0.0
    cpu: dict[str, float] = field(default_factory=dict)
    waited: dict[str, float] = field(default_factory=dict)
    backends: dict[int, float] = field(default_factory=dict)
    ticks: tuple[int, int] = (0, 0)
    database: tuple[int, int, int] = (0, 0, 0)
    load: float = 0.0

    def start(self) -> None:
        self.started = time.monotonic()
        self.cpu = {role: sum(process_cpu(pid) for pid in pids) for role, pids in self.pids.items()}
        self.waited = {role: sum(run_queue_wait(pid) for pid in pids) for role, pids in self.pids.items()}
        self.backends = {pid: process_cpu(pid) for pid in backend_pids(self.admin_url)}
        self.ticks = machine_ticks()
        self.database = database_work(self.admin_url)
        self.load = os.getloadavg()[0]

    def stop(self) -> dict[str, Any]:
        wall = time.monotonic() - self.started
        cpu = {role: sum(process_cpu(pid) for pid in pids) - self.cpu[role] for role, pids in self.pids.items()}
        waited = {role: round(sum(run_queue_wait(pid) for pid in pids) - self.waited[role], 2)
                  for role, pids in self.pids.items()}
        cpu["postgres"] = sum(process_cpu(pid) - self.backends.get(pid, 0.0) for pid in backend_pids(self.admin_url))
        busy, total = machine_ticks()
        share = (busy - self.ticks[0]) / max(1, total - self.ticks[1])
        xacts, written, inserted = (now - then for now, then in zip(database_work(self.admin_url), self.database,
                                                                    strict=True))
        return {"wall_s": round(wall, 2), "cpu_s": {role: round(seconds, 2) for role, seconds in cpu.items()},
                "waited_for_a_core_s": waited,
                "machine_busy_cores": round(share * (os.cpu_count() or 1), 2), "load_before": round(self.load, 2),
                "load_after": round(os.getloadavg()[0], 2), "transactions": xacts, "rows_updated": written,
                "rows_inserted": inserted}


def backend_pids(admin_url: str) -> list[int]:
    import psycopg

    with psycopg.connect(admin_url, autocommit=True, connect_timeout=5) as admin:
        return [row[0] for row in admin.execute("SELECT pid FROM pg_stat_activity WHERE datname = %s", (DBNAME,))]


def database_work(admin_url: str) -> tuple[int, int, int]:
    """The bench database's transactions, rows updated and rows inserted so far (pg_stat_database,
    read from another database: a backend's figures reach it within a second of a transaction's end
    when it is busy, at most 10 s after when it idles)."""
    import psycopg

    with psycopg.connect(admin_url, autocommit=True, connect_timeout=5) as admin:
        row = admin.execute("SELECT xact_commit + xact_rollback, tup_updated, tup_inserted FROM pg_stat_database "
                            "WHERE datname = %s", (DBNAME,)).fetchone()
    return (int(row[0]), int(row[1]), int(row[2])) if row else (0, 0, 0)


# ---------------------------------------------------------------------------- the processes


class Receiver:
    """bench/webhook_receiver.py on `port`: started again for each scenario (nothing kept)."""

    def __init__(self, port: int, logs: Path) -> None:
        self.port, self.logs = port, logs
        self.process: subprocess.Popen[str] | None = None
        self.starts = 0

    @property
    def pid(self) -> int:
        return self.process.pid if self.process is not None else 0

    def start(self) -> None:
        if self.process is not None:
            kill(self.process)
        self.starts += 1
        with (self.logs / f"receiver-{self.starts}.log").open("w") as log:
            self.process = subprocess.Popen([sys.executable, str(BENCH_DIR / "webhook_receiver.py"), str(self.port)],
                                            cwd=PROJECT_DIR, stdout=subprocess.PIPE, stderr=log, text=True)
        assert self.process.stdout is not None
        line = self.process.stdout.readline().strip()
        if line != "listening":
            raise RuntimeError(f"the receiver did not start (it printed {line!r}; its log: {log.name})")

    def url(self, name: str) -> str:
        return f"http://127.0.0.1:{self.port}/hook/{name}"

    def behave(self, name: str, **behaviour: Any) -> None:
        request = urllib.request.Request(f"http://127.0.0.1:{self.port}/behaviour/{name}", method="PUT",
                                         data=json.dumps(behaviour).encode())
        urllib.request.urlopen(request, timeout=10).read()

    def deliveries(self) -> dict[str, list[tuple[float, int | None, int]]]:
        """Per name, (arrived, seq, status) of each delivery, in order of arrival."""
        with urllib.request.urlopen(f"http://127.0.0.1:{self.port}/stats?seqs=1", timeout=300) as answer:
            found: dict[str, list[list[Any]]] = json.loads(answer.read())
        return {name: [(float(a), s, int(status)) for a, s, status in rows] for name, rows in found.items()}

    def stop(self) -> None:
        if self.process is not None:
            kill(self.process)
            self.process = None


class Workers:
    """`manage.py run_webhooks` processes, each with its metrics on a port of its own."""

    def __init__(self, count: int, env: dict[str, str], logs: Path, run: str) -> None:
        self.ports = [free_port() for _ in range(count)]
        self.logs = [logs / f"{re.sub(r'[^a-z0-9-]+', '-', run)}-worker-{n}.log" for n in range(count)]
        self.processes = []
        for port, path in zip(self.ports, self.logs, strict=True):
            with path.open("wb") as log:
                self.processes.append(subprocess.Popen(
                    [sys.executable, "manage.py", "run_webhooks"], cwd=PROJECT_DIR, stdout=log, stderr=log,
                    env={**env, "BOUNTY_WEBHOOKS_METRICS_PORT": str(port)}))

    @property
    def pids(self) -> list[int]:
        return [process.pid for process in self.processes]

    def wait_ready(self) -> None:
        """Until each has written its heartbeat (its first flush: it runs)."""
        from webhooks.models import WorkerBeat

        deadline = time.monotonic() + READY_TIMEOUT
        while True:
            self.check()
            names = set(WorkerBeat.objects.values_list("name", flat=True))
            if all(any(name.endswith(f":{pid}") for name in names) for pid in self.pids):
                return
            if time.monotonic() > deadline:
                raise RuntimeError(f"the workers did not start within {READY_TIMEOUT:.0f} s")
            time.sleep(0.2)

    def check(self) -> None:
        for process, path in zip(self.processes, self.logs, strict=True):
            if process.poll() is not None:
                tail = path.read_text(errors="replace")[-2000:]
                raise RuntimeError(f"a worker exited with {process.returncode}:\n{tail}")

    def outcomes(self) -> Counter[str]:
        """The attempts of every worker by outcome (bounty_webhook_deliveries_total)."""
        found: Counter[str] = Counter()
        for port in self.ports:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as answer:
                    text = answer.read().decode()
            except OSError:
                continue
            for line in text.splitlines():
                if line.startswith("bounty_webhook_deliveries_total{"):
                    label, _, value = line.partition("} ")
                    found[label.split('outcome="', 1)[1].rstrip('"')] += int(float(value))
        return found

    def stop(self) -> list[float | None]:
        """SIGTERM to each, and SIGKILL to any still running STOP_TIMEOUT later, as systemd stops the
        unit: the seconds until each exited, None for one killed."""
        sent = time.monotonic()
        for process in self.processes:
            if process.poll() is None:
                process.send_signal(signal.SIGTERM)
        exits: list[float | None] = []
        for process, log in zip(self.processes, self.logs, strict=True):
            try:
                process.wait(timeout=max(0.0, sent + STOP_TIMEOUT - time.monotonic()))
                exits.append(round(time.monotonic() - sent, 2))
            except subprocess.TimeoutExpired:
                stacks = log.with_suffix(".stacks.txt")
                spy = Path(sys.executable).parent / "py-spy"
                if spy.exists():  # where it stays, for the report (kept with --keep-logs)
                    with stacks.open("wb") as out, contextlib.suppress(OSError, subprocess.TimeoutExpired):
                        subprocess.run([str(spy), "dump", "--pid", str(process.pid), "--locals"], stdout=out,
                                       stderr=subprocess.STDOUT, timeout=30)
                print(f"  worker {process.pid} still ran {STOP_TIMEOUT:g} s after SIGTERM: killed"
                      + (f" (its stacks: {stacks})" if stacks.exists() else ""), flush=True)
                kill(process)
                exits.append(None)
        return exits


# ---------------------------------------------------------------------------- the service's side


@dataclass
class Setup:
    args: argparse.Namespace
    logs: Path
    env: dict[str, str]  # the workers'
    admin_url: str
    receiver: Receiver
    deployment: Any
    healthy: dict[str, int]  # name -> endpoint pk
    hanging: dict[str, int]
    failing: dict[str, int]
    changes: int = 0  # appended so far (each a payload of its own)

    def commit(self, count: int = 1) -> tuple[int, float]:
        """Appends `count` changes as the indexer does; (the last seq, the commit's time.time())."""
        from django.db import transaction

        from tests.history import append_changes, updates

        committed: list[float] = []
        with transaction.atomic():
            transaction.on_commit(lambda: committed.append(time.time()))  # ahead of append_changes's wake-up
            head = append_changes(self.deployment, updates(*range(self.changes + 1, self.changes + count + 1),
                                                           text=PAD))
        self.changes += count
        return head.seq, committed[0]

    def head_seq(self) -> int:
        from records.selectors import head_position

        return head_position(self.deployment.pk).seq

    def reset(self, enabled: list[int]) -> None:
        """Every endpoint at the head, nothing pending, no lease; only `enabled` enabled (no worker
        runs). The tables the workers write are vacuumed and analysed, so that each scenario starts
        on the same footing, not on the dead rows of the one before (an autovacuum during one would
        be measured with it)."""
        from django.db import connection

        from records.selectors import head_position
        from webhooks.models import Endpoint

        head = head_position(self.deployment.pk)
        Endpoint.objects.update(deployment_id=self.deployment.pk, position_seq=head.seq, position_digest=head.digest,
                                next_attempt_at=None, failing_since=None, failures=0, lease_owner="",
                                lease_until=None, enabled=False, disabled_reason="")
        Endpoint.objects.filter(pk__in=enabled).update(enabled=True)
        with connection.cursor() as cursor:
            cursor.execute("VACUUM ANALYZE webhooks_endpoint, webhooks_deliveryattempt, webhooks_workerbeat, "
                           "indexer_changelogentry, indexer_syncstate")

    def behind(self, seq: int) -> tuple[int, int | None]:
        """How many healthy endpoints are not at `seq` yet, and the furthest behind's position."""
        from django.db.models import Min

        from webhooks.models import Endpoint

        rows = Endpoint.objects.filter(pk__in=self.healthy.values()).exclude(position_seq=seq)
        return rows.count(), rows.aggregate(Min("position_seq"))["position_seq__min"]

    def wait_at(self, seq: int, timeout: float, workers: Workers) -> bool:
        """Until every healthy endpoint's position is `seq` (False: not within `timeout`). Asked
        four times a second, then every 2 s after the first 10 s, so that a long wait costs the
        machine little."""
        started = time.monotonic()
        while time.monotonic() < started + timeout:
            workers.check()
            if self.behind(seq)[0] == 0:
                return True
            time.sleep(0.25 if time.monotonic() < started + 10 else 2.0)
        return False


def prepare(args: argparse.Namespace, logs: Path) -> Setup:
    database_url = database(args.postgres_url, DBNAME)
    import redis

    redis.Redis.from_url(args.redis_url).flushdb()
    inherited = {name: value for name, value in os.environ.items()
                 if not name.startswith(("BOUNTY_", "DATABASE_", "REDIS_", "DJANGO_", "PG"))}
    env = {**inherited, "DATABASE_URL": database_url, "REDIS_URL": args.redis_url,
           "DJANGO_SETTINGS_MODULE": "bountysite.settings", "DJANGO_DEBUG": "0", "DJANGO_SECRET_KEY": SECRET_KEY,
           "DJANGO_ALLOWED_HOSTS": "127.0.0.1", "BOUNTY_CHAIN_ID": str(CHAIN_ID), "BOUNTY_CONTRACT_ADDRESS": CONTRACT,
           "BOUNTY_USDC_ADDRESS": USDC, "LOG_LEVEL": "WARNING"}
    os.environ.update(env)
    import django

    django.setup()
    from django.core.management import call_command

    call_command("migrate", verbosity=0)
    from tests.factories import make_deployment
    from webhooks import endpoints
    from webhooks.models import Endpoint

    deployment = make_deployment(CHAIN_ID, CONTRACT, usdc_address=USDC)
    receiver = Receiver(free_port(), logs)
    names = ([f"e{n}" for n in range(args.endpoints)] + [f"hang{n}" for n in range(args.hanging)]
             + [f"fail{n}" for n in range(args.failing)])
    rows = []
    for name in names:
        endpoint = Endpoint(url=receiver.url(name), description=name)
        endpoints.start(endpoint)
        rows.append(endpoint)
    pks = {row.description: row.pk for row in Endpoint.objects.bulk_create(rows)}
    worker_env = {**env, **WORKER_SETTINGS}
    if args.timeout_seconds:
        worker_env["BOUNTY_WEBHOOKS_TIMEOUT_SECONDS"] = str(args.timeout_seconds)
    worker_env.update(setting.split("=", 1) for setting in args.setting)
    return Setup(args, logs, worker_env, args.postgres_url, receiver, deployment,
                 {n: pks[n] for n in names if n.startswith("e")}, {n: pks[n] for n in names if n.startswith("hang")},
                 {n: pks[n] for n in names if n.startswith("fail")})


# ---------------------------------------------------------------------------- a scenario


@dataclass
class Result:
    name: str
    workers: int
    endpoints: int
    changes: int
    offered_per_s: float | None  # endpoints x the commit rate achieved (live scenarios)
    committed_s: float  # from the first commit to the last
    drained_s: float | None  # from the last commit to every healthy endpoint at the head (None: not within the timeout)
    deliveries: int
    per_s: float  # deliveries of the healthy endpoints a second, from the first commit to the last arrival
    p50: float | None
    p99: float | None
    largest: float | None
    complete: int  # healthy endpoints that got every change once, in order
    missing: int
    repeated: int
    out_of_order: int  # endpoints
    by_tenth: list[tuple[float | None, float | None]]
    by_quarter: list[tuple[float | None, float | None]]
    faulty: dict[str, Any]
    usage: dict[str, Any]
    profile: list[str] = field(default_factory=list)
    commits: int = 0  # transactions that committed the changes
    worker_exits: list[float | None] = field(default_factory=list)  # seconds after SIGTERM; None: killed


def start_scenario(setup: Setup, workers_count: int, run: str, faulty: bool) -> tuple[Workers, int]:
    """Fresh receiver and workers, every endpoint at the head, and a first change everywhere: the
    workers, started, and that change's seq."""
    setup.receiver.start()
    if faulty:
        for name in setup.hanging:
            setup.receiver.behave(name, delay=HANG_SECONDS)
        for name in setup.failing:
            setup.receiver.behave(name, status=500)
    enabled = [*setup.healthy.values(), *((*setup.hanging.values(), *setup.failing.values()) if faulty else ())]
    setup.reset(enabled)
    workers = Workers(workers_count, setup.env, setup.logs, run)
    try:
        workers.wait_ready()
        first, _ = setup.commit()
        if not setup.wait_at(first, READY_TIMEOUT, workers):
            raise RuntimeError(f"the first change did not reach every endpoint within {READY_TIMEOUT:.0f} s")
    except BaseException:
        workers.stop()
        raise
    return workers, first


def analyse(setup: Setup, name: str, workers: Workers, warm: int, committed: dict[int, float],
            drained: bool, usage: dict[str, Any], faulty: bool) -> Result:
    found = setup.receiver.deliveries()
    first, last = min(committed), max(committed)
    expected = list(range(first, last + 1))
    latencies: list[tuple[float, float]] = []  # (commit time, seconds)
    quarters: list[list[float]] = [[], [], [], []]  # by the endpoints' order of registration (their pks)
    complete = missing = repeated = out_of_order = 0
    last_arrival = 0.0
    for index, endpoint in enumerate(setup.healthy):
        rows = [(arrived, seq) for arrived, seq, status in found.get(endpoint, []) if seq is not None and seq > warm
                and 200 <= status < 300]
        seqs = [seq for _, seq in rows]
        if seqs == expected:
            complete += 1
        missing += len(set(expected) - set(seqs))
        repeated += len(seqs) - len(set(seqs))
        out_of_order += any(a >= b for a, b in itertools.pairwise(seqs))
        seen: set[int] = set()
        for arrived, seq in rows:
            if seq in committed and seq not in seen:
                seen.add(seq)
                latencies.append((committed[seq], arrived - committed[seq]))
                quarters[4 * index // len(setup.healthy)].append(arrived - committed[seq])
                last_arrival = max(last_arrival, arrived)
    seconds = [s for _, s in latencies]
    start, span = committed[first], max(committed[last] - committed[first], 1e-9)
    tenths: dict[int, list[float]] = defaultdict(list)
    for at, s in latencies:
        tenths[min(9, int(10 * (at - start) / span))].append(s)
    faults: dict[str, Any] = {}
    if faulty:
        for kind, names in (("hanging", setup.hanging), ("failing", setup.failing)):
            tries = [status for n in names for _, seq, status in found.get(n, []) if seq is not None and seq >= warm]
            faults[kind] = {"attempts_received": len(tries), "answered_2xx": sum(200 <= t < 300 for t in tries)}
        faults["outcomes"] = dict(workers.outcomes())
    live = len(committed) > 1 and committed[last] > committed[first]
    return Result(
        name=name, workers=len(workers.processes), endpoints=len(setup.healthy), changes=len(expected),
        offered_per_s=(len(setup.healthy) * (len(committed) - 1) / span) if live else None,
        committed_s=round(committed[last] - committed[first], 2),
        drained_s=round(last_arrival - committed[last], 2) if drained else None,
        deliveries=len(seconds), per_s=len(seconds) / max(1e-9, last_arrival - committed[first]),
        p50=quantile(seconds, 0.5), p99=quantile(seconds, 0.99), largest=max(seconds, default=None),
        complete=complete, missing=missing, repeated=repeated, out_of_order=out_of_order,
        by_tenth=[(quantile(tenths[n], 0.5), quantile(tenths[n], 0.99)) for n in range(10)] if live else [],
        by_quarter=[(quantile(q, 0.5), quantile(q, 0.99)) for q in quarters],
        faulty=faults, usage=usage)


def live(setup: Setup, name: str, faulty: bool) -> Result:
    """`--rate` changes a second for `--seconds`, one worker; then until every endpoint has them."""
    args = setup.args
    workers, warm = start_scenario(setup, 1, name, faulty)
    try:
        meter = Meter(setup.admin_url, {"workers": workers.pids, "receiver": [setup.receiver.pid],
                                        "bench": [os.getpid()]})
        meter.start()
        profiler = Profiler(workers.pids[0], args.profile, setup.logs) if args.profile and not faulty else None
        committed: dict[int, float] = {}
        count, commits = round(args.rate * args.seconds), 0
        began = time.monotonic()
        report = began + 10
        while len(committed) < count:
            # The n-th change is due n / rate after the start; those due are committed together, as
            # the indexer commits a block's, when a commit took longer than the interval.
            due = min(count, 1 + int((time.monotonic() - began) * args.rate)) - len(committed)
            if due <= 0:
                time.sleep(max(0.0, began + len(committed) / args.rate - time.monotonic()))
                continue
            seq, at = setup.commit(due)
            commits += 1
            committed.update(dict.fromkeys(range(seq - due + 1, seq + 1), at))
            if time.monotonic() >= report:
                report += 10
                behind, slowest = setup.behind(seq)
                print(f"  {time.monotonic() - began:4.0f} s: {len(committed)} changes committed; {behind} endpoints "
                      f"behind, the furthest at seq {slowest} of {seq}", flush=True)
        last = max(committed)
        print(f"  {len(committed)} changes committed in {commits} transactions over {time.monotonic() - began:.1f} s; "
              f"waiting for every endpoint (at most {args.drain_timeout:.0f} s)", flush=True)
        drained = setup.wait_at(last, args.drain_timeout, workers)
        usage = meter.stop()
        profile = profiler.summary() if profiler is not None else []
        result = analyse(setup, name, workers, warm, committed, drained, usage, faulty)
        result.profile, result.commits = profile, commits
    finally:
        exits = workers.stop()
    result.worker_exits = exits
    return result


def backlog(setup: Setup, workers_count: int, name: str) -> Result:
    """`--backlog` changes committed at once, the workers idle and every endpoint at the head."""
    workers, warm = start_scenario(setup, workers_count, name, False)
    try:
        time.sleep(1.0)  # the first change's positions written, the workers idle
        meter = Meter(setup.admin_url, {"workers": workers.pids, "receiver": [setup.receiver.pid],
                                        "bench": [os.getpid()]})
        meter.start()
        seq, at = setup.commit(setup.args.backlog)
        drained = setup.wait_at(seq, setup.args.drain_timeout, workers)
        usage = meter.stop()
        committed = dict.fromkeys(range(seq - setup.args.backlog + 1, seq + 1), at)
        result = analyse(setup, name, workers, warm, committed, drained, usage, False)
        result.commits = 1
    finally:
        exits = workers.stop()
    result.worker_exits = exits
    return result


def floor(setup: Setup) -> dict[str, Any]:
    """A bare sender's deliveries a second to every healthy endpoint's name (bench/webhook_floor.py)."""
    args = setup.args
    setup.receiver.start()
    sender = subprocess.Popen([sys.executable, str(BENCH_DIR / "webhook_floor.py"), f"http://127.0.0.1:"
                               f"{setup.receiver.port}", str(len(setup.healthy)), str(args.floor_seconds),
                               str(BODY_BYTES)], cwd=PROJECT_DIR, stdout=subprocess.PIPE, text=True)
    meter = Meter(setup.admin_url, {"receiver": [setup.receiver.pid], "bench": [os.getpid()]})
    meter.start()
    try:
        out, _ = sender.communicate(timeout=args.floor_seconds + READY_TIMEOUT)
    finally:
        kill(sender)
    usage = meter.stop()
    found = json.loads(out.strip().splitlines()[-1])
    return {"per_s": found["delivered"] / found["seconds"], "delivered": found["delivered"],
            "failed": found["failed"], "seconds": round(found["seconds"], 2),
            "sender_cores": round(found["cpu_s"] / found["seconds"], 2),
            "receiver_cores": round(usage["cpu_s"]["receiver"] / usage["wall_s"], 2),
            "sender_per_cpu_s": found["delivered"] / max(0.01, found["cpu_s"]),
            "receiver_per_cpu_s": found["delivered"] / max(0.01, usage["cpu_s"]["receiver"]),
            "machine_busy_cores": usage["machine_busy_cores"]}


class Profiler:
    """py-spy sampling a worker (its threads, not pausing it) for its first `seconds`."""

    def __init__(self, pid: int, seconds: float, logs: Path) -> None:
        self.path = logs / f"py-spy-{pid}.txt"
        spy = Path(sys.executable).parent / "py-spy"
        self.process: subprocess.Popen[bytes] | None = None
        if spy.exists():
            self.process = subprocess.Popen(
                [str(spy), "record", "--pid", str(pid), "--duration", str(round(seconds)), "--rate", "100",
                 "--threads", "--nonblocking", "--format", "raw", "--output", str(self.path)],
                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)

    def summary(self, top: int = 15) -> list[str]:
        if self.process is None:
            return ["py-spy not in the virtualenv: no profile"]
        try:
            self.process.wait(timeout=60)
        except subprocess.TimeoutExpired:
            kill(self.process)
        if not self.path.exists():
            return ["py-spy wrote no profile (ptrace not allowed?)"]
        threads: Counter[str] = Counter()
        own: Counter[str] = Counter()
        within: Counter[str] = Counter()
        total = 0
        for line in self.path.read_text(errors="replace").splitlines():
            stack, _, count = line.rpartition(" ")
            if not stack or not count.isdigit():
                continue
            frames = stack.split(";")
            samples = int(count)
            total += samples
            thread = frames[0].split(" ")[0:3]
            threads[" ".join(thread)] += samples
            names = [_frame(frame) for frame in frames[1:]]
            if names:
                own[names[-1]] += samples
            for frame_name in set(names):
                within[frame_name] += samples
        if not total:
            return ["py-spy took no samples"]
        lines = [f"{total} samples of busy threads (100 a second): " + ", ".join(
            f"{thread} {n / total:.0%}" for thread, n in threads.most_common())]
        lines.append("own time:")
        lines += [f"  {n / total:6.1%}  {frame_name}" for frame_name, n in own.most_common(top)]
        lines.append("within (inclusive), the service's functions:")
        ours = [(frame_name, n) for frame_name, n in within.most_common()
                if frame_name.split(" (", 1)[1].startswith(("webhooks/", "records/", "indexer/"))]
        lines += [f"  {n / total:6.1%}  {frame_name}" for frame_name, n in ours[:top]]
        return lines


def _frame(frame: str) -> str:
    """`function (path/to/file.py:line)` without the line, and the path from site-packages or the project."""
    function, _, where = frame.partition(" (")
    path = where.rstrip(")").rsplit(":", 1)[0]
    for marker in ("site-packages/", f"{PROJECT_DIR}/"):
        if marker in path:
            path = path.split(marker, 1)[1]
    return f"{function} ({path})"


# ---------------------------------------------------------------------------- the report


def report(result: Result) -> None:
    usage = result.usage
    cpu = usage["cpu_s"]
    wall = usage["wall_s"]
    print(f"  {result.deliveries:,} deliveries to {result.endpoints:,} endpoints ({result.changes} changes): "
          f"{result.per_s:,.0f} a second" + (f" (offered {result.offered_per_s:,.0f})" if result.offered_per_s else "")
          + f"; commit to delivered p50 {fmt(result.p50)} s, p99 {fmt(result.p99)} s, largest {fmt(result.largest)} s")
    print(f"  every change at every endpoint {fmt(result.drained_s)} s after the last commit"
          + ("" if result.drained_s is not None else " (NOT within the drain timeout)")
          + f"; {result.complete:,} of {result.endpoints:,} endpoints got every change once and in order "
            f"(missing {result.missing:,}, repeated {result.repeated:,}, out of order at {result.out_of_order})")
    if result.by_tenth:
        print("  p50 / p99 s by tenth of the commits: " + "  ".join(
            f"{fmt(p50, 1)}/{fmt(p99, 1)}" for p50, p99 in result.by_tenth))
    print("  p50 / p99 s by quarter of the endpoints, in order of registration: " + "  ".join(
        f"{fmt(p50, 2)}/{fmt(p99, 2)}" for p50, p99 in result.by_quarter))
    if result.faulty:
        print(f"  the faulty endpoints: {json.dumps(result.faulty)}")
    waited = usage["waited_for_a_core_s"]
    print(f"  per CPU second: {result.deliveries / max(0.01, cpu['workers']):,.0f} deliveries of the worker(s), "
          f"{result.deliveries / max(0.01, cpu['receiver']):,.0f} of the receiver; runnable but waiting for a core "
          f"(summed over threads): the worker(s) {waited['workers']:.1f} s, the receiver {waited['receiver']:.1f} s")
    print(f"  CPU over {wall:.0f} s: worker(s) {cpu['workers']:.1f} s ({cpu['workers'] / wall:.2f} cores), receiver "
          f"{cpu['receiver']:.1f} s ({cpu['receiver'] / wall:.2f}), bench/writer {cpu['bench']:.1f} s, PostgreSQL "
          f"backends {cpu['postgres']:.1f} s ({cpu['postgres'] / wall:.2f}); the machine "
          f"{usage['machine_busy_cores']:.2f} cores busy of {os.cpu_count()}, load average "
          f"{usage['load_before']:.1f} before, {usage['load_after']:.1f} after; database: {usage['transactions']:,} "
          f"transactions, {usage['rows_updated']:,} rows updated, "
          f"{usage['rows_inserted']:,} inserted", flush=True)
    exits = [f"killed after {STOP_TIMEOUT:g} s" if e is None else f"{e:.1f} s" for e in result.worker_exits]
    print(f"  the worker(s) exited {', '.join(exits)} after SIGTERM", flush=True)
    for line in result.profile:
        print(f"  {line}")


def table(results: list[Result], ceiling: dict[str, Any] | None) -> None:
    print("\n| scenario | workers | endpoints x changes | deliveries/s (offered) | p50 s | p99 s | largest s "
          "| drained after last commit s | in order | worker CPU cores | receiver cores | PostgreSQL cores |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|")
    for r in results:
        wall = r.usage["wall_s"]
        cpu = r.usage["cpu_s"]
        offered = f" ({r.offered_per_s:,.0f})" if r.offered_per_s else ""
        print(f"| {r.name} | {r.workers} | {r.endpoints:,} x {r.changes} | {r.per_s:,.0f}{offered} | {fmt(r.p50)} "
              f"| {fmt(r.p99)} | {fmt(r.largest)} | {fmt(r.drained_s)} | {r.complete}/{r.endpoints} "
              f"| {cpu['workers'] / wall:.2f} | {cpu['receiver'] / wall:.2f} | {cpu['postgres'] / wall:.2f} |")
    def named(prefix: str) -> list[Result]:
        return [r for r in results if r.name.split(" #")[0] == prefix]

    print()
    for healthy in named("healthy"):
        if healthy.p99 is not None:
            print(f"{healthy.name}: p99 {fmt(healthy.p99)} s (target under {P99_TARGET:g} s: "
                  f"{met(healthy.p99 < P99_TARGET)})")
    for healthy, faulty in zip(named("healthy"), named("faulty"), strict=False):  # each round's pair
        if healthy.p99 and faulty.p99 is not None:
            move = faulty.p99 / healthy.p99
            print(f"{faulty.name} / {healthy.name}: the healthy endpoints' p99 {fmt(faulty.p99)} s against "
                  f"{fmt(healthy.p99)} s, ratio {move:.2f} (target within {1 - P99_MOVE_TARGET:.2f}-"
                  f"{1 + P99_MOVE_TARGET:.2f}: {met(abs(move - 1) < P99_MOVE_TARGET)}); p50 ratio "
                  f"{(faulty.p50 or 0) / (healthy.p50 or 1):.2f}")
    for one, two in zip(named("workers-1"), named("workers-2"), strict=False):
        if one.per_s:
            print(f"{two.name} / {one.name}: {two.per_s:,.0f} against {one.per_s:,.0f} deliveries a second, ratio "
                  f"{two.per_s / one.per_s:.2f}")
    if ceiling and ceiling["per_s"]:
        top = ceiling["per_s"]
        print(f"the floor: a bare sender delivers {top:,.0f} a second on this machine")
        for r in results:
            offered = (f"; offered {r.offered_per_s / top:.2f} x the floor" if r.offered_per_s else "")
            print(f"  {r.name}: {r.per_s / top:.2f} of the floor's deliveries a second{offered}")


# ---------------------------------------------------------------------------- main


def missing_services(args: argparse.Namespace) -> list[str]:
    problems = []
    try:
        import psycopg
        import redis
    except ImportError as error:
        return [f"{error.name} (./scripts/setup)"]
    try:
        psycopg.connect(args.postgres_url, connect_timeout=5).close()
    except psycopg.Error as error:
        problems.append(f"PostgreSQL at {args.postgres_url.rsplit('@', 1)[-1]} ({str(error).strip()})")
    try:
        redis.Redis.from_url(args.redis_url, socket_connect_timeout=5).ping()
    except redis.RedisError as error:
        problems.append(f"Redis at {args.redis_url} ({error})")
    return problems


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--endpoints", type=int, default=1_000, help="healthy endpoints")
    parser.add_argument("--rate", type=float, default=20.0, help="changes committed a second")
    parser.add_argument("--seconds", type=float, default=60.0, help="how long changes are committed")
    parser.add_argument("--hanging", type=int, default=10, help=f"endpoints answering after {HANG_SECONDS:g} s "
                                                                "(the faulty scenario)")
    parser.add_argument("--failing", type=int, default=10, help="endpoints answering 500 (the faulty scenario)")
    parser.add_argument("--backlog", type=int, default=100, help="changes committed at once (the workers scenario)")
    parser.add_argument("--scenarios", default="floor,healthy,faulty,workers",
                        help="floor, healthy, faulty and workers, in this order, each as often as named")
    parser.add_argument("--floor-seconds", type=float, default=10.0, help="how long the floor's bare sender sends")
    parser.add_argument("--timeout-seconds", type=int, help="the workers' BOUNTY_WEBHOOKS_TIMEOUT_SECONDS "
                                                            "(default: the setting's, 10)")
    parser.add_argument("--setting", action="append", default=[], metavar="NAME=VALUE",
                        help="a setting of the workers' environment (BOUNTY_WEBHOOKS_CONCURRENCY=1024); repeatable")
    parser.add_argument("--drain-timeout", type=float, default=3600.0,
                        help="the longest wait, after the last commit, for every endpoint to have every change")
    parser.add_argument("--profile", type=float, default=0.0,
                        help="sample the healthy scenario's worker with py-spy for this many seconds")
    parser.add_argument("--postgres-url", default="postgresql://postgres@127.0.0.1:5432/postgres",
                        help="a database on the server to create the bench's own from")
    parser.add_argument("--redis-url", default="redis://127.0.0.1:6379/14", help="a Redis database of the bench's own "
                                                                                "(emptied)")
    parser.add_argument("--keep-logs", action="store_true", help="keep the workers' and receiver's logs")
    args = parser.parse_args()
    scenarios = [s for s in args.scenarios.split(",") if s in ("floor", "healthy", "faulty", "workers")]
    if any("=" not in setting for setting in args.setting):
        parser.error("--setting takes NAME=VALUE")
    if not scenarios or args.endpoints < 1 or args.rate <= 0 or args.seconds <= 0 or args.backlog < 1:
        parser.error("--scenarios takes floor, healthy, faulty, workers; counts and times must be positive")
    if problems := missing_services(args):
        print("this bench needs " + "; ".join(problems) + ". Nothing measured.")
        return

    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # cleaned up below, as on Ctrl-C
    logs = Path(tempfile.mkdtemp(prefix="bench-webhooks-"))
    stack: list[Callable[[], object]] = []
    results: list[Result] = []
    ceiling: dict[str, Any] | None = None
    began = time.monotonic()
    status = 0
    try:
        stack.append(lambda: database(args.postgres_url, DBNAME, drop_only=True))
        setup = prepare(args, logs)
        stack.append(setup.receiver.stop)
        print(f"PostgreSQL database {DBNAME}, Redis {args.redis_url}, {args.endpoints:,} endpoints (+{args.hanging} "
              f"hanging, +{args.failing} failing in the faulty scenario), {args.rate:g} changes a second for "
              f"{args.seconds:g} s, backlog {args.backlog}; BOUNTY_WEBHOOKS_TIMEOUT_SECONDS="
              f"{args.timeout_seconds or 'default (10)'}{''.join(', ' + s for s in args.setting)}; "
              f"{os.cpu_count()} cores, load average "
              f"{' '.join(f'{n:.1f}' for n in os.getloadavg())}; logs in {logs}", flush=True)
        rounds: Counter[str] = Counter()
        if "floor" in scenarios:
            print(f"\n== floor: a bare sender to {args.endpoints:,} endpoints for {args.floor_seconds:g} s", flush=True)
            ceiling = floor(setup)
            print(f"  {ceiling['delivered']:,} delivered ({ceiling['failed']} failed) in {ceiling['seconds']} s: "
                  f"{ceiling['per_s']:,.0f} a second; the sender {ceiling['sender_cores']:.2f} cores "
                  f"({ceiling['sender_per_cpu_s']:,.0f} a CPU second), the receiver {ceiling['receiver_cores']:.2f} "
                  f"({ceiling['receiver_per_cpu_s']:,.0f}); the machine {ceiling['machine_busy_cores']:.2f} cores "
                  "busy", flush=True)
        for scenario in (s for s in scenarios if s != "floor"):
            rounds[scenario] += 1
            again = f" #{rounds[scenario]}" if rounds[scenario] > 1 else ""  # a scenario named twice runs twice
            if scenario == "workers":
                for count in (1, 2):
                    print(f"\n== workers{again}: {args.backlog} changes committed at once, {count} worker(s)",
                          flush=True)
                    results.append(backlog(setup, count, f"workers-{count}{again}"))
                    report(results[-1])
            else:
                print(f"\n== {scenario}{again}: {args.rate:g} changes a second for {args.seconds:g} s, one worker",
                      flush=True)
                results.append(live(setup, scenario + again, scenario == "faulty"))
                report(results[-1])
        table(results, ceiling)
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
        if args.keep_logs:
            print(f"logs kept in {logs}")
        else:
            shutil.rmtree(logs, ignore_errors=True)
    summary = {"seconds": round(time.monotonic() - began), "args": vars(args), "floor": ceiling,
               "results": [{k: v for k, v in vars(r).items() if k != "profile"} for r in results]}
    print(f"\nran {summary['seconds']} s")
    print("BENCH_SUMMARY " + json.dumps(summary, default=str))
    sys.exit(status)


if __name__ == "__main__":
    main()
