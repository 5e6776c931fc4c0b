"""What one client at the rate limit adds to Redis, and how fast an over-long `q` is refused.

    .venv/bin/python bench/cache_growth.py [--seconds 300] [--bounties 400]

Seeds a SQLite database of its own with `--bounties` bounties stored as the indexer writes them
(tests.factories, records.representation.record_body), starts a Redis of its own (redis-server on
a free port, no persistence) and a real daphne on it, with the production rate limit (600
requests a minute). One client then sends, at the rate limit for `--seconds`, a distinct query
string each time: pages of 100 bounties at a new cursor and searches with a new `q`, the most a
client can make the cache hold. Redis's `used_memory` is read before and after.

Two runs in the same process, on the same data:
- baseline: the cache's per-client bounds lifted (BOUNTY_API_CACHE_ENTRIES_PER_CLIENT and
  BOUNTY_API_CACHE_MAX_BODY_BYTES as large as they go), as the service kept every answer before;
- bounded: the defaults (docs/operations.md, Redis: at most 2 x 50 entries of at most 256 KiB).
It prints both growths and their ratio, then the median time an 8,000-character `q` takes to be
refused (400) beside the median of a one-row page (200), on the bounded server.

Needs redis-server on PATH; no PostgreSQL.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

PROJECT_DIR = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(PROJECT_DIR))

import httpx  # noqa: E402
import redis  # noqa: E402

RATE_LIMIT = 600  # the production default, per 60 s
ACTIVE_CONTRACT = "0xe7f1725e7734ce288f8367e1bb143e90bb3f0512"  # tests.factories.ACTIVE_CONTRACT
ACTIVE_USDC = "0x5fbdb2315678afecb367f032d93f642f64180aa3"  # tests.factories.ACTIVE_USDC
SECRET = "bench-secret-key-0123456789-abcdefghijklmnopqrstuvwxyz-ABCDEFGHIJ"


def seed(database: Path, bounties: int) -> None:
    """Migrates and fills the database in a child process (Django set up there only)."""
    env = {**os.environ, "DATABASE_URL": f"sqlite:///{database}", "DJANGO_DEBUG": "1"}
    script = (
        "import django; django.setup()\n"
        "from django.core.management import call_command\n"
        "call_command('migrate', verbosity=0)\n"
        "from tests.factories import make_bounty, make_deployment\n"
        "deployment = make_deployment()\n"
        f"for n in range({bounties}):\n"
        "    make_bounty(deployment)\n"
    )
    subprocess.run([sys.executable, "-c", script], cwd=PROJECT_DIR, env={**env, "DJANGO_SETTINGS_MODULE":
                   "bountysite.settings"}, check=True)


def hammer(base: str, seconds: float) -> tuple[int, int]:
    """Distinct query strings at the rate limit for `seconds`: (answered 200, refused 429)."""
    interval = 60 / RATE_LIMIT
    answered = refused = 0
    started = time.monotonic()
    n = 0
    with httpx.Client(base_url=base, headers={"Accept": "application/json"}, timeout=30) as client:
        while time.monotonic() - started < seconds:
            target = f"/bounties?limit=100&cursor={n}" if n % 2 else f"/bounties?limit=100&q={n:x}"
            status = client.get(target).status_code
            answered += status == 200
            refused += status == 429
            n += 1
            time.sleep(max(0.0, started + n * interval - time.monotonic()))
    return answered, refused


def run(database: Path, seconds: float, bounded: bool) -> tuple[int, int, int, tuple[float, float]]:
    """(Redis growth in bytes, answered, refused, (median ms of a refused long q, of a one-row page))."""
    from tests.servers import ThrowawayRedis, start_daphne, stop

    with ThrowawayRedis() as own_redis:
        env = {**os.environ, "DATABASE_URL": f"sqlite:///{database}", "REDIS_URL": own_redis.url,
               "DJANGO_SECRET_KEY": SECRET, "DJANGO_ALLOWED_HOSTS": "127.0.0.1", "DJANGO_SECURE_SSL_REDIRECT": "0",
               "BOUNTY_CONTRACT_ADDRESS": ACTIVE_CONTRACT, "BOUNTY_USDC_ADDRESS": ACTIVE_USDC,
               "BOUNTY_RATE_LIMIT": str(RATE_LIMIT), "BOUNTY_RATE_WINDOW_SECONDS": "60",
               # start_daphne pipes the server's stderr and never reads it: a full pipe would stop it
               "LOG_LEVEL": "ERROR"}
        env.pop("DJANGO_DEBUG", None)
        if not bounded:
            env.update(BOUNTY_API_CACHE_ENTRIES_PER_CLIENT=str(10**9), BOUNTY_API_CACHE_MAX_BODY_BYTES=str(10**12))
        server = start_daphne(env)
        client = redis.Redis.from_url(own_redis.url)
        try:
            httpx.get(server.http("/bounties?limit=1"), timeout=30)  # the process warmed up
            client.flushdb()
            before = int(client.info("memory")["used_memory"])
            answered, refused = hammer(server.http(""), seconds)
            grown = int(client.info("memory")["used_memory"]) - before
            timings = refusal_timings(server.http("")) if bounded else (0.0, 0.0)
        finally:
            client.close()
            stop(server.process)
    return grown, answered, refused, timings


def refusal_timings(base: str) -> tuple[float, float]:
    """Median ms of an 8,000-character q (a 400) and of a one-row page (a 200), after a window."""
    time.sleep(61)  # a fresh rate-limit window for the 40 requests
    with httpx.Client(base_url=base, headers={"Accept": "application/json"}, timeout=30) as client:
        long_q, page = [], []
        for n in range(20):
            started = time.perf_counter()
            assert client.get("/bounties", params={"q": "x" * 7_990 + f"{n:010d}"}).status_code == 400
            long_q.append((time.perf_counter() - started) * 1000)
            started = time.perf_counter()
            assert client.get(f"/bounties?limit=1&cursor={n}").status_code == 200
            page.append((time.perf_counter() - started) * 1000)
    return statistics.median(long_q), statistics.median(page)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=float, default=60, help="how long the client hammers (300: the issue's)")
    parser.add_argument("--bounties", type=int, default=400)
    options = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench-cache-") as folder:
        database = Path(folder) / "db.sqlite3"
        seed(database, options.bounties)
        base, base_ok, base_429, _ = run(database, options.seconds, bounded=False)
        grown, ok, too_many, (long_q, page) = run(database, options.seconds, bounded=True)
    mb = 1024 * 1024
    print(f"one client, {options.seconds:.0f} s at {RATE_LIMIT} requests/min, a distinct query string each time")
    print(f"  baseline (per-client bounds lifted): Redis +{base / mb:7.2f} MiB  ({base_ok} answered, {base_429} 429)")
    print(f"  bounded (defaults):                  Redis +{grown / mb:7.2f} MiB  ({ok} answered, {too_many} 429)")
    print(f"  bounded / baseline: {grown / base:.3f}" if base > 0 else "  baseline grew nothing")
    print(f"an 8,000-character q refused in {long_q:.2f} ms (median of 20); a one-row page answered in {page:.2f} ms; "
          f"ratio {long_q / page:.2f}")


if __name__ == "__main__":
    main()
