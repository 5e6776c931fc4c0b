"""What positions that name their history cost, against the integer positions, in the same run.

    .venv/bin/python bench/position_cost.py [--entries 100000] [--head-commits 1000]
        [--catch-up-entries 20000] [--checks 500] [--connects 60] [--backends sqlite,postgres]
        [--postgres-url postgresql://postgres@127.0.0.1:5432/postgres] [--no-wire]

Each backend runs in a child process of its own on a database of its own (a SQLite file in a
temporary folder; a PostgreSQL database created on `--postgres-url` and dropped afterwards):

1. Writing: change-log entries committed as the indexer commits them (the sync state locked, the
   rows inserted through indexer.bulk.RowStream, the state saved, one transaction), each payload a
   bounty's stored body (records.representation.record_body, 1-2 KB) as the indexer's store hands
   it (`orjson.Fragment`). Positions: the rows of indexer.changelog.advance_change_log, each
   digest chained on the one before. Integers, the baseline: the previous release's rows, numbered
   only (its `change_rows`; the digest column left NULL). Both write to deployments of their own,
   alternating commit by commit, 1 entry a commit (`--head-commits` commits each, as at the head)
   and 500 a commit (`--catch-up-entries` each, as in a catch-up): entries/s, their ratio, and the
   median ratio of the commits taken in pairs (less moved by a busy machine's bursts).
2. Resuming, in process: the change log filled to `--entries`, records.ws.feed.resume_point of a
   position in its older half (a different one each time) and of the head's position, against
   the previous release's integer check of the same seq (its last_seq and oldest_seq queries,
   reimplemented here), `--checks` of each, interleaved: median and 90th percentile.
3. Resuming, on the wire: a daphne of this checkout and one of the previous release (31e4959,
   the last of integer positions, exported with `git archive`) on the same database. Each round the writer
   commits one change; once both feeds have read past it, a client connects to each (in
   alternating order) with `?since=` the position before it (the bare seq for the previous
   release) and is timed from its TCP connect until that change's live message arrives: the
   handshake, the resume check, the read of the change and its send. `--no-wire` skips it.

Ends with a `BENCH_SUMMARY {...}` line of every figure.
"""

from __future__ import annotations

import argparse
import io
import json
import os
import random
import shutil
import statistics
import subprocess
import sys
import tarfile
import tempfile
import time
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from itertools import cycle
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit, urlunsplit

BENCH_DIR = Path(__file__).resolve().parent
PROJECT_DIR = BENCH_DIR.parent
sys.path[:0] = [str(PROJECT_DIR)]

import orjson  # noqa: E402

if TYPE_CHECKING:
    from indexer.changelog import Change
    from records.models import Deployment

SECRET_KEY = "bench-position-cost-secret-0123456789-abcdefghijklmnopqrstuvwxyz-ABCDEFGHIJKL"
CHAIN_ID = 91342
CONTRACT = "0x" + "ab" * 20  # the service's deployment: positions
BASELINE_CONTRACT = "0x" + "ef" * 20  # the integer writer's
USDC = "0x" + "cd" * 20
CATCH_UP_BATCH = 500
FILL_BATCH = 5_000
BODIES = 256
PROMPT = ("Map the drainage ditches along the north field and photograph every culvert inlet, with its "
          "coordinates, the date and a note on what blocks it. ")
LABELS = {"sqlite": "SQLite", "postgres": "PostgreSQL"}
# The last release of integer positions (the `.last-release` when positions came): pinned, since a
# later release's server would answer `?since=<seq>` with a snapshot.
INTEGER_RELEASE = "31e4959c840b779e8d13836068aa364c16bca6ab"
# The previous release's indexer.changelog.CHANGE_COLUMNS: no digest.
PREVIOUS_CHANGE_COLUMNS = ("deployment_id", "seq", "type", "payload", "block_number", "created_at")


def p90(values: list[float]) -> float:
    return statistics.quantiles(values, n=10)[8]


