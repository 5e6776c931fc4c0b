"""Seed a PostgreSQL database for the read-API benchmark (bench/api_benchmark.py).

    .venv/bin/python bench/api_seed.py [--bounties 1000000] [--fresh]

Creates (or reuses) the database `bench_api` on 127.0.0.1:5432 (user postgres, trust auth), runs
`manage.py migrate` against it in a subprocess, and fills it with PostgreSQL COPY:

- deployment A (chain 91342, tests.factories.ACTIVE_CONTRACT): `--bounties` bounties, about as many
  submissions (0-3 per bounty, mean 1) and about half as many disputes (0-2 per submission, mean
  0.5);
- deployment B (chain 8453, another contract): `--stream-rows` bounties (the unpaged-array stream
  reads exactly these), with a few submissions and disputes.

Rows look like what the indexer writes (tests/factories.py): uint256 amounts as 78-digit
zero-padded strings, lowercase hex addresses and hashes, data: URIs of about 150 bytes, statuses
spread, created_at / deadline times, `search_text` as records.search builds it,
submission_count / dispute_count and the Deployment totals consistent, one SyncState row per
deployment. A few rare searchable terms (RARE_TERMS) each occur in exactly one record.

Non-constraint indexes are dropped before the COPY and rebuilt after it (the trigram GIN indexes
of migration 0002 included), then VACUUM ANALYZE. The seed parameters are stored as the
database's comment, so a rerun with the same parameters reuses the database.
"""

from __future__ import annotations

import argparse
import base64
import os
import random
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import orjson
import psycopg

PROJECT_DIR = Path(__file__).resolve().parent.parent
SEED_VERSION = 4  # bump when the generated rows change, to invalidate seeded databases
PG_DSN = "host=127.0.0.1 port=5432 user=postgres"
DEFAULT_DB = "bench_api"

ACTIVE_CHAIN = 91342
ACTIVE_CONTRACT = "0xe7f1725e7734ce288f8367e1bb143e90bb3f0512"  # tests.factories.ACTIVE_CONTRACT
ACTIVE_USDC = "0x5fbdb2315678afecb367f032d93f642f64180aa3"  # tests.factories.ACTIVE_USDC
SECOND_CHAIN = 8453
SECOND_CONTRACT = "0x9fe46736679d2d9a65f0992f2272de9f3c7fa6e0"
SECOND_USDC = "0x833589fcd6edb6e08f4c7c32d4f71b54bda02913"

SEPARATOR = "\x1f"  # records.search.SEPARATOR
UINT256_DIGITS = 78  # records.fields.UINT256_DIGITS
T0 = datetime(2025, 6, 1, tzinfo=UTC)

# term -> (resource, which record of deployment A carries it: a fraction of the ID range)
RARE_TERMS = {
    "zebracorn": ("bounties", 0.5),
    "quokkanaut": ("submissions", 0.25),
    "narwhalix": ("disputes", 0.75),
}

_WORDS_TEXT = (
    "build a parser for the ledger format and write tests covering edge cases translate this "
    "document into spanish summarise the report design logo icon set review contract audit "
    "gas optimisation frontend dashboard chart export csv import api client retry backoff "
    "cache layer index query migration schema docs tutorial video thumbnail dataset label "
    "images classify sentiment benchmark latency throughput memory profile fix bug crash "
    "mobile layout accessibility dark mode onboarding email template newsletter copy"
)
WORDS = tuple(_WORDS_TEXT.split())
BOUNTY_STATUSES = ("open",) * 6 + ("resolved",) * 3 + ("refunded",)
SUBMISSION_STATUSES = ("submitted",) * 4 + ("disputed",) * 2 + ("accepted",) * 2 + ("rejected", "refunded")
DISPUTE_STATUSES = ("pending_human_review",) * 4 + ("upheld",) * 2 + ("rejected",) * 3 + ("cancelled",)

