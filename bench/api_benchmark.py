"""Read-API benchmark: server time per route, conditional requests, streaming, throughput.

    .venv/bin/python bench/api_benchmark.py [--bounties 1000000] [--fresh]

1. Seeds (or reuses) the PostgreSQL database `bench_api` with bench/api_seed.py: `--bounties`
   bounties of the active deployment (chain 91342) with ~1 submission per bounty and ~0.5 dispute
   per submission, plus a second deployment (chain 8453) of `--stream-rows` bounties.
2. In-process server time (django.test.Client, the full middleware stack, Redis cache db 15 as
   in production, rate limiting off), p50/p95 over repeated requests: the hot page (response
   cache warm), the same page cold (SyncState.last_seq bumped before each request, as an indexer
   commit does), a rare-term `q` search, deep pages, If-None-Match 304 against the 200, and every
   other route cold and warm. Cold means the response cache is cold; PostgreSQL's buffers are
   warm after the first request. Per scenario: SQL queries, their time, whether a COUNT ran; then
   EXPLAIN (ANALYZE, BUFFERS) of the page / search / deep-page SQL and a profile of the hot path.
3. Streaming through the real server (daphne, as deploy/bounty-web@.service runs it, serving
   bench/api_asgi.py): the unpaged array of the second deployment's bounties, read with httpx:
   rows/s, and the server's RSS growth from /proc/<pid>/status (VmRSS before, VmHWM after).
4. Throughput through the same daphne: requests/s of the hot page against `/__floor`, a plain
   view returning the same bytes (bench/api_floor_urls.py), concurrent httpx clients.
5. A summary table: every figure, its target, met or not.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import cProfile
import io
import os
import pstats
import random
import re
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

BENCH_DIR = Path(__file__).resolve().parent
PROJECT_DIR = BENCH_DIR.parent
sys.path[:0] = [str(PROJECT_DIR), str(BENCH_DIR)]

import api_seed  # noqa: E402
import httpx  # noqa: E402
import orjson  # noqa: E402

REDIS_URL = "redis://127.0.0.1:6379/15"
SECRET_KEY = "bench-api-secret-key-0123456789-abcdefghijklmnopqrstuvwxyz-ABCDEFGHIJ"
ACTIVE = api_seed.ACTIVE_CHAIN
SECOND = api_seed.SECOND_CHAIN

HOT_PAGE = f"/bounties?limit=50&sort=reward&dir=asc&chain_id={ACTIVE}"
Q_RARE = "/bounties?q=zebracorn"
DEEP = "/bounties?limit=50&cursor=900000"
DEEP_ONE_DEPLOYMENT = f"/bounties?limit=50&cursor=900000&chain_id={ACTIVE}"
DEEP_CREATED = "/bounties?limit=50&cursor=900000&sort=created_at"

TARGET_HOT_MS = 2.0
TARGET_COLD_MS = 30.0
TARGET_Q_MS = 10.0
TARGET_DEEP_MS = 50.0
TARGET_304_RATIO = 3.0
TARGET_STREAM_MB = 50.0
TARGET_STREAM_ROWS_S = 100_000


def server_env(dbname: str) -> dict[str, str]:
    return {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "bountysite.settings",
        "DATABASE_URL": api_seed.database_url(dbname),
        "DJANGO_DEBUG": "0",
        "DJANGO_SECRET_KEY": SECRET_KEY,
        "DJANGO_ALLOWED_HOSTS": "testserver,127.0.0.1,localhost",
        "DJANGO_SECURE_SSL_REDIRECT": "0",
        "BOUNTY_RATE_LIMIT": "0",
        "BOUNTY_CHAIN_ID": str(ACTIVE),
        "BOUNTY_CONTRACT_ADDRESS": api_seed.ACTIVE_CONTRACT,
        "BOUNTY_USDC_ADDRESS": api_seed.ACTIVE_USDC,
        "REDIS_URL": REDIS_URL,
        "LOG_LEVEL": "WARNING",
    }


# ---------------------------------------------------------------- results


@dataclass
class Timing:
    name: str
    samples: list[float]  # seconds
    status: int = 200
    queries: int | None = None
    sql_ms: float | None = None
    counts: int | None = None  # COUNT queries in one request
    note: str = ""

    @property
    def p50(self) -> float:
        return statistics.median(self.samples) * 1000

    @property
    def p95(self) -> float:
        ordered = sorted(self.samples)
        return ordered[min(len(ordered) - 1, round(0.95 * (len(ordered) - 1)))] * 1000


@dataclass
class Row:
    figure: str
    value: str
    target: str
    met: bool | None


@dataclass
class Report:
    timings: dict[str, Timing] = field(default_factory=dict)
    rows: list[Row] = field(default_factory=list)

    def add(self, figure: str, value: str, target: str = "", met: bool | None = None) -> None:
        self.rows.append(Row(figure, value, target, met))


def heading(text: str) -> None:
    load = ", ".join(f"{x:.1f}" for x in os.getloadavg())
    print(f"\n=== {text} " + "=" * max(0, 90 - len(text)) + f" (load average {load}, {os.cpu_count()} CPUs)",
          flush=True)


# ---------------------------------------------------------------- in-process measurements


class InProcess:
    """django.test.Client against the seeded database; must be created after django.setup()."""

    def __init__(self, requests: int, cold_requests: int, budget: float) -> None:
        from django.test import Client

        from indexer.models import SyncState

        self.client = Client()
        self.requests = requests
        self.cold_requests = cold_requests
        self.budget = budget  # seconds per scenario at most (slow scenarios take fewer samples)
        self.sync = SyncState.objects

    def bump(self) -> None:
        """What every indexer commit does: advance the change-log seq (untimed)."""
        from django.db.models import F

        self.sync.update(last_seq=F("last_seq") + 1)

    def get(self, url: str, **headers: str) -> Any:
        response = self.client.get(url, headers=headers)
        if response.streaming:
            b"".join(response.streaming_content)
        return response

    def measure(self, name: str, url: str, *, cold: bool, n: int | None = None, headers: dict[str, str] | None = None,
                expect: int = 200) -> Timing:
        n = n or (self.cold_requests if cold else self.requests)
        headers = headers or {}
        if not cold:
            self.get(url, **headers)  # fill the cache
        samples: list[float] = []
        status = 0
        deadline = time.perf_counter() + self.budget
        for _ in range(n):
            if cold:
                self.bump()
            t = time.perf_counter()
            response = self.get(url, **headers)
            samples.append(time.perf_counter() - t)
            status = response.status_code
            if len(samples) >= 5 and time.perf_counter() > deadline:
                break
        if status != expect:
            raise SystemExit(f"{name}: {url} answered {status}, expected {expect}")
        timing = Timing(name, samples, status)
        self.attribute(timing, url, cold=cold, headers=headers)
        return timing

    def attribute(self, timing: Timing, url: str, *, cold: bool, headers: dict[str, str]) -> None:
        """Queries, SQL time and COUNTs of one more request of the same kind."""
        from django.db import connection
        from django.test.utils import CaptureQueriesContext

        if cold:
            self.bump()
        with CaptureQueriesContext(connection) as captured:
            self.get(url, **headers)
        timing.queries = len(captured.captured_queries)
        timing.sql_ms = sum(float(q["time"]) for q in captured.captured_queries) * 1000
        timing.counts = sum(1 for q in captured.captured_queries if "COUNT(" in q["sql"].upper())

    def capture(self, url: str) -> list[dict[str, str]]:
        from django.db import connection
        from django.test.utils import CaptureQueriesContext

        self.bump()
        with CaptureQueriesContext(connection) as captured:
            self.get(url)
        return list(captured.captured_queries)


def print_timings(timings: list[Timing]) -> None:
    print(f"{'scenario':<58} {'n':>4} {'p50 ms':>9} {'p95 ms':>9} {'status':>6} {'SQL q':>5} {'SQL ms':>7} "
          f"{'COUNT':>5}")
    for t in timings:
        print(f"{t.name:<58} {len(t.samples):>4} {t.p50:>9.2f} {t.p95:>9.2f} {t.status:>6} "
              f"{t.queries if t.queries is not None else '':>5} "
              f"{f'{t.sql_ms:.2f}' if t.sql_ms is not None else '':>7} {t.counts if t.counts is not None else '':>5}"
              + (f"  {t.note}" if t.note else ""))


def explain(label: str, queries: list[dict[str, str]], pick: Callable[[str], bool]) -> list[str]:
    from django.db import connection

    chosen = [q["sql"] for q in queries if pick(q["sql"])]
    out: list[str] = []
    for sql in chosen:
        with connection.cursor() as cursor:
            cursor.execute("EXPLAIN (ANALYZE, BUFFERS) " + sql)
            plan = [row[0] for row in cursor.fetchall()]
        print(f"\n--- EXPLAIN ANALYZE: {label}\n{shorten(sql)}")
        for line in plan:
            print("    " + line)
        out.extend(plan)
    return out


def shorten(sql: str, width: int = 400) -> str:
    sql = re.sub(r'SELECT .*? FROM', "SELECT … FROM", sql, count=1, flags=re.S)
    return sql if len(sql) <= width else sql[:width] + " …"


def plan_ms(plan: list[str]) -> float | None:
    for line in plan:
        match = re.search(r"Execution Time: ([0-9.]+) ms", line)
        if match:
            return float(match.group(1))
    return None


def profile(inproc: InProcess, url: str, n: int, *, cold: bool, top: int = 14) -> None:
    inproc.get(url)
    profiler = cProfile.Profile()
    for _ in range(n):
        if cold:
            inproc.bump()
        profiler.enable()
        inproc.get(url)
        profiler.disable()
    stream = io.StringIO()
    stats = pstats.Stats(profiler, stream=stream)
    stats.sort_stats("tottime").print_stats(top)
    text = stream.getvalue()
    body = text[text.find("ncalls"):] if "ncalls" in text else text
    print(f"\n--- cProfile, {n} {'cold' if cold else 'hot'} requests of {url} (by own time; profiler inflates)")
    total = re.search(r"([0-9.]+) seconds", text)
    if total:
        print(f"    total {float(total.group(1)) / n * 1000:.2f} ms/request under the profiler")
    for line in body.splitlines():
        if line.strip():
            print("    " + line.replace(str(PROJECT_DIR) + "/", "").replace(
                str(PROJECT_DIR / ".venv/lib/python3.11/site-packages") + "/", ""))


def deep_created_at_baseline(report: Report, n: int = 20) -> None:
    """The deep created_at page over all deployments two ways in the same run: the sampled merge
    of the deployments' ID orders that record_page takes, and the index-only skip it took before
    (still its fallback), called directly."""
    from records import selectors
    from records.kinds import BOUNTY

    query = selectors.ListQuery(BOUNTY, selectors.DeploymentFilter(), sort="created_at")
    ids = selectors.deployment_ids(query.deployments)

    def skip() -> list[selectors.PageRow]:
        ordered = selectors._filtered(query, ids).order_by(*selectors._ordering(query, ids))
        return selectors._deferred_page(BOUNTY, ordered, 900_000, 50)

    def merge() -> list[selectors.PageRow]:
        return selectors.record_page(query, 900_000, 50)

    if merge() != skip():
        raise SystemExit("the sampled merge and the index-only skip disagree on the deep created_at page")
    timings: dict[str, list[float]] = {"merge": [], "skip": []}
    for _ in range(n):  # alternating, so that both see the same machine
        for name, read in (("merge", merge), ("skip", skip)):
            t = time.perf_counter()
            read()
            timings[name].append(time.perf_counter() - t)
    merged, skipped = (statistics.median(timings[k]) * 1000 for k in ("merge", "skip"))
    print(f"\ndeep page cursor=900000&sort=created_at, selector only, p50 of {n}: sampled merge {merged:.1f} ms, "
          f"index-only skip {skipped:.1f} ms (same page)")
    report.add("(d) sort=created_at deep page: skip / merge", f"{skipped / merged:.1f}x ({skipped:.1f} vs "
               f"{merged:.1f} ms)", "printed", None)


def validate_seed(stream_rows: int) -> dict[str, int]:
    """The seeded rows against records.search (`join_fields` of `search_fields`), representation.record_body and the
    counters."""
    from django.db.models import Count

    from indexer.models import SyncState
    from records.models import Bounty, Deployment, Dispute, Submission
    from records.representation import record_body
    from records.search import join_fields, search_fields

    problems: list[str] = []
    for model, total_field in ((Bounty, "bounty_total"), (Submission, "submission_total"),
                               (Dispute, "dispute_total")):
        for deployment in Deployment.objects.all():
            real = model.objects.filter(deployment=deployment).count()
            if real != getattr(deployment, total_field):
                problems.append(f"{deployment} {total_field} {getattr(deployment, total_field)} != {real}")
        high = model.objects.order_by("-pk").values_list("pk", flat=True).first() or 0
        rng = random.Random(7)
        sample = model.objects.filter(pk__in=[rng.randint(1, high) for _ in range(300)])
        for record in sample:
            if join_fields(search_fields(record)) != record.search_text:
                problems.append(f"{model.__name__} {record.pk}: search_text differs from its search fields")
            deployment = record.deployment
            if record_body(record, chain_id=deployment.chain_id,
                           contract_address=deployment.contract_address) != record.body:
                problems.append(f"{model.__name__} {record.pk}: body differs from record_body")
    rng = random.Random(8)
    active = Deployment.objects.get(chain_id=ACTIVE)
    bounty_ids = [rng.randint(1, active.bounty_total) for _ in range(300)]
    real_subs = dict(Submission.objects.filter(deployment=active, bounty_id__in=bounty_ids).values_list("bounty_id")
                     .annotate(n=Count("pk")))
    for bounty_id, counter in Bounty.objects.filter(deployment=active, bounty_id__in=bounty_ids).values_list(
            "bounty_id", "submission_count"):
        if real_subs.get(bounty_id, 0) != counter:
            problems.append(f"bounty {bounty_id} submission_count {counter} != {real_subs.get(bounty_id, 0)}")
    second = Deployment.objects.get(chain_id=SECOND)
    if second.bounty_total != stream_rows:
        problems.append(f"second deployment has {second.bounty_total} bounties, not {stream_rows}")
    if SyncState.objects.count() != Deployment.objects.count():
        problems.append("not one SyncState per deployment")
    for term, (resource, _) in api_seed.RARE_TERMS.items():
        model = {"bounties": Bounty, "submissions": Submission, "disputes": Dispute}[resource]
        hits = model.objects.filter(search_text__contains=term).count()
        if hits != 1:
            problems.append(f"rare term {term!r} in {hits} {resource}")
    if problems:
        raise SystemExit("seeded data invalid:\n  " + "\n  ".join(problems[:20]))
    return {"bounties": active.bounty_total, "submissions": active.submission_total,
            "disputes": active.dispute_total, "second_bounties": second.bounty_total}


def in_process(args: argparse.Namespace, report: Report) -> bytes:
    import django

    django.setup()
    from django.core.cache import cache
    from django.db import connection
    from django.test.utils import override_settings

    from records.models import Bounty, Deployment, Dispute, Submission

    heading("seed check")
    sizes = validate_seed(args.stream_rows)
    print("valid: " + ", ".join(f"{k} {v:,}" for k, v in sizes.items())
          + "; search_text == its search fields and body == record_body on a sample; counters and totals consistent")
    cache.clear()  # Redis db 15 only (REDIS_URL)
    inproc = InProcess(args.requests, args.cold_requests, args.budget)
    active = Deployment.objects.get(chain_id=ACTIVE)
    qualify = f"chain_id={ACTIVE}&contract_address={api_seed.ACTIVE_CONTRACT}"
    # The 1001st of each kind (well inside the data), or the last one of a smaller seed.
    busy = list(Bounty.objects.filter(deployment=active, submission_count=3).order_by("bounty_id")
                .values_list("bounty_id", flat=True)[:1001])[-1]
    submission = list(Submission.objects.filter(deployment=active, dispute_count=2).order_by("submission_id")
                      .values_list("submission_id", flat=True)[:1001])[-1]
    dispute = (Dispute.objects.filter(deployment=active, submission_id=submission).order_by("dispute_id")
               .values_list("dispute_id", flat=True).first())

    heading("in-process server time (django.test.Client, Redis cache, PostgreSQL)")
    t = {}
    t["hot"] = inproc.measure("(a) hot page, cache warm", HOT_PAGE, cold=False)
    t["cold"] = inproc.measure("(b) same page cold (last_seq bumped per request)", HOT_PAGE, cold=True)
    t["q"] = inproc.measure("(c) q rare term cold", Q_RARE, cold=True)
    t["q_warm"] = inproc.measure("(c) q rare term warm", Q_RARE, cold=False)
    t["deep"] = inproc.measure("(d) deep page cursor=900000 (all deployments) cold", DEEP, cold=True)
    t["deep_one"] = inproc.measure("(d) deep page cursor=900000&chain_id cold", DEEP_ONE_DEPLOYMENT, cold=True)
    t["deep_created"] = inproc.measure("(d) deep page cursor=900000&sort=created_at cold", DEEP_CREATED, cold=True)
    etag = inproc.get(HOT_PAGE)["ETag"]
    t["200_warm"] = inproc.measure("(e) 200 warm (same page)", HOT_PAGE, cold=False)
    t["304_warm"] = inproc.measure("(e) If-None-Match 304 warm", HOT_PAGE, cold=False,
                                   headers={"If-None-Match": etag}, expect=304)
    with override_settings(BOUNTY_RATE_LIMIT=10**9):
        t["hot_ratelimited"] = inproc.measure("    hot page with the rate limiter on (huge limit)", HOT_PAGE,
                                              cold=False)
    print_timings(list(t.values()))

    others = [
        ("bounty detail", f"/bounties/{busy}"),
        ("bounty detail, qualified", f"/bounties/{busy}?{qualify}"),
        ("bounty overview", f"/bounties/{busy}/overview"),
        ("submission detail", f"/submissions/{submission}"),
        ("submission overview", f"/submissions/{submission}/overview"),
        ("dispute detail", f"/disputes/{dispute}"),
        ("dispute overview", f"/disputes/{dispute}/overview"),
        ("submissions?bounty_id= (unpaged array)", f"/submissions?bounty_id={busy}"),
        ("submissions?bounty_id=&limit=50", f"/submissions?bounty_id={busy}&limit=50"),
        ("disputes?bounty_id= (always paged)", f"/disputes?bounty_id={busy}"),
        ("disputes?submission_id= (unpaged array)", f"/disputes?submission_id={submission}"),
        ("disputes?submission_id=&limit=50", f"/disputes?submission_id={submission}&limit=50"),
        ("submissions first page", "/submissions?limit=50"),
        ("disputes first page", "/disputes?limit=50"),
        ("bounties first page (default sort)", "/bounties?limit=50"),
        ("health", "/health"),
    ]
    heading("(f) every other route, cold and warm")
    other_timings: list[Timing] = []
    for name, url in others:
        cold = inproc.measure(f"{name} cold", url, cold=True, n=min(args.cold_requests, 10))
        warm = inproc.measure(f"{name} warm", url, cold=False, n=min(args.requests, 50))
        cold.note = url
        other_timings += [cold, warm]
    print_timings(other_timings)
    report.timings.update(t)
    report.timings.update({x.name: x for x in other_timings})

    heading("EXPLAIN (ANALYZE, BUFFERS) of the SQL behind (b), (c), (d)")
    def records_select(table: str) -> Callable[[str], bool]:
        return lambda sql: f'FROM "{table}"' in sql and "LIMIT" in sql.upper()

    def any_count(sql: str) -> bool:
        return "COUNT(" in sql.upper()

    plans: dict[str, list[str]] = {}
    plans["b"] = explain("(b) cold page", inproc.capture(HOT_PAGE), records_select("records_bounty"))
    q_queries = inproc.capture(Q_RARE)
    plans["c"] = explain("(c) q rare term: page", q_queries, records_select("records_bounty"))
    plans["c_count"] = explain("(c) q rare term: total", q_queries, any_count)
    plans["d"] = explain("(d) deep page, all deployments", inproc.capture(DEEP), records_select("records_bounty"))
    plans["d_one"] = explain("(d) deep page, one deployment (ID range)", inproc.capture(DEEP_ONE_DEPLOYMENT),
                             records_select("records_bounty"))
    plans["d_created"] = explain("(d) deep page, sort=created_at", inproc.capture(DEEP_CREATED),
                                 records_select("records_bounty"))
    print("\n--- every SQL statement of one cold (b) request")
    for q in inproc.capture(HOT_PAGE):
        print(f"    {float(q['time']) * 1000:6.2f} ms  {shorten(q['sql'], 200)}")
    print("\n--- every SQL statement of one warm (a) request")
    inproc.get(HOT_PAGE)
    from django.test.utils import CaptureQueriesContext

    with CaptureQueriesContext(connection) as captured:
        inproc.get(HOT_PAGE)
    for q in captured.captured_queries:
        print(f"    {float(q['time']) * 1000:6.2f} ms  {shorten(q['sql'], 200)}")
    hot_body = inproc.get(HOT_PAGE).content
    key_sizes = f"hot page body {len(hot_body):,} bytes"
    redis_ms = _redis_get_ms()
    print(f"\n{key_sizes}; a bare Redis GET of that entry: {redis_ms:.3f} ms")

    deep_created_at_baseline(report)

    heading("where the time goes (profiles)")
    profile(inproc, HOT_PAGE, 300, cold=False)
    profile(inproc, HOT_PAGE, 30, cold=True)

    # summary rows
    hot, cold_t, q_t = t["hot"], t["cold"], t["q"]
    report.add("(a) hot page p50 (server, in-process)", f"{hot.p50:.2f} ms (p95 {hot.p95:.2f})", "< 2 ms",
               hot.p50 < TARGET_HOT_MS)
    report.add("(b) cold page p50", f"{cold_t.p50:.2f} ms (p95 {cold_t.p95:.2f})", "< 30 ms",
               cold_t.p50 < TARGET_COLD_MS)
    report.add("(c) q=zebracorn cold p50", f"{q_t.p50:.2f} ms (p95 {q_t.p95:.2f})", "< 10 ms",
               q_t.p50 < TARGET_Q_MS)
    for key, label in (("deep", "(d) deep page cursor=900000 cold p50"),
                       ("deep_one", "(d) deep page +chain_id cold p50"),
                       ("deep_created", "(d) deep page sort=created_at cold p50")):
        x = t[key]
        report.add(label, f"{x.p50:.1f} ms (p95 {x.p95:.1f})", "< 50 ms", x.p50 < TARGET_DEEP_MS)
    no_count = all(t[k].counts == 0 for k in ("cold", "deep", "deep_one", "deep_created", "hot"))
    report.add("total without COUNT: (a)(b)(d) requests",
               ", ".join(f"{k}:{t[k].counts}" for k in ("hot", "cold", "deep", "deep_one", "deep_created")),
               "0 COUNT queries", no_count)
    report.add("total of q (COUNT via trigram index, cached per version)",
               f"cold {t['q'].counts} COUNT, warm {t['q_warm'].counts}", "warm 0", t["q_warm"].counts == 0)
    ratio_warm = t["200_warm"].p50 / t["304_warm"].p50
    ratio_cold = t["cold"].p50 / t["304_warm"].p50
    report.add("(e) 304 vs warm 200 (p50 ratio)",
               f"{ratio_warm:.2f}x ({t['304_warm'].p50:.2f} vs {t['200_warm'].p50:.2f} ms)", ">= 3x",
               ratio_warm >= TARGET_304_RATIO)
    report.add("(e) 304 vs cold 200 (p50 ratio)", f"{ratio_cold:.2f}x", ">= 3x", ratio_cold >= TARGET_304_RATIO)
    return hot_body


def _redis_get_ms() -> float:
    from django.core.cache import cache

    key = "bench:probe"
    cache.set(key, b"x" * 30_000, 60)
    samples = []
    for _ in range(200):
        t = time.perf_counter()
        cache.get(key)
        samples.append(time.perf_counter() - t)
    cache.delete(key)
    return statistics.median(samples) * 1000


# ---------------------------------------------------------------- the real server


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def proc_status(pid: int) -> dict[str, int]:
    """VmRSS / VmHWM of a process, in kB."""
    values: dict[str, int] = {}
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        name, _, rest = line.partition(":")
        if name in {"VmRSS", "VmHWM"}:
            values[name] = int(rest.split()[0])
    return values


def reset_hwm(pid: int) -> bool:
    """Resets VmHWM to the current RSS (Linux: write 5 to clear_refs); False if not allowed."""
    try:
        Path(f"/proc/{pid}/clear_refs").write_text("5")
    except OSError:
        return False
    return True


@contextlib.contextmanager
def daphne(dbname: str, floor_body: Path, log: Path) -> Iterator[tuple[str, subprocess.Popen[bytes]]]:
    port = free_port()
    env = server_env(dbname)
    env["PYTHONPATH"] = os.pathsep.join([str(BENCH_DIR), str(PROJECT_DIR)])
    env["BENCH_FLOOR_BODY"] = str(floor_body)
    command = [str(PROJECT_DIR / ".venv/bin/daphne"), "--bind", "127.0.0.1", "--port", str(port), "--proxy-headers",
               "api_asgi:application"]
    with log.open("wb") as out:
        process = subprocess.Popen(command, cwd=PROJECT_DIR, env=env, stdout=out, stderr=subprocess.STDOUT)
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 60
        while True:
            if process.poll() is not None:
                raise SystemExit(f"daphne exited ({process.returncode}); see {log}")
            try:
                if httpx.get(base + "/health", timeout=2).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            if time.monotonic() > deadline:
                raise SystemExit(f"daphne did not answer /health within 60 s; see {log}")
            time.sleep(0.2)
        yield base, process
    finally:
        process.terminate()
        try:
            process.wait(10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


def raw_get(url: str) -> tuple[int, bytes, float, float]:
    """GET over a bare socket, reading the response as fast as the server sends it (a Python HTTP
    client parsing 177 MB would measure itself): status, de-chunked body, seconds to the first
    byte and to the last."""
    parts = urlsplit(url)
    with socket.create_connection((parts.hostname or "127.0.0.1", parts.port or 80)) as sock:
        start = time.perf_counter()
        sock.sendall(f"GET {parts.path}?{parts.query} HTTP/1.1\r\nHost: {parts.netloc}\r\n"
                     "Accept: application/json\r\nConnection: close\r\n\r\n".encode())
        received = bytearray()
        block = bytearray(4 << 20)
        first_byte = 0.0
        while n := sock.recv_into(block):
            if not received:
                first_byte = time.perf_counter() - start
            received += block[:n]
        elapsed = time.perf_counter() - start
    head, _, raw = bytes(received).partition(b"\r\n\r\n")
    status = int(head.split(b" ", 2)[1])
    if b"transfer-encoding: chunked" not in head.lower():
        return status, raw, first_byte, elapsed
    body, at = bytearray(), 0
    while True:  # de-chunk
        end = raw.index(b"\r\n", at)
        length = int(raw[at:end].split(b";")[0], 16)
        if length == 0:
            return status, bytes(body), first_byte, elapsed
        body += raw[end + 2 : end + 2 + length]
        at = end + 2 + length + 2


def streaming(base: str, pid: int, rows_expected: int, report: Report) -> None:
    heading("streaming the unpaged array through daphne")
    url = f"{base}/bounties?chain_id={SECOND}"
    with httpx.Client(timeout=600) as client:
        client.get(f"{base}/bounties?chain_id={SECOND}&limit=5")  # imports, connections
    before = proc_status(pid)
    hwm_reset = reset_hwm(pid)
    before_after_reset = proc_status(pid)
    runs = [raw_get(url) for _ in range(3)]  # the first also reads the rows into PostgreSQL's cache
    print("runs: " + ", ".join(f"{run[3]:.2f} s" for run in runs) + " (the fastest counts)")
    status, body, first_byte, elapsed = min(runs, key=lambda run: run[3])
    size = len(body)
    after = proc_status(pid)
    try:
        rows = orjson.loads(body)
    except orjson.JSONDecodeError as exc:
        raise SystemExit(f"streamed body is not JSON: {exc}") from None
    valid = (status == 200 and isinstance(rows, list) and len(rows) == rows_expected
             and all(isinstance(r, dict) and r.get("chain_id") == SECOND for r in rows)
             and sorted(r["id"] for r in rows) == list(range(1, rows_expected + 1)))
    rss_before = before_after_reset["VmRSS"] / 1024
    growth_peak = after["VmHWM"] / 1024 - rss_before if hwm_reset else after["VmHWM"] / 1024 - before["VmHWM"] / 1024
    growth_end = after["VmRSS"] / 1024 - rss_before
    rate = len(rows) / elapsed if isinstance(rows, list) else 0.0
    print(f"GET {url}: status {status}, {size / 1e6:.1f} MB, {len(rows) if isinstance(rows, list) else '?'} rows, "
          f"valid JSON array of the {rows_expected:,} records: {valid}")
    print(f"time to first byte {first_byte or 0:.2f} s, total {elapsed:.2f} s -> {rate:,.0f} rows/s, "
          f"{size / 1e6 / elapsed:.1f} MB/s")
    print(f"daphne RSS before {rss_before:.0f} MB, peak (VmHWM{' after reset' if hwm_reset else ''}) "
          f"{after['VmHWM'] / 1024:.0f} MB, after {after['VmRSS'] / 1024:.0f} MB: peak growth {growth_peak:.0f} MB, "
          f"retained {growth_end:.0f} MB")
    report.add("stream: valid JSON array of all rows", f"{valid} ({len(rows) if isinstance(rows, list) else 0:,})",
               f"{rows_expected:,} records", valid)
    report.add("stream: rows/s", f"{rate:,.0f} (TTFB {first_byte or 0:.2f} s)", ">= 100,000",
               rate >= TARGET_STREAM_ROWS_S)
    report.add("stream: server peak RSS growth", f"{growth_peak:.0f} MB", "< 50 MB", growth_peak < TARGET_STREAM_MB)


async def _load(url: str, seconds: float, concurrency: int, expect: bytes) -> tuple[int, int, list[float]]:
    done = errors = 0
    latencies: list[float] = []
    stop = time.perf_counter() + seconds
    limits = httpx.Limits(max_connections=concurrency, max_keepalive_connections=concurrency)
    async with httpx.AsyncClient(limits=limits, timeout=30) as client:

        async def worker() -> None:
            nonlocal done, errors
            while time.perf_counter() < stop:
                t = time.perf_counter()
                response = await client.get(url)
                latencies.append(time.perf_counter() - t)
                if response.status_code == 200 and response.content == expect:
                    done += 1
                else:
                    errors += 1

        await asyncio.gather(*(worker() for _ in range(concurrency)))
    return done, errors, latencies


def throughput(base: str, hot_body: bytes, args: argparse.Namespace, report: Report) -> None:
    heading(f"throughput through daphne: hot page vs floor ({args.concurrency} concurrent httpx, "
            f"{args.duration:.0f} s each, alternating, best of {args.rounds})")
    results: dict[str, list[float]] = {"floor": [], "hot": []}
    latencies: dict[str, list[float]] = {"floor": [], "hot": []}
    urls = {"floor": f"{base}/__floor", "hot": base + HOT_PAGE}
    for name, url in urls.items():  # warm both (the floor reads its file, the page fills the cache)
        response = httpx.get(url)
        if response.content != hot_body:
            raise SystemExit(f"{name}: body differs from the hot page's bytes")
    for _ in range(args.rounds):
        for name, url in urls.items():
            t = time.perf_counter()
            done, errors, lat = asyncio.run(_load(url, args.duration, args.concurrency, hot_body))
            elapsed = time.perf_counter() - t
            if errors:
                raise SystemExit(f"{name}: {errors} failed requests")
            results[name].append(done / elapsed)
            latencies[name].extend(lat)
            print(f"  {name:<6} {done / elapsed:8.0f} req/s  ({done} requests, p50 latency "
                  f"{statistics.median(lat) * 1000:.1f} ms)")
    floor, hot = max(results["floor"]), max(results["hot"])
    ratio = hot / floor
    print(f"best: hot page {hot:.0f} req/s, floor {floor:.0f} req/s, ratio {ratio:.2f} "
          f"(body {len(hot_body):,} bytes)")
    report.add("throughput: hot page req/s", f"{hot:.0f}", "", None)
    report.add("throughput: floor (plain view, same bytes) req/s", f"{floor:.0f}", "", None)
    report.add("throughput: hot / floor ratio", f"{ratio:.2f}", "printed (floor = 1.00)", None)


# ---------------------------------------------------------------- main


def summary(report: Report, seeding: dict[str, Any]) -> None:
    heading("summary")
    how = "reused" if seeding.get("reused") else "seeded"
    print(f"seeding: {how} in {seeding['seconds']:.1f} s")
    width = max(len(r.figure) for r in report.rows)
    print(f"{'figure':<{width}}  {'value':<40} {'target':<24} result")
    for r in report.rows:
        verdict = "" if r.met is None else ("met" if r.met else "NOT MET")
        print(f"{r.figure:<{width}}  {r.value:<40} {r.target:<24} {verdict}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--bounties", type=int, default=1_000_000)
    parser.add_argument("--stream-rows", type=int, default=200_000)
    parser.add_argument("--db", default=api_seed.DEFAULT_DB)
    parser.add_argument("--fresh", action="store_true", help="drop and reseed the database")
    parser.add_argument("--requests", type=int, default=300, help="warm requests per scenario")
    parser.add_argument("--cold-requests", type=int, default=40, help="cold requests per scenario")
    parser.add_argument("--budget", type=float, default=15.0, help="seconds per scenario at most")
    parser.add_argument("--concurrency", type=int, default=16)
    parser.add_argument("--duration", type=float, default=6.0, help="seconds per throughput run")
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--skip-server", action="store_true", help="in-process measurements only")
    args = parser.parse_args()
    if args.bounties < 950_000:
        print(f"note: --bounties {args.bounties:,} < 950,000: the deep pages (cursor 900000) run past the end")

    # Before the seed, which sets Django up (for records.representation): the settings are read
    # once, and the in-process measurements must read the seeded database, not the default one.
    os.environ.update(server_env(args.db))
    heading(f"seeding {args.db}: {args.bounties:,} bounties + {args.stream_rows:,} in a second deployment")
    seeding = api_seed.seed(api_seed.SeedPlan(args.bounties, args.stream_rows), dbname=args.db, fresh=args.fresh)
    report = Report()
    hot_body = in_process(args, report)
    if not args.skip_server:
        with tempfile.TemporaryDirectory(prefix="api-bench-") as tmp:
            floor_body = Path(tmp) / "floor.json"
            floor_body.write_bytes(hot_body)
            log = Path(tmp) / "daphne.log"
            with daphne(args.db, floor_body, log) as (base, process):
                streaming(base, process.pid, args.stream_rows, report)
                throughput(base, hot_body, args, report)
            warnings = [line for line in log.read_text(errors="replace").splitlines()
                        if "Warning" in line or "Error" in line or "Traceback" in line]
            if warnings:
                print("\ndaphne log warnings/errors:")
                for line in sorted(set(warnings))[:10]:
                    print("    " + line)
    summary(report, seeding)


if __name__ == "__main__":
    main()