# ---------------------------------------------------------------------------- writing


class Writer:
    """Commits change-log entries to one deployment as the indexer's Committer does; `positions`:
    this release's rows, else the previous release's (integers only, no digest)."""

    def __init__(self, deployment: Deployment, bodies: list[orjson.Fragment], *, positions: bool) -> None:
        self.deployment = deployment
        self.bodies = cycle(bodies)
        self.positions = positions
        self.block = 0

    def commit(self, entries: int) -> None:
        from django.db import transaction

        from indexer.bulk import RowStream
        from indexer.changelog import CHANGE_COLUMNS, advance_change_log
        from indexer.models import ChangeLogEntry, SyncState
        from records.changes import MessageType

        self.block += 1
        changes = [(MessageType.BOUNTY_UPDATED, next(self.bodies), self.block) for _ in range(entries)]
        with transaction.atomic():
            locked = SyncState.objects.select_for_update().get(deployment=self.deployment)
            with RowStream() as stream:
                if self.positions:
                    stream.insert(ChangeLogEntry, CHANGE_COLUMNS, advance_change_log(self.deployment, locked, changes))
                else:
                    stream.insert(ChangeLogEntry, PREVIOUS_CHANGE_COLUMNS,
                                  integer_change_rows(self.deployment, locked.last_seq, changes))
                    locked.last_seq += entries
            locked.save()


def integer_change_rows(deployment: Deployment, last_seq: int, changes: Iterable[Change]) -> list[tuple[Any, ...]]:
    """The previous release's indexer.changelog.change_rows (in PREVIOUS_CHANGE_COLUMNS): numbered
    after `last_seq`, no digest."""
    from django.utils import timezone

    now = timezone.now()
    return [(deployment.pk, seq, type_, payload, block_number, now)
            for seq, (type_, payload, block_number) in enumerate(changes, start=last_seq + 1)]


def record_bodies(deployment: Deployment) -> list[orjson.Fragment]:
    """BODIES distinct bounty bodies as the indexer stores them (1-2 KB: prompts of 500-1,400 characters)."""
    from records.models import Bounty
    from records.representation import record_body

    moment = datetime(2026, 1, 1, tzinfo=UTC)
    bodies = []
    for n in range(1, BODIES + 1):
        prompt = (PROMPT * 12)[: 500 + n * 677 % 900]
        bounty = Bounty(deployment=deployment, bounty_id=n, prompt=prompt, bounty_amount=10**8, fee_amount=25 * 10**5,
                        bond_amount=10**7, duration=86_400, poster=f"0x{n:040x}", deadline=moment,
                        challenge_window=86_400, metadata_uri=f"ipfs://bafybeigdyrzt5sfp7udm7hu76uh7y26nf3efuylqabf3oclgtqy55fbz{n:06d}",
                        metadata_hash=f"0x{n:064x}", tx_hash=f"0x{10**6 + n:064x}", block_number=n, log_index=0,
                        created_at=moment)
        body = record_body(bounty, chain_id=CHAIN_ID, contract_address=deployment.contract_address)
        bodies.append(orjson.Fragment(body))
    return bodies


def measure_writes(writers: dict[str, Writer], per_commit: int, commits: int) -> dict[str, Any]:
    """Entries/s of each writer (`integers`, `positions`): `commits` commits of `per_commit`
    entries each, the two alternating commit by commit, after 5 commits each not timed; the ratio
    positions / integers of the rates, and the median of the commits' ratios in pairs. Which of a
    pair goes first is drawn at random: a periodic stall (SQLite's WAL checkpoint, every few
    catch-up commits) would fall on the same writer every time in a fixed order."""
    names = list(writers)
    order = random.Random(per_commit)
    took: dict[str, list[float]] = {name: [] for name in names}
    for i in range(commits + 5):
        for name in order.sample(names, len(names)):
            started = time.perf_counter()
            writers[name].commit(per_commit)
            if i >= 5:
                took[name].append(time.perf_counter() - started)
    rates = {name: commits * per_commit / sum(took[name]) for name in names}
    paired = statistics.median(a / b for a, b in zip(took["integers"], took["positions"], strict=True))
    return {**rates, "ratio": rates["positions"] / rates["integers"], "paired_ratio": paired}