BOUNTY_COLUMNS = (
    "deployment_id", "bounty_id", "metadata_uri", "metadata_hash", "tx_hash", "block_number", "log_index",
    "created_at", "search_text", "prompt", "bounty_amount", "fee_amount", "bond_amount", "duration", "status",
    "poster", "deadline", "challenge_window", "submission_count", "body",
)
SUBMISSION_COLUMNS = (
    "deployment_id", "submission_id", "bounty_id", "metadata_uri", "metadata_hash", "tx_hash", "block_number",
    "log_index", "created_at", "search_text", "tile_id", "content", "bond_amount", "review_deadline", "status",
    "claimant", "dispute_count", "body",
)
DISPUTE_COLUMNS = (
    "deployment_id", "dispute_id", "bounty_id", "submission_id", "metadata_uri", "metadata_hash", "tx_hash",
    "block_number", "log_index", "created_at", "search_text", "challenger_id", "reason", "bond_amount", "status",
    "body",
)
TABLES = ("records_bounty", "records_submission", "records_dispute")


@dataclass(frozen=True)
class SeedPlan:
    bounties: int
    stream_rows: int
    seed: int = 20260101

    @property
    def signature(self) -> str:
        return f"api_seed v{SEED_VERSION} bounties={self.bounties} stream_rows={self.stream_rows} seed={self.seed}"


def database_url(dbname: str = DEFAULT_DB) -> str:
    return f"postgres://postgres@127.0.0.1:5432/{dbname}"


def join_search(*values: object) -> str:
    """records.search.join_fields of the lowercased values: de-duplicated, separator-joined
    (checked against records.search on a sample by the benchmark)."""
    seen: list[str] = []
    for value in values:
        text = str(value).lower()
        if text not in seen:
            seen.append(text)
    return SEPARATOR.join(seen)


def uint(n: int) -> str:
    return str(n).zfill(UINT256_DIGITS)


class Gen:
    """Deterministic random values in the shapes the indexer stores."""

    def __init__(self, seed: int) -> None:
        self.rng = random.Random(seed)

    def hex32(self) -> str:
        return f"0x{self.rng.getrandbits(256):064x}"

    def address(self, pool: list[str] | None = None) -> str:
        if pool is not None:
            return self.rng.choice(pool)
        return f"0x{self.rng.getrandbits(160):040x}"

    def data_uri(self) -> str:  # about 150 bytes of inline JSON metadata
        title = " ".join(self.rng.choices(WORDS, k=self.rng.randint(6, 10)))
        tags = ",".join(f'"{t}"' for t in self.rng.choices(WORDS, k=3))
        uri = f'data:application/json,{{"title":"{title}","tags":[{tags}],"v":{self.rng.randint(1, 9)},"ref":"'
        return uri + base64.b32encode(self.rng.randbytes(10)).decode().lower() + '"}'

    def text(self, low: int, high: int) -> str:
        return " ".join(self.rng.choices(WORDS, k=self.rng.randint(low, high)))

    def amount(self) -> int:
        if self.rng.random() < 0.01:  # a few huge (up to 2^256-1) values
            return self.rng.getrandbits(self.rng.randint(64, 256))
        return int(10 ** self.rng.uniform(6, 14))


def _ts(seconds: float) -> str:
    return (T0 + timedelta(seconds=seconds)).isoformat()


def _moment(seconds: float) -> datetime:
    return T0 + timedelta(seconds=seconds)


def _body(to_json: Callable[..., dict[str, object]], deployment: tuple[int, str], **fields: object) -> str:
    """The record's stored JSON body, rendered by records.representation as the indexer does,
    escaped for COPY's text format."""
    chain_id, contract = deployment
    body = orjson.dumps(to_json(SimpleNamespace(**fields), chain_id=chain_id, contract_address=contract))
    return body.decode().replace("\\", "\\\\")


def _representation() -> Any:
    """records.representation, with Django set up for it (the models it imports)."""
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "bountysite.settings")
    os.environ.setdefault("DJANGO_DEBUG", "1")
    sys.path.insert(0, str(PROJECT_DIR))
    import django

    django.setup()
    from records import representation

    return representation


def _line(values: tuple[object, ...]) -> str:
    return "\t".join(map(str, values)) + "\n"


def _rare_id(total: int, fraction: float) -> int:
    return max(1, int(total * fraction))


def bounty_rows(gen: Gen, deployment_id: int, deployment: tuple[int, str], count: int,
                sub_counts: list[int] | None, rare: dict[int, str], posters: list[str]) -> Iterator[str]:
    rng = gen.rng
    to_json = _representation().bounty_json
    for bounty_id in range(1, count + 1):
        created = bounty_id * 30 + rng.random() * 20
        status = rng.choice(BOUNTY_STATUSES)
        poster = gen.address(posters)
        uri = gen.data_uri()
        if bounty_id in rare:
            uri = f"data:text/plain,{rare[bounty_id]}%20" + uri[16:130]
        metadata_hash, tx_hash, prompt = gen.hex32(), gen.hex32(), gen.text(8, 24)
        amount, bond = gen.amount(), int(10 ** rng.uniform(5, 9))
        duration = rng.choice((3_600, 86_400, 259_200, 604_800))
        block, log_index, window = 1_000 + bounty_id * 3, rng.randint(0, 20), rng.choice((3_600, 86_400))
        search = join_search(bounty_id, status, poster, uri, metadata_hash, tx_hash, prompt)
        body = _body(to_json, deployment, bounty_id=bounty_id, prompt=prompt, bounty_amount=amount,
                     fee_amount=amount * 25 // 1000, bond_amount=bond, duration=duration, status=status, poster=poster,
                     deadline=_moment(created + duration), challenge_window=window, metadata_uri=uri,
                     metadata_hash=metadata_hash, tx_hash=tx_hash, block_number=block, log_index=log_index,
                     created_at=_moment(created))
        yield _line((deployment_id, bounty_id, uri, metadata_hash, tx_hash, block, log_index,
                     _ts(created), search, prompt, uint(amount), uint(amount * 25 // 1000), uint(bond), duration,
                     status, poster, _ts(created + duration), window,
                     sub_counts[bounty_id - 1] if sub_counts else 0, body))


def submission_rows(gen: Gen, deployment_id: int, deployment: tuple[int, str], sub_counts: list[int],
                    dispute_counts: list[int], rare: dict[int, str], actors: list[str]) -> Iterator[str]:
    rng = gen.rng
    to_json = _representation().submission_json
    submission_id = 0
    for bounty_index, n in enumerate(sub_counts):
        bounty_id = bounty_index + 1
        for nth in range(n):
            submission_id += 1
            created = bounty_id * 30 + 21 + nth * 2 + rng.random()  # rises with the ID, as on a chain
            status = rng.choice(SUBMISSION_STATUSES)
            tile, claimant = gen.address(actors), gen.address(actors)
            uri, metadata_hash, tx_hash = gen.data_uri(), gen.hex32(), gen.hex32()
            content = gen.text(6, 20)
            if submission_id in rare:
                content = f"{rare[submission_id]} {content}"
            search = join_search(submission_id, bounty_id, status, tile, claimant, uri, metadata_hash, tx_hash,
                                 content)
            block, log_index, bond = 1_001 + bounty_id * 3, rng.randint(0, 20), int(10 ** rng.uniform(5, 9))
            body = _body(to_json, deployment, submission_id=submission_id, bounty_id=bounty_id, tile_id=tile,
                         content=content, bond_amount=bond, review_deadline=_moment(created + 86_400), status=status,
                         claimant=claimant, metadata_uri=uri, metadata_hash=metadata_hash, tx_hash=tx_hash,
                         block_number=block, log_index=log_index, created_at=_moment(created))
            yield _line((deployment_id, submission_id, bounty_id, uri, metadata_hash, tx_hash,
                         block, log_index, _ts(created), search, tile, content,
                         uint(bond), _ts(created + 86_400), status, claimant,
                         dispute_counts[submission_id - 1], body))


def dispute_rows(gen: Gen, deployment_id: int, deployment: tuple[int, str], sub_counts: list[int],
                 dispute_counts: list[int], rare: dict[int, str], actors: list[str]) -> Iterator[str]:
    rng = gen.rng
    to_json = _representation().dispute_json
    submission_id = dispute_id = 0
    for bounty_index, n in enumerate(sub_counts):
        bounty_id = bounty_index + 1
        nth = 0
        for _ in range(n):
            submission_id += 1
            for _ in range(dispute_counts[submission_id - 1]):
                dispute_id += 1
                created = bounty_id * 30 + 27 + nth * 0.4 + rng.random() * 0.3  # rises with the ID
                nth += 1
                status = rng.choice(DISPUTE_STATUSES)
                challenger = gen.address(actors)
                uri, metadata_hash, tx_hash = gen.data_uri(), gen.hex32(), gen.hex32()
                reason = gen.text(5, 16)
                if dispute_id in rare:
                    reason = f"{rare[dispute_id]} {reason}"
                search = join_search(dispute_id, bounty_id, submission_id, status, challenger, uri,
                                     metadata_hash, tx_hash, reason)
                block, log_index, bond = 1_002 + bounty_id * 3, rng.randint(0, 20), int(10 ** rng.uniform(5, 9))
                body = _body(to_json, deployment, dispute_id=dispute_id, bounty_id=bounty_id,
                             submission_id=submission_id, challenger_id=challenger, reason=reason, bond_amount=bond,
                             status=status, metadata_uri=uri, metadata_hash=metadata_hash, tx_hash=tx_hash,
                             block_number=block, log_index=log_index, created_at=_moment(created))
                yield _line((deployment_id, dispute_id, bounty_id, submission_id, uri, metadata_hash, tx_hash,
                             block, log_index, _ts(created), search, challenger, reason, uint(bond), status, body))


def _counts(rng: random.Random, n: int, weights: tuple[int, ...]) -> list[int]:
    return rng.choices(range(len(weights)), weights=weights, k=n)


def _copy(cur: psycopg.Cursor, table: str, columns: tuple[str, ...], rows: Iterator[str]) -> int:
    written = 0
    buffer: list[str] = []
    with cur.copy(f"COPY {table} ({', '.join(columns)}) FROM STDIN (FREEZE)") as copy:
        for line in rows:
            buffer.append(line)
            if len(buffer) == 5_000:
                copy.write("".join(buffer))
                written += len(buffer)
                buffer = []
        if buffer:
            copy.write("".join(buffer))
            written += len(buffer)
    return written


def _admin() -> psycopg.Connection:
    return psycopg.connect(PG_DSN + " dbname=postgres", autocommit=True)


def current_signature(dbname: str) -> str | None:
    with _admin() as conn:
        row = conn.execute(
            "SELECT shobj_description(oid, 'pg_database') FROM pg_database WHERE datname = %s", (dbname,)
        ).fetchone()
    if row is None:
        return None
    return row[0] or ""


def _log(message: str) -> None:
    print(f"[seed] {message}", flush=True)


def _recreate(dbname: str) -> None:
    with _admin() as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{dbname}" WITH (FORCE)')
        conn.execute(f'CREATE DATABASE "{dbname}"')


def _migrate(dbname: str) -> None:
    """All migrations; if the project's migrations do not apply (work in progress elsewhere),
    only those the read API's tables need (records up to 0002, indexer)."""
    env = {**os.environ, "DATABASE_URL": database_url(dbname), "DJANGO_DEBUG": "1"}
    env.pop("REDIS_URL", None)
    manage = [sys.executable, "manage.py", "migrate", "--noinput", "-v", "0"]
    _recreate(dbname)
    full = subprocess.run(manage, cwd=PROJECT_DIR, env=env, capture_output=True, text=True)
    if full.returncode == 0:
        return
    last = (full.stderr.strip().splitlines() or ["?"])[-1]
    _log(f"WARNING: full migrate failed ({last}); migrating records 0002 + indexer only")
    _recreate(dbname)
    subprocess.run([*manage, "records", "0002"], cwd=PROJECT_DIR, env=env, check=True)
    subprocess.run([*manage, "indexer"], cwd=PROJECT_DIR, env=env, check=True)


def seed(plan: SeedPlan, *, dbname: str = DEFAULT_DB, fresh: bool = False) -> dict[str, object]:
    """Ensure `dbname` holds `plan`'s data; returns what was done and how long it took."""
    started = time.perf_counter()
    signature = current_signature(dbname)
    if signature == plan.signature and not fresh:
        _log(f"reusing database {dbname} ({signature}); applying any newer migrations")
        env = {**os.environ, "DATABASE_URL": database_url(dbname), "DJANGO_DEBUG": "1"}
        env.pop("REDIS_URL", None)
        subprocess.run([sys.executable, "manage.py", "migrate", "--noinput", "-v", "0"], cwd=PROJECT_DIR, env=env,
                       check=True)
        return {"reused": True, "seconds": time.perf_counter() - started}
    _migrate(dbname)
    phases: dict[str, float] = {"migrate": time.perf_counter() - started}

    rng = random.Random(plan.seed)
    sub_counts = _counts(rng, plan.bounties, (4, 3, 2, 1))  # mean 1 submission per bounty
    dispute_counts = _counts(rng, sum(sub_counts), (6, 3, 1))  # mean 0.5 dispute per submission
    second_subs = [1 if i % 100 == 0 else 0 for i in range(1, plan.stream_rows + 1)]
    second_disputes = [1 if i % 4 == 0 else 0 for i in range(sum(second_subs))]
    n_subs, n_disputes = sum(sub_counts), sum(dispute_counts)
    rare: dict[str, dict[int, str]] = {"bounties": {}, "submissions": {}, "disputes": {}}
    sizes = {"bounties": plan.bounties, "submissions": n_subs, "disputes": n_disputes}
    for term, (resource, fraction) in RARE_TERMS.items():
        rare[resource][_rare_id(sizes[resource], fraction)] = term
    actors_gen = Gen(plan.seed + 1)
    posters = [actors_gen.address() for _ in range(50_000)]
    actors = [actors_gen.address() for _ in range(200_000)]

    with psycopg.connect(PG_DSN + f" dbname={dbname}") as conn, conn.cursor() as cur:
        cur.execute("SET session_replication_role = replica")  # no FK triggers during the load
        cur.execute("SET synchronous_commit = off")
        indexes = cur.execute(
            """SELECT i.relname, pg_get_indexdef(i.oid) FROM pg_index x
               JOIN pg_class i ON i.oid = x.indexrelid JOIN pg_class t ON t.oid = x.indrelid
               WHERE t.relname = ANY(%s)
                 AND NOT EXISTS (SELECT 1 FROM pg_constraint c WHERE c.conindid = x.indexrelid)""",
            (list(TABLES),),
        ).fetchall()
        for name, _ in indexes:
            cur.execute(f'DROP INDEX "{name}"')
        cur.execute("TRUNCATE " + ", ".join(TABLES))
        deployments: dict[str, int] = {}
        chains = {"A": (ACTIVE_CHAIN, ACTIVE_CONTRACT), "B": (SECOND_CHAIN, SECOND_CONTRACT)}
        for key, chain, contract, usdc, totals in (
            ("A", ACTIVE_CHAIN, ACTIVE_CONTRACT, ACTIVE_USDC, (plan.bounties, n_subs, n_disputes)),
            ("B", SECOND_CHAIN, SECOND_CONTRACT, SECOND_USDC,
             (plan.stream_rows, sum(second_subs), sum(second_disputes))),
        ):
            row = cur.execute(
                """INSERT INTO records_deployment (chain_id, contract_address, usdc_address, bounty_total,
                   submission_total, dispute_total) VALUES (%s, %s, %s, %s, %s, %s) RETURNING id""",
                (chain, contract, usdc, *totals),
            ).fetchone()
            assert row is not None
            deployments[key] = row[0]
            cur.execute(
                """INSERT INTO indexer_syncstate (deployment_id, last_indexed_block, last_seq, head_block,
                   last_heartbeat) VALUES (%s, %s, %s, %s, now())""",
                (row[0], 5_000_000, sum(totals), 5_000_000),
            )
        t = time.perf_counter()
        gen = Gen(plan.seed + 2)
        written = _copy(cur, "records_bounty", BOUNTY_COLUMNS,
                        bounty_rows(gen, deployments["A"], chains["A"], plan.bounties, sub_counts, rare["bounties"],
                                    posters))
        written += _copy(cur, "records_bounty", BOUNTY_COLUMNS,
                         bounty_rows(gen, deployments["B"], chains["B"], plan.stream_rows, second_subs, {}, posters))
        phases["copy bounties"] = time.perf_counter() - t
        _log(f"copied {written:,} bounties in {phases['copy bounties']:.1f} s")
        t = time.perf_counter()
        written = _copy(cur, "records_submission", SUBMISSION_COLUMNS,
                        submission_rows(gen, deployments["A"], chains["A"], sub_counts, dispute_counts,
                                        rare["submissions"], actors))
        written += _copy(cur, "records_submission", SUBMISSION_COLUMNS,
                         submission_rows(gen, deployments["B"], chains["B"], second_subs, second_disputes, {}, actors))
        phases["copy submissions"] = time.perf_counter() - t
        _log(f"copied {written:,} submissions in {phases['copy submissions']:.1f} s")
        t = time.perf_counter()
        written = _copy(cur, "records_dispute", DISPUTE_COLUMNS,
                        dispute_rows(gen, deployments["A"], chains["A"], sub_counts, dispute_counts, rare["disputes"],
                                     actors))
        written += _copy(cur, "records_dispute", DISPUTE_COLUMNS,
                         dispute_rows(gen, deployments["B"], chains["B"], second_subs, second_disputes, {}, actors))
        phases["copy disputes"] = time.perf_counter() - t
        _log(f"copied {written:,} disputes in {phases['copy disputes']:.1f} s")
        # What records.chronology would find (and the indexer keeps): whether created_at rises with the ID.
        for table, key, flag in (("records_bounty", "bounty_id", "bounty_in_chain_order"),
                                 ("records_submission", "submission_id", "submission_in_chain_order"),
                                 ("records_dispute", "dispute_id", "dispute_in_chain_order")):
            cur.execute(
                f"""UPDATE records_deployment AS d SET {flag} = NOT EXISTS (
                      SELECT 1 FROM (SELECT created_at, LAG(created_at) OVER (ORDER BY {key}) AS previous
                                     FROM {table} WHERE deployment_id = d.id) AS ordered
                      WHERE created_at < previous)"""
            )
        conn.commit()

    t = time.perf_counter()
    # Largest first, on two connections (two cores): the trigram GIN builds dominate.
    pending = sorted(indexes, key=lambda item: ("gin" not in item[1], item[0]))
    lock = threading.Lock()

    def build() -> None:
        with psycopg.connect(PG_DSN + f" dbname={dbname}", autocommit=True) as conn:
            conn.execute("SET maintenance_work_mem = '512MB'")
            conn.execute("SET max_parallel_maintenance_workers = 1")
            while True:
                with lock:
                    if not pending:
                        return
                    name, definition = pending.pop(0)
                one = time.perf_counter()
                conn.execute(definition)
                _log(f"index {name}: {time.perf_counter() - one:.1f} s")

    workers = [threading.Thread(target=build) for _ in range(2)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join()
    phases["indexes"] = time.perf_counter() - t

    t = time.perf_counter()
    with psycopg.connect(PG_DSN + f" dbname={dbname}", autocommit=True) as conn:
        conn.execute("VACUUM (ANALYZE)")
    phases["vacuum analyze"] = time.perf_counter() - t
    with _admin() as conn:
        conn.execute(f'COMMENT ON DATABASE "{dbname}" IS \'{plan.signature}\'')
    total = time.perf_counter() - started
    _log(f"seeded {dbname} in {total:.1f} s: " + ", ".join(f"{k} {v:.1f} s" for k, v in phases.items()))
    return {"reused": False, "seconds": total, "phases": phases, "submissions": n_subs, "disputes": n_disputes}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--bounties", type=int, default=1_000_000)
    parser.add_argument("--stream-rows", type=int, default=200_000)
    parser.add_argument("--db", default=DEFAULT_DB)
    parser.add_argument("--fresh", action="store_true", help="drop and recreate the database")
    args = parser.parse_args()
    seed(SeedPlan(args.bounties, args.stream_rows), dbname=args.db, fresh=args.fresh)


if __name__ == "__main__":
    main()