# ---------------------------------------------------------------------------- resuming in process


def integer_resume_point(since: str) -> int | None:
    """The previous release's check of `?since=<seq>` (its consumer's int() and feed.resume_point,
    with selectors.last_seq and oldest_seq), on today's schema."""
    from django.db.models import Min

    from indexer.models import ChangeLogEntry, SyncState
    from records.selectors import active_deployment_id

    try:
        seq = int(since)
    except ValueError:
        return None
    deployment_id = active_deployment_id()
    if deployment_id is None or seq < 0:
        return None
    last = SyncState.objects.filter(deployment_id=deployment_id).values_list("last_seq", flat=True).first() or 0
    if seq > last:
        return None
    if seq < last:
        oldest = ChangeLogEntry.objects.filter(deployment_id=deployment_id).aggregate(v=Min("seq"))["v"]
        if oldest is None or oldest > seq + 1:
            return None
    return seq + 1


def measure_checks(deployment: Deployment, entries: int, checks: int) -> dict[str, dict[str, float]]:
    """Microseconds of each check (median, p90) and its queries, `checks` of each, interleaved."""
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    from indexer.models import ChangeLogEntry
    from records.history import Position
    from records.selectors import head_position
    from records.ws.feed import resume_point

    rng = random.Random(20261128)
    seqs = [rng.randint(1, entries // 2) for _ in range(checks)]
    digests = dict(ChangeLogEntry.objects.filter(deployment=deployment, seq__lte=entries // 2)
                   .values_list("seq", "digest"))
    head = head_position(deployment.pk)
    cases: list[tuple[str, Callable[[str], int | None], Callable[[int], tuple[str, int]]]] = [
        ("integer", integer_resume_point, lambda seq: (str(seq), seq + 1)),
        ("deep", resume_point, lambda seq: (str(Position(seq, digests[seq] or "")), seq + 1)),
        ("head", resume_point, lambda seq: (str(head), head.seq + 1)),
    ]
    timings: dict[str, list[float]] = {name: [] for name, _, _ in cases}
    queries: dict[str, int] = {}
    for name, check, case in cases:
        since, expected = case(seqs[0])
        with CaptureQueriesContext(connection) as captured:
            assert check(since) == expected, (name, since)
        queries[name] = len(captured.captured_queries)
    warm = seqs[:50]  # not timed
    for i, seq in enumerate([*warm, *seqs]):
        for name, check, case in cases[i % 3:] + cases[:i % 3]:
            since, expected = case(seq)
            started = time.perf_counter()
            point = check(since)
            elapsed = time.perf_counter() - started
            assert point == expected, (name, since, point)
            if i >= len(warm):
                timings[name].append(elapsed * 1e6)
    return {name: {"median_us": statistics.median(values), "p90_us": p90(values), "queries": queries[name]}
            for name, values in timings.items()}


# ---------------------------------------------------------------------------- resuming on the wire


def first_message_ms(url: str, expected_seq: int) -> float:
    """Milliseconds from the TCP connect to `url` until its first message, which must be the live
    message of `expected_seq` (not a snapshot)."""
    from websockets.sync.client import connect

    started = time.perf_counter()
    with connect(url, compression=None, open_timeout=10, close_timeout=1) as client:
        message = client.recv(timeout=10)
        elapsed = time.perf_counter() - started
    data = orjson.loads(message)
    assert data.get("seq") == expected_seq and not data.get("snapshot"), (url, message[:200])
    return elapsed * 1000


def measure_wire(writer: Writer, connects: int, previous: Path | None, env: dict[str, str]) -> dict[str, Any]:
    """Milliseconds (median, p90) of `connects` resumes one change behind the head, from the TCP
    connect to that change's message, on this checkout's daphne and the previous release's."""
    from django.conf import settings

    from records.selectors import head_position
    from tests.servers import Server, start_daphne, stop

    servers: dict[str, Server] = {}
    try:
        servers["positions"] = start_daphne(env)
        if previous is not None:
            try:
                servers["integers"] = start_daphne(env, cwd=previous)
            except AssertionError as error:  # the previous release no longer runs in this environment
                print(f"    the previous release's daphne did not start: {str(error)[-500:]}")
        settle = 2 * settings.BOUNTY_WS_POLL_SECONDS + 0.02  # every feed has read past the commit
        timings: dict[str, list[float]] = {name: [] for name in servers}
        names = list(servers)
        for i in range(connects + 5):  # the first 5 warm up
            before = head_position(writer.deployment.pk)
            writer.commit(1)
            time.sleep(settle)
            for name in names if i % 2 == 0 else names[::-1]:
                since = str(before) if name == "positions" else str(before.seq)
                elapsed = first_message_ms(servers[name].url(f"?since={since}"), before.seq + 1)
                if i >= 5:
                    timings[name].append(elapsed)
    finally:
        for server in servers.values():
            stop(server.process)
    return {name: {"median_ms": statistics.median(values), "p90_ms": p90(values)} for name, values in timings.items()}


# ---------------------------------------------------------------------------- one backend (child process)


def child_main(args: argparse.Namespace) -> None:
    import django

    django.setup()
    from django.core.management import call_command
    from django.db import connection

    from indexer.models import ChangeLogEntry, SyncState
    from records.models import Deployment

    label = LABELS[args.child]
    started = time.monotonic()
    call_command("migrate", verbosity=0)
    deployments = {}
    for name, contract in (("positions", CONTRACT), ("integers", BASELINE_CONTRACT)):
        deployments[name] = Deployment.objects.create(chain_id=CHAIN_ID, contract_address=contract, usdc_address=USDC)
        SyncState.objects.create(deployment=deployments[name])
    bodies = record_bodies(deployments["positions"])
    sizes = [len(orjson.dumps(body)) for body in bodies]
    writers = {"integers": Writer(deployments["integers"], bodies, positions=False),
               "positions": Writer(deployments["positions"], bodies, positions=True)}
    print(f"{label}: migrated in {time.monotonic() - started:.1f} s; payloads {min(sizes):,}-{max(sizes):,} bytes "
          f"(mean {statistics.mean(sizes):,.0f}); load average {os.getloadavg()[0]:.1f}", flush=True)

    result: dict[str, Any] = {"payload_bytes": statistics.mean(sizes)}
    print("  writing the change log, entries/s (integers: the previous release's rows, no digest):")
    print(f"    {'':28}{'integers':>12}{'positions':>12}{'ratio':>8}{'paired':>8}")
    for key, per_commit, commits in (("head", 1, args.head_commits),
                                     ("catch_up", CATCH_UP_BATCH, args.catch_up_entries // CATCH_UP_BATCH)):
        rates = result[f"write_{key}"] = measure_writes(writers, per_commit, commits)
        print(f"    {f'{per_commit} a commit, {commits * per_commit:,} each':28}{rates['integers']:>12,.0f}"
              f"{rates['positions']:>12,.0f}{rates['ratio']:>8.3f}{rates['paired_ratio']:>8.3f}", flush=True)

    started = time.monotonic()
    positions = writers["positions"]
    while (have := SyncState.objects.get(deployment=positions.deployment).last_seq) < args.entries:
        positions.commit(min(FILL_BATCH, args.entries - have))
    if connection.vendor == "postgresql":  # a change log in service has been vacuumed and analysed
        with connection.cursor() as cursor:
            cursor.execute(f"VACUUM ANALYZE {connection.ops.quote_name(ChangeLogEntry._meta.db_table)}")
    entries = SyncState.objects.get(deployment=positions.deployment).last_seq
    print(f"  resuming in process, resume_point over a change log of {entries:,} entries (filled in "
          f"{time.monotonic() - started:.1f} s), {args.checks:,} checks each, interleaved:")
    checks = measure_checks(positions.deployment, entries, args.checks)
    result["entries"], result["checks"] = entries, checks
    titles = {"integer": "integer (previous release)", "deep": "position, older half", "head": "position at the head"}
    print(f"    {'':28}{'median':>10}{'p90':>10}{'queries':>9}")
    for name, title in titles.items():
        print(f"    {title:28}{checks[name]['median_us']:>8.0f}us{checks[name]['p90_us']:>8.0f}us"
              f"{checks[name]['queries']:>9}")
    deep, integer = checks["deep"], checks["integer"]
    print(f"    ratio position (older half) / integer: median {deep['median_us'] / integer['median_us']:.2f}, "
          f"p90 {deep['p90_us'] / integer['p90_us']:.2f}", flush=True)

    if args.connects:
        previous = Path(args.previous) if args.previous else None
        env = {**os.environ, "LOG_LEVEL": "WARNING"}
        wire = measure_wire(positions, args.connects, previous, env)
        result["wire"] = wire
        print(f"  resuming on the wire, connect with ?since= one change behind the head until that change "
              f"arrives, {args.connects} each, alternating:")
        print(f"    {'':28}{'median':>10}{'p90':>10}")
        for name, title in (("integers", "previous release (?since=N)"), ("positions", "this one (?since=N.digest)")):
            if name in wire:
                print(f"    {title:28}{wire[name]['median_ms']:>8.2f}ms{wire[name]['p90_ms']:>8.2f}ms")
        if "integers" in wire:
            print(f"    ratio this / previous: median "
                  f"{wire['positions']['median_ms'] / wire['integers']['median_ms']:.2f}, p90 "
                  f"{wire['positions']['p90_ms'] / wire['integers']['p90_ms']:.2f}", flush=True)
        else:
            print("    no previous release to compare with (see above)", flush=True)
    connection.close()
    Path(args.result).write_text(json.dumps(result))


# ---------------------------------------------------------------------------- the run


def export_previous_release(into: Path) -> tuple[Path | None, str]:
    """The release of integer positions (INTEGER_RELEASE) as a directory of its own, or None and
    why not."""
    commit = INTEGER_RELEASE
    try:
        archive = subprocess.run(["git", "archive", "--format=tar", commit], cwd=PROJECT_DIR, check=True,
                                 capture_output=True).stdout
    except (OSError, subprocess.CalledProcessError) as error:
        return None, f"git archive {commit[:7]} failed: {error}"
    with tarfile.open(fileobj=io.BytesIO(archive)) as tar:
        tar.extractall(into, filter="data")
    return into, commit[:7]


def postgres_problem(admin_url: str) -> str | None:
    """None when the server answers, else why not."""
    import psycopg

    try:
        with psycopg.connect(admin_url, connect_timeout=5) as conn:
            conn.execute("SELECT 1")
    except Exception as error:
        return f"{type(error).__name__}: {error}".strip()
    return None


@contextmanager
def postgres_database(admin_url: str) -> Iterator[str]:
    import psycopg
    from psycopg import sql

    name = f"bench_position_cost_{os.getpid()}"
    with psycopg.connect(admin_url, autocommit=True) as admin:
        admin.execute(sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name)))
        admin.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
    try:
        yield urlunsplit(("postgres", urlsplit(admin_url).netloc, f"/{name}", "", ""))
    finally:
        with psycopg.connect(admin_url, autocommit=True) as admin:
            admin.execute(sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name)))


def run_backend(backend: str, database_url: str, args: argparse.Namespace, previous: Path | None,
                folder: Path) -> dict[str, Any] | None:
    result = folder / f"{backend}.json"
    env = {name: value for name, value in os.environ.items()
           if not name.startswith(("BOUNTY_", "DJANGO_")) and name not in {"DATABASE_URL", "REDIS_URL"}}
    env.update(DATABASE_URL=database_url, DJANGO_SETTINGS_MODULE="bountysite.settings", DJANGO_SECRET_KEY=SECRET_KEY,
               DJANGO_ALLOWED_HOSTS="127.0.0.1", DJANGO_SECURE_SSL_REDIRECT="0", BOUNTY_CHAIN_ID=str(CHAIN_ID),
               BOUNTY_CONTRACT_ADDRESS=CONTRACT, BOUNTY_USDC_ADDRESS=USDC, BOUNTY_WS_CONNECTS_PER_MINUTE="0",
               LOG_LEVEL="WARNING")
    command = [sys.executable, str(Path(__file__).resolve()), "--child", backend, "--result", str(result),
               "--entries", str(args.entries), "--head-commits", str(args.head_commits),
               "--catch-up-entries", str(args.catch_up_entries), "--checks", str(args.checks),
               "--connects", str(0 if args.no_wire else args.connects), "--previous", str(previous or "")]
    if subprocess.run(command, cwd=PROJECT_DIR, env=env, check=False).returncode != 0:
        print(f"{LABELS[backend]}: the measurement failed (above)")
        return None
    measured: dict[str, Any] = json.loads(result.read_text())
    return measured


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--entries", type=int, default=100_000, help="the change log's size for the resume checks")
    parser.add_argument("--head-commits", type=int, default=1_000, help="commits of 1 entry, each way")
    parser.add_argument("--catch-up-entries", type=int, default=20_000,
                        help=f"entries in commits of {CATCH_UP_BATCH}, each way")
    parser.add_argument("--checks", type=int, default=500, help="in-process resume checks of each kind")
    parser.add_argument("--connects", type=int, default=60, help="websocket resumes of each server")
    parser.add_argument("--no-wire", action="store_true", help="no daphne, no websocket resumes")
    parser.add_argument("--backends", default="sqlite,postgres", help="comma-separated: sqlite, postgres")
    parser.add_argument("--postgres-url", default="postgresql://postgres@127.0.0.1:5432/postgres",
                        help="a database on the server to create the benchmark's own from")
    parser.add_argument("--child", choices=tuple(LABELS), help=argparse.SUPPRESS)
    parser.add_argument("--result", help=argparse.SUPPRESS)
    parser.add_argument("--previous", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child_main(args)
        return
    backends = [name for name in args.backends.split(",") if name]
    if unknown := set(backends) - set(LABELS):
        parser.error(f"unknown backends: {', '.join(sorted(unknown))}")
    if args.catch_up_entries < CATCH_UP_BATCH or args.checks < 10 or (args.connects < 2 and not args.no_wire):
        parser.error(f"at least {CATCH_UP_BATCH} catch-up entries, 10 checks and 2 connects")

    folder = Path(tempfile.mkdtemp(prefix="bench-position-cost-"))
    summary: dict[str, Any] = {}
    try:
        previous = None
        if not args.no_wire:
            previous, said = export_previous_release(folder / "previous")
            print(f"the previous release for the wire's baseline: {said if previous else f'none ({said})'}")
        for backend in backends:
            if backend == "sqlite":
                summary[backend] = run_backend(backend, f"sqlite:///{folder / 'bench.sqlite3'}", args, previous,
                                               folder)
            elif problem := postgres_problem(args.postgres_url):
                print(f"PostgreSQL at {args.postgres_url} unreachable ({problem}): not measured")
            else:
                with postgres_database(args.postgres_url) as url:
                    summary[backend] = run_backend(backend, url, args, previous, folder)
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    print("BENCH_SUMMARY " + json.dumps(summary, separators=(",", ":")))
    if any(result is None for result in summary.values()):
        sys.exit(1)


if __name__ == "__main__":
    main()
