"""Indexer backfill benchmark: the raw ceiling, backfill into SQLite, backfill into PostgreSQL.

    .venv/bin/python bench/indexer_backfill.py [--events 50000]

1. Chain. Starts its own anvil, deploys the reference contracts (`deploy_reference_contracts`)
   and generates at least `--events` record events in a realistic mix (bounties, submissions,
   disputes, resolutions, cancellations, finalizations, refunds) through real transactions of the
   reference contracts: automine off, `eth_sendTransaction` from the unlocked dev accounts with
   explicit gas and nonces in JSON-RPC batches of `--per-block` transactions, each followed by
   `evm_mine`. The chain is cached in bench/results/ (anvil --dump-state /
   --load-state), keyed by the generator's parameters, so reruns skip building.
2. Ceiling. The indexer's RPC and decode work without a database, one process: `BatchReader.read`
   over the same getLogs ranges (`LogFetcher` / `RpcClient`), `decode_log` of every log, the block
   headers the indexer fetches, and its per-catch-up eth_blockNumber and reorg check.
3. Backfill into a fresh SQLite file and into a fresh PostgreSQL database (created and dropped
   here), end to end as `run_indexer` does it: `Indexer.prepare()` (a first sync: a bulk
   backfill, the secondary indexes dropped), `Indexer.catch_up()` until caught up, then
   `IndexBuilder.build()` (the index builder's thread's work), timed separately as well; confirmations 0,
   BOUNTY_GETLOGS_MAX_BLOCKS `--max-span`; migrations run first, untimed. Afterwards the records,
   their statuses, the AppliedLog rows, the sync state and the indexes are checked against what
   the generator emitted.
4. Prints a table (events, blocks, batches, seconds, events/s, ratio to the ceiling), the time
   per indexer stage, the targets against the ceiling of the same run (the backfill to caught up,
   the index build excluded: at least 40 % on both backends; end to end, the build included: at
   least 40 % on SQLite, 25 % on PostgreSQL), a cProfile of a separate PostgreSQL run
   (`--no-profile` skips it) and, last, one line `BENCH_SUMMARY {json}` with the figures.

Every measurement runs in a fresh child process of this script (`--child MODE`) whose
environment carries DATABASE_URL and the BOUNTY_* settings, as the indexer process would have.
"""

from __future__ import annotations

import argparse
import contextlib
import cProfile
import io
import json
import math
import os
import pstats
import random
import secrets
import shutil
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

PROJECT_DIR = Path(__file__).resolve().parent.parent
RESULTS_DIR = PROJECT_DIR / "bench" / "results"
RESULT_PREFIX = "BENCH_RESULT "
GENERATOR_VERSION = 1  # bump when the generated chain changes, to invalidate cached chains

# Against the ceiling of the same run: the backfill to caught up (records served, the deferred
# index build excluded) and end to end (the build included), per backend.
TARGETS = {"sqlite": {"backfill": 0.40, "end_to_end": 0.40}, "postgres": {"backfill": 0.40, "end_to_end": 0.25}}
CEILING_RUNS = 3  # at least; the ceiling is cheap and noisy (anvil may still be busy after a build)

HOUR = 3600
DAY = 24 * HOUR
USDC = 10**6
MAX_UINT256 = 2**256 - 1
BLOCK_GAS_LIMIT = 10**10  # far above what a block uses, so the base fee only falls

# The reference deployment's roles (contracts/devchain.py): account 0 owner and arbiter, 3 and 4 grouts.
ARBITER = 0
GROUTS = (3, 4)
USERS = (1, 2, 5, 6, 7, 8, 9)  # posters and claimants

GAS = {  # generous (metadata strings vary in length); unused gas is not charged
    "createBounty": 1_000_000,
    "submit": 800_000,
    "dispute": 800_000,
    "resolveDispute": 200_000,
    "cancelResolvedDispute": 150_000,
    "advanceReviewCursor": 150_000,
    "finalize": 200_000,
    "refundExpired": 150_000,
    "refundSubmissionBond": 150_000,
    "approve": 100_000,
}
SIGNATURES = {
    "createBounty": ("string", "bytes32", "uint256", "uint64"),
    "submit": ("uint256", "string", "bytes32"),
    "dispute": ("uint256", "string", "bytes32"),
    "resolveDispute": ("uint256", "bool"),
    "cancelResolvedDispute": ("uint256",),
    "advanceReviewCursor": ("uint256",),
    "finalize": ("uint256",),
    "refundExpired": ("uint256",),
    "refundSubmissionBond": ("uint256",),
    "approve": ("address", "uint256"),
}
NO_RECORD_EVENT = {"advanceReviewCursor", "approve"}  # their events are not record events
SUBMISSION_STATUS_NAMES = {0: "submitted", 1: "disputed", 2: "accepted", 3: "rejected", 4: "refunded"}

WORDS = ("translate", "audit", "logo", "guide", "indexer", "tests", "docs", "design", "review", "fix",
         "rounding", "onboarding", "dashboard", "api", "migration", "benchmark", "Portuguese", "report")


def _project_on_path() -> None:
    if str(PROJECT_DIR) not in sys.path:
        sys.path.insert(0, str(PROJECT_DIR))


def _chunks(items: Sequence[Any], size: int) -> Iterator[Sequence[Any]]:
    for start in range(0, len(items), size):
        yield items[start : start + size]


# ====================================================================== building the chain


class BuildError(RuntimeError):
    pass


@dataclass
class Tx:
    sender: str
    function: str
    args: tuple[Any, ...]
    to: str | None = None  # the bounty contract unless set


@dataclass
class Mirror:
    """What the generator knows of the contract's records, from the events it emitted."""

    bounties: dict[int, dict[str, Any]] = field(default_factory=dict)
    submissions: dict[int, dict[str, Any]] = field(default_factory=dict)
    disputes: dict[int, dict[str, Any]] = field(default_factory=dict)
    events: Counter[str] = field(default_factory=Counter)

    def apply(self, event: Any) -> None:
        kind = type(event).__name__
        self.events[kind] += 1
        if kind == "BountyCreated":
            self.bounties[event.bounty_id] = {"status": "open", "subs": []}
        elif kind == "SubmissionCreated":
            self.submissions[event.submission_id] = {"bounty": event.bounty_id, "status": "submitted", "disputes": []}
            self.bounties[event.bounty_id]["subs"].append(event.submission_id)
        elif kind == "DisputeCreated":
            self.disputes[event.dispute_id] = {"submission": event.submission_id, "status": "pending_human_review"}
            self.submissions[event.submission_id]["disputes"].append(event.dispute_id)
            self.submissions[event.submission_id]["status"] = "disputed"
        elif kind == "DisputeResolved":
            self.disputes[event.dispute_id]["status"] = "upheld" if event.upheld else "rejected"
            self.submissions[event.submission_id]["status"] = SUBMISSION_STATUS_NAMES[event.submission_status]
        elif kind == "DisputeCancelled":
            self.disputes[event.dispute_id]["status"] = "cancelled"
        elif kind == "BountyFinalized":
            self.bounties[event.bounty_id]["status"] = "resolved"
            self.submissions[event.submission_id]["status"] = "accepted"
        elif kind == "BountyRefunded":
            self.bounties[event.bounty_id]["status"] = "refunded"
        elif kind == "SubmissionRefunded":
            self.submissions[event.submission_id]["status"] = "refunded"

    def statuses(self) -> dict[str, dict[str, int]]:
        return {
            "bounty": dict(Counter(b["status"] for b in self.bounties.values())),
            "submission": dict(Counter(s["status"] for s in self.submissions.values())),
            "dispute": dict(Counter(d["status"] for d in self.disputes.values())),
        }


class ChainBuilder:
    """Generates record events through real transactions, many per block."""

    def __init__(self, rpc: Any, deployment: Any, per_block: int, seed: int) -> None:
        from eth_utils import keccak

        self.rpc = rpc
        self.deployment = deployment
        self.board = deployment.contract_address
        self.accounts: list[str] = list(deployment.accounts)
        self.per_block = per_block
        self.rng = random.Random(seed)
        self.mirror = Mirror()
        self.nonces: dict[str, int] = {}
        self.transactions = 0
        self.selectors = {name: keccak(text=f"{name}({','.join(types)})")[:4] for name, types in SIGNATURES.items()}

    # ------------------------------------------------------------ plumbing

    def account(self, index: int) -> str:
        return self.accounts[index]

    def head(self) -> int:
        return int(self.rpc.call("eth_blockNumber", []), 16)

    def _calldata(self, tx: Tx) -> str:
        from eth_abi.abi import encode

        return "0x" + (self.selectors[tx.function] + encode(SIGNATURES[tx.function], tx.args)).hex()

    def _request(self, tx: Tx) -> tuple[str, list[Any]]:
        nonce = self.nonces[tx.sender]
        self.nonces[tx.sender] = nonce + 1
        return ("eth_sendTransaction", [{
            "from": tx.sender, "to": tx.to or self.board, "data": self._calldata(tx),
            "gas": hex(GAS[tx.function]), "nonce": hex(nonce),
        }])

    def phase(self, txs: list[Tx], *, advance_seconds: int = 0) -> list[Any]:
        """Mines `txs` in blocks of `per_block` (in order per sender) and returns the record events."""
        from indexer.events import RECORD_EVENT_TOPICS, decode_log

        if not txs:
            return []
        first = self.head() + 1
        if advance_seconds:
            self.rpc.call("evm_increaseTime", [advance_seconds])
        for chunk in _chunks(txs, self.per_block):
            # Not evm_mine in the same batch: anvil may answer a batch's calls out of order.
            self.rpc.batch([self._request(tx) for tx in chunk])
            self.rpc.call("evm_mine", [])
        self.transactions += len(txs)
        pending = int(self.rpc.call("txpool_status", [])["pending"], 16)
        if pending:
            raise BuildError(f"{pending} transactions were not mined")
        last = self.head()
        logs = self.rpc.call("eth_getLogs", [{"address": self.board, "fromBlock": hex(first), "toBlock": hex(last),
                                              "topics": [RECORD_EVENT_TOPICS]}])
        events = [decode_log(raw) for raw in logs]
        events.sort(key=lambda e: (e.log.block_number, e.log.log_index))
        expected = sum(1 for tx in txs if tx.function not in NO_RECORD_EVENT)
        if len(events) != expected:
            raise BuildError(f"{expected - len(events)} of {len(txs)} transactions reverted in blocks {first}-{last}: "
                             f"{self._reverts(first, last)}")
        for event in events:
            self.mirror.apply(event)
        return events

    def _reverts(self, first: int, last: int) -> str:
        """The reverted transactions of blocks first..last: selector, gas used of gas given."""
        names = {selector: name for name, selector in self.selectors.items()}
        failed = []
        for number in range(first, last + 1):
            block = self.rpc.call("eth_getBlockByNumber", [hex(number), True])
            receipts = self.rpc.batch([("eth_getTransactionReceipt", [tx["hash"]]) for tx in block["transactions"]])
            for tx, receipt in zip(block["transactions"], receipts, strict=True):
                if int(receipt["status"], 16) != 1:
                    name = names.get(bytes.fromhex(tx["input"][2:10]), tx["input"][:10])
                    failed.append(f"{name} used {int(receipt['gasUsed'], 16)} of {int(tx['gas'], 16)} gas")
        return "; ".join(failed[:10])

    def _metadata(self, value: dict[str, Any]) -> tuple[str, bytes]:
        from bounty_client.metadata import metadata_hash, metadata_to_data_uri

        return metadata_to_data_uri(value), bytes.fromhex(metadata_hash(value)[2:])

    def _words(self, low: int, high: int) -> str:
        return " ".join(self.rng.choice(WORDS) for _ in range(self.rng.randint(low, high)))

    # ------------------------------------------------------------ scenario

    def setup(self) -> None:
        self.rpc.call("evm_setAutomine", [False])
        self.rpc.call("evm_setBlockGasLimit", [hex(BLOCK_GAS_LIMIT)])
        answers = self.rpc.batch([("eth_getTransactionCount", [a, "pending"]) for a in self.accounts])
        self.nonces = {a: int(n, 16) for a, n in zip(self.accounts, answers, strict=True)}
        usdc = self.deployment.usdc_address
        self.phase([Tx(a, "approve", (self.board, MAX_UINT256), to=usdc) for a in self.accounts])

    def generation(self, bounties: int) -> None:
        """One round of activity: create, submit, dispute, resolve, then (two days later) close."""
        rng = self.rng
        users = [self.account(i) for i in USERS]
        grouts = [self.account(i) for i in GROUTS]
        arbiter = self.account(ARBITER)

        creates = []
        for _ in range(bounties):
            reward = rng.randint(5, 250)
            uri, digest = self._metadata({"title": self._words(2, 6), "description": self._words(6, 20),
                                          "reward_usdc": reward})
            creates.append(Tx(rng.choice(users), "createBounty", (uri, digest, reward * USDC,
                                                                  rng.randint(DAY, 2 * DAY))))
        bounty_ids = [e.bounty_id for e in self.phase(creates)]

        submits = []
        for bounty_id in bounty_ids:
            for claimant in rng.sample(users, rng.choices((0, 1, 2, 3, 4), weights=(10, 25, 30, 20, 15))[0]):
                uri, digest = self._metadata({"bounty_id": bounty_id, "summary": self._words(4, 16)})
                submits.append(Tx(claimant, "submit", (bounty_id, uri, digest)))
        submission_ids = [e.submission_id for e in self.phase(submits)]

        disputes = []
        for submission_id in submission_ids:
            if rng.random() < 0.30:
                first, second = rng.sample(grouts, 2)
                challengers = [first, second] if rng.random() < 0.25 else [first]
                for grout in challengers:
                    uri, digest = self._metadata({"submission_id": submission_id, "reason": self._words(3, 12)})
                    disputes.append(Tx(grout, "dispute", (submission_id, uri, digest)))
        self.phase(disputes)

        # The arbiter resolves (or, after an upheld one, cancels) the disputes of each submission in
        # order; one sender, so nonce order is execution order. Some stay pending for review.
        resolutions = []
        for submission_id in submission_ids:
            dispute_ids = self.mirror.submissions[submission_id]["disputes"]
            if not dispute_ids or rng.random() < 0.05:
                continue
            rejected = False
            for dispute_id in dispute_ids:
                if rejected:
                    resolutions.append(Tx(arbiter, "cancelResolvedDispute", (dispute_id,)))
                    continue
                upheld = rng.random() < 0.5
                resolutions.append(Tx(arbiter, "resolveDispute", (dispute_id, upheld)))
                rejected = upheld
        self.phase(resolutions)

        # Two days later: every deadline and review window has passed. Each bounty is closed by one
        # sender (nonce order): refund if nothing is live, else advance past rejected submissions,
        # finalize, and let most other claimants take their bonds back. Some bounties stay open.
        closing = []
        for bounty_id in bounty_ids:
            subs = [self.mirror.submissions[s] for s in self.mirror.bounties[bounty_id]["subs"]]
            if rng.random() < 0.08 or any(s["status"] == "disputed" for s in subs):
                continue
            sender = rng.choice(users)
            live = [s for s in self.mirror.bounties[bounty_id]["subs"]
                    if self.mirror.submissions[s]["status"] == "submitted"]
            if not live:
                closing.append(Tx(sender, "refundExpired", (bounty_id,)))
                continue
            if subs[0]["status"] == "rejected":
                closing.append(Tx(sender, "advanceReviewCursor", (bounty_id,)))
            closing.append(Tx(sender, "finalize", (bounty_id,)))
            closing.extend(Tx(sender, "refundSubmissionBond", (s,)) for s in live[1:] if rng.random() < 0.7)
        self.phase(closing, advance_seconds=2 * DAY + HOUR)

    def build(self, target_events: int, report: Callable[[str], None]) -> None:
        started = time.monotonic()
        self.setup()
        while (done := sum(self.mirror.events.values())) < target_events:
            # About 5.9 record events per bounty; at most 1,500 bounties a generation.
            self.generation(max(20, min(1_500, math.ceil((target_events - done) / 5.9))))
            report(f"  {sum(self.mirror.events.values()):,} record events, {self.transactions:,} transactions, "
                   f"block {self.head():,}, {time.monotonic() - started:.0f} s")


def _anvil_class() -> type[Any]:
    _project_on_path()
    from contracts.devchain import Anvil

    @dataclass
    class BenchAnvil(Anvil):  # type: ignore[misc]
        """Anvil with separate --load-state / --dump-state, so a cached chain is never rewritten."""

        load_state: Path | None = None
        dump_state: Path | None = None

        def command(self) -> list[str]:
            command: list[str] = super().command()
            if self.load_state is not None:
                command += ["--load-state", str(self.load_state)]
            if self.dump_state is not None:
                command += ["--dump-state", str(self.dump_state)]
            return command

    return BenchAnvil


@dataclass
class ChainInfo:
    meta: dict[str, Any]
    anvil: Any
    rpc_url: str
    built_seconds: float | None  # None: loaded from the cache
    load_seconds: float
    finish: Callable[[], None]  # stops anvil (and stores the cache of a fresh build)


def prepare_chain(args: argparse.Namespace, say: Callable[[str], None]) -> ChainInfo:
    _project_on_path()
    from contracts.devchain import deploy_reference_contracts, free_port
    from indexer.rpc import RpcClient

    anvil_class = _anvil_class()
    key = f"chain-e{args.events}-b{args.per_block}-s{args.seed}-v{GENERATOR_VERSION}"
    state_path = RESULTS_DIR / f"{key}.state.json"
    meta_path = RESULTS_DIR / f"{key}.meta.json"
    use_cache = not args.no_cache
    if use_cache and not args.rebuild and state_path.exists() and meta_path.exists():
        meta = json.loads(meta_path.read_text(encoding="utf-8"))
        say(f"chain: loading the cached chain {state_path.relative_to(PROJECT_DIR)} "
            f"({state_path.stat().st_size / 1e6:,.0f} MB)")
        anvil = anvil_class(port=free_port(), load_state=state_path)
        started = time.monotonic()
        anvil.start(timeout=600)
        rpc = RpcClient(anvil.rpc_url, timeout=600)
        head = int(rpc.call("eth_blockNumber", []), 16)
        rpc.close()
        if head == meta["head"]:
            return ChainInfo(meta, anvil, anvil.rpc_url, None, time.monotonic() - started, anvil.stop)
        anvil.stop()
        say(f"chain: the cached chain's head is {head}, not {meta['head']}; rebuilding")

    RESULTS_DIR.mkdir(parents=True, exist_ok=True)
    partial = RESULTS_DIR / f"{key}.state.json.partial"
    for stale in (state_path, meta_path, partial):
        if use_cache:
            stale.unlink(missing_ok=True)
    anvil = anvil_class(port=free_port(), dump_state=partial if use_cache else None)
    w3 = anvil.start()
    say(f"chain: building at least {args.events:,} record events, {args.per_block} transactions a block, "
        f"on anvil {anvil.rpc_url}")
    started = time.monotonic()
    try:
        deployment = deploy_reference_contracts(w3, anvil.rpc_url)
        rpc = RpcClient(anvil.rpc_url, timeout=600)
        builder = ChainBuilder(rpc, deployment, args.per_block, args.seed)
        builder.build(args.events, say)
        head = builder.head()
        rpc.close()
    except BaseException:
        anvil.stop()
        partial.unlink(missing_ok=True)
        raise
    built = time.monotonic() - started
    meta = {
        "chain_id": deployment.chain_id,
        "contract_address": deployment.contract_address,
        "usdc_address": deployment.usdc_address,
        "start_block": deployment.start_block,
        "head": head,
        "events": sum(builder.mirror.events.values()),
        "events_by_type": dict(builder.mirror.events),
        "statuses": builder.mirror.statuses(),
        "transactions": builder.transactions,
        "per_block": args.per_block,
        "seed": args.seed,
        "build_seconds": built,
    }

    def finish() -> None:
        anvil.stop(timeout=300)
        if use_cache and partial.exists():
            partial.replace(state_path)
            meta_path.write_text(json.dumps(meta, indent=2) + "\n", encoding="utf-8")

    return ChainInfo(meta, anvil, anvil.rpc_url, built, 0.0, finish)


# ====================================================================== measurements (child processes)


class StageTimer:
    """Wall time spent inside the indexer's stages, by wrapping the methods of one Indexer."""

    def __init__(self) -> None:
        self.seconds: Counter[str] = Counter()
        self.calls: Counter[str] = Counter()

    def calls_of(self, name: str) -> Callable[[], int]:
        """How many calls of `name` there have been, when asked."""
        return lambda: self.calls[name]

    def wrap(self, name: str, function: Callable[..., Any]) -> Callable[..., Any]:
        def timed(*args: Any, **kwargs: Any) -> Any:
            self.calls[name] += 1
            started = time.perf_counter()
            try:
                return function(*args, **kwargs)
            finally:
                self.seconds[name] += time.perf_counter() - started

        return timed

    def instrument(self, indexer: Any) -> None:
        reader = indexer.reader
        reader.fetcher.fetch = self.wrap("getLogs", reader.fetcher.fetch)
        reader._decode = self.wrap("decode", reader._decode)
        reader._headers = self.wrap("headers", reader._headers)
        committer = indexer.committer
        committer.commit = self.wrap("commit", committer.commit)
        committer.commit_prepared = self.wrap("commit", committer.commit_prepared)  # a bulk backfill's writer thread
        committer.prepare = self.wrap("prepare", committer.prepare)


COMMIT_PARTS = ("load records", "apply_event", "update records", "payloads", "insert records", "insert AppliedLog",
                "insert ChangeLog", "insert IndexedBlock", "wait")


def instrument_commit(timer: StageTimer) -> None:
    """Times the parts of Committer.commit: the in-memory transitions, the rendering of the change-log
    payloads, each bulk write, and the wait for the background COPYs at the end."""
    import indexer.bulk as bulk_module
    import indexer.commit as commit_module
    from indexer.models import AppliedLog, ChangeLogEntry, IndexedBlock
    from indexer.store import RecordStore
    from records.dialect import dialect
    from records.models import Bounty, Dispute, Submission

    commit_module.apply_event = timer.wrap("apply_event", commit_module.apply_event)  # type: ignore[attr-defined]
    RecordStore.load = timer.wrap("load records", RecordStore.load)  # type: ignore[method-assign]
    RecordStore.payload = timer.wrap("payloads", RecordStore.payload)  # type: ignore[method-assign]
    import indexer.writes as writes_module

    writes_module.update_rows = timer.wrap("update records", writes_module.update_rows)  # type: ignore[attr-defined]
    names = {Bounty: "insert records", Submission: "insert records", Dispute: "insert records",
             AppliedLog: "insert AppliedLog", ChangeLogEntry: "insert ChangeLog", IndexedBlock: "insert IndexedBlock"}
    copy = bulk_module._copy

    def timed_copy(database: Any, model: Any, columns: Any, rows: Any, **options: Any) -> None:
        if options:  # into a staging table: part of an update
            copy(database, model, columns, rows, **options)
            return
        timer.wrap(names.get(model, "insert other"), copy)(database, model, columns, rows)

    bulk_module._copy = timed_copy
    insert = bulk_module.insert_rows

    def timed_insert(model: Any, columns: Any, rows: Any) -> None:
        if dialect(bulk_module.connection).copy_rows:  # timed in _copy
            insert(model, columns, rows)
        else:
            timer.wrap(names.get(model, "insert other"), insert)(model, columns, rows)

    bulk_module.insert_rows = timed_insert
    writes_module.insert_rows = timed_insert  # type: ignore[attr-defined]
    bulk_module.RowStream.__exit__ = timer.wrap("wait", bulk_module.RowStream.__exit__)  # type: ignore[method-assign]


class CpuClock:
    """CPU seconds of this process (all threads) and, on PostgreSQL, of its server backend, read
    from /proc when the server runs on this machine. Unlike wall time, these hardly change when
    other work shares the cores."""

    def __init__(self, backend_pid: int | None = None) -> None:
        self.backend_pid = backend_pid
        self.started = self._now()

    def _backend(self) -> float | None:
        if self.backend_pid is None:
            return None
        try:
            fields = Path(f"/proc/{self.backend_pid}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            return None
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")

    def _now(self) -> tuple[float, float | None]:
        return time.process_time(), self._backend()

    def elapsed(self) -> dict[str, float | None]:
        own, backend = self._now()
        return {"cpu": own - self.started[0],
                "db_cpu": None if backend is None or self.started[1] is None else backend - self.started[1]}


def _profile_text(profiler: cProfile.Profile, lines: int) -> str:
    out = io.StringIO()
    for order in ("cumulative", "tottime"):
        out.write(f"--- top {lines} by {order} time\n")
        stats = pstats.Stats(profiler, stream=out)
        stats.strip_dirs().sort_stats(order).print_stats(lines)
    text = out.getvalue()
    # Drop pstats' preamble lines ("N function calls in T seconds", "Ordered by", blank runs).
    kept = [line for line in text.splitlines() if line.strip() and not line.strip().startswith("Ordered by")]
    return "\n".join(kept)


def run_ceiling(config: Any) -> dict[str, Any]:
    from indexer.sync import Indexer

    indexer = Indexer(config)
    indexer.check_node()
    timer = StageTimer()
    timer.instrument(indexer)
    rpc = indexer.rpc
    last = config.start_block - 1
    steps = events = 0
    clock = CpuClock()
    started = time.perf_counter()
    while True:  # Indexer.catch_up without the database: the same reads, one after the other
        head = int(rpc.call("eth_blockNumber", []), 16)
        safe = head - config.confirmations
        if last >= 0:
            rpc.call("eth_getBlockByNumber", [hex(last), False])  # the reorg check of the stored tip
        if last >= safe:
            break
        while last < safe:
            for batch in indexer.reader.read(last + 1, safe, head):
                steps += 1
                events += len(batch.events)
                last = batch.to
    seconds = time.perf_counter() - started
    return {"events": events, "steps": steps, "seconds": seconds, "stages": dict(timer.seconds), "problems": [],
            **clock.elapsed()}


def run_backfill(config: Any, meta: dict[str, Any], profile_lines: int) -> dict[str, Any]:
    from django.db import connection
    from django.db.models import Count

    from indexer import indexes
    from indexer.models import AppliedLog, ChangeLogEntry, IndexedBlock, SyncState
    from indexer.sync import Indexer
    from records.models import Bounty, Dispute, Submission

    indexer = Indexer(config)
    indexer.check_node()
    deployment = indexer.ensure_deployment()  # opens the connection, untimed
    timer = StageTimer()
    timer.instrument(indexer)
    instrument_commit(timer)
    profiler = cProfile.Profile() if profile_lines else None
    backend_pid = None
    if connection.vendor == "postgresql":
        with connection.cursor() as cursor:
            cursor.execute("SELECT pg_backend_pid()")
            backend_pid = cursor.fetchone()[0]
    commits = timer.calls_of("commit")
    clock = CpuClock(backend_pid)
    started = time.perf_counter()
    if profiler is not None:
        profiler.enable()
    indexer.prepare()  # decides on a bulk backfill: drops the secondary indexes
    while indexer.catch_up():
        pass
    indexed = time.perf_counter()
    deployment = indexer.ensure_deployment()
    builder = indexer.index_builder
    build_seconds = builder.build(deployment) if builder.indexes_to_build(deployment) else 0.0
    if profiler is not None:
        profiler.disable()
    seconds = time.perf_counter() - started
    cpu = clock.elapsed()

    problems = []
    if missing := indexes.missing_indexes():
        problems.append(f"indexes missing after the build: {', '.join(index.name for index in missing)}")
    applied = AppliedLog.objects.filter(deployment=deployment).count()
    if applied != meta["events"]:
        problems.append(f"{applied} AppliedLog rows, expected {meta['events']}")
    by_type = Counter(AppliedLog.objects.filter(deployment=deployment).values_list("event", flat=True))
    if dict(by_type) != meta["events_by_type"]:
        problems.append(f"AppliedLog rows by event {dict(by_type)}, expected {meta['events_by_type']}")
    created = {"bounty": "BountyCreated", "submission": "SubmissionCreated", "dispute": "DisputeCreated"}
    records = {}
    for kind, model in (("bounty", Bounty), ("submission", Submission), ("dispute", Dispute)):
        rows = model.objects.filter(deployment=deployment)
        records[kind] = rows.count()
        if records[kind] != meta["events_by_type"].get(created[kind], 0):
            problems.append(f"{records[kind]} {kind} records, expected {meta['events_by_type'].get(created[kind], 0)}")
        statuses = {row["status"]: row["n"] for row in rows.values("status").annotate(n=Count("id"))}
        if statuses != meta["statuses"][kind]:
            problems.append(f"{kind} statuses {statuses}, expected {meta['statuses'][kind]}")
    state = SyncState.objects.get(deployment=deployment)
    if state.last_indexed_block != meta["head"]:
        problems.append(f"last indexed block {state.last_indexed_block}, expected {meta['head']}")
    return {
        "events": applied,
        "steps": commits(),
        "seconds": seconds,
        "index_seconds": seconds - (indexed - started),
        "index_build_seconds": build_seconds,
        "stages": dict(timer.seconds),
        **cpu,
        "problems": problems,
        "records": records,
        "change_log": ChangeLogEntry.objects.filter(deployment=deployment).count(),
        "indexed_blocks": IndexedBlock.objects.filter(deployment=deployment).count(),
        "vendor": connection.vendor,
        "profile": _profile_text(profiler, profile_lines) if profiler is not None else None,
    }


def child_main(args: argparse.Namespace) -> None:
    _project_on_path()
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "bountysite.settings")
    import django

    django.setup()
    from django.core.management import call_command

    from indexer.config import IndexerConfig

    meta = json.loads(Path(args.meta).read_text(encoding="utf-8"))
    config = IndexerConfig.from_settings()
    if args.child == "ceiling":
        result = run_ceiling(config)
    else:
        call_command("migrate", verbosity=0, interactive=False)
        result = run_backfill(config, meta, args.profile_lines if args.profile else 0)
    print(RESULT_PREFIX + json.dumps(result), flush=True)


# ====================================================================== the parent: databases, runs, report


def _child_env(chain: ChainInfo, args: argparse.Namespace, database_url: str) -> dict[str, str]:
    meta = chain.meta
    env = {k: v for k, v in os.environ.items() if not k.startswith(("BOUNTY_", "DJANGO_")) and k != "REDIS_URL"}
    env.update({
        "DJANGO_SETTINGS_MODULE": "bountysite.settings",
        "DJANGO_DEBUG": "0",  # DEBUG would record every query
        "DJANGO_SECRET_KEY": secrets.token_urlsafe(48),
        "DJANGO_ALLOWED_HOSTS": "localhost",
        "DATABASE_URL": database_url,
        "LOG_LEVEL": "WARNING",
        "BOUNTY_RPC_URL": chain.rpc_url,
        "BOUNTY_CHAIN_ID": str(meta["chain_id"]),
        "BOUNTY_CONTRACT_ADDRESS": meta["contract_address"],
        "BOUNTY_USDC_ADDRESS": meta["usdc_address"],
        "BOUNTY_START_BLOCK": str(meta["start_block"]),
        "BOUNTY_CONFIRMATIONS": "0",
        "BOUNTY_GETLOGS_MAX_BLOCKS": str(args.max_span),
    })
    return env


def run_child(mode: str, chain: ChainInfo, args: argparse.Namespace, meta_file: Path, database_url: str,
              *, profile: bool = False) -> dict[str, Any]:
    command = [sys.executable, str(Path(__file__).resolve()), "--child", mode, "--meta", str(meta_file),
               "--profile-lines", str(args.profile_lines)]
    if profile:
        command.append("--profile")
    completed = subprocess.run(command, env=_child_env(chain, args, database_url), cwd=PROJECT_DIR,
                               stdout=subprocess.PIPE, text=True, check=False)
    results = [line[len(RESULT_PREFIX):] for line in completed.stdout.splitlines() if line.startswith(RESULT_PREFIX)]
    if completed.returncode != 0 or not results:
        sys.stdout.write(completed.stdout)
        raise RuntimeError(f"the {mode} run failed (exit code {completed.returncode})")
    result: dict[str, Any] = json.loads(results[-1])
    return result


@contextlib.contextmanager
def sqlite_database() -> Iterator[str]:
    directory = Path(tempfile.mkdtemp(prefix="bench-indexer-"))
    try:
        yield f"sqlite:///{directory / 'bench.sqlite3'}"
    finally:
        shutil.rmtree(directory, ignore_errors=True)


@contextlib.contextmanager
def postgres_database(admin_url: str) -> Iterator[str]:
    import psycopg
    from psycopg import sql

    name = f"bench_indexer_{os.getpid()}_{secrets.token_hex(4)}"
    with psycopg.connect(admin_url, autocommit=True) as admin:
        admin.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
    parts = urlsplit(admin_url)
    try:
        yield urlunsplit(("postgres", parts.netloc, f"/{name}", "", ""))
    finally:
        with psycopg.connect(admin_url, autocommit=True) as admin:
            admin.execute(sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name)))


def postgres_available(admin_url: str) -> str | None:
    """None when the server answers, else why not."""
    try:
        import psycopg

        with psycopg.connect(admin_url, connect_timeout=5) as conn:
            conn.execute("SELECT 1")
    except Exception as exc:
        return f"{type(exc).__name__}: {exc}".strip()
    return None


def warm_up(rpc_url: str, meta: dict[str, Any]) -> None:
    """One untimed read of every log and header, so no measurement pays for a cold node."""
    from indexer.events import RECORD_EVENT_TOPICS
    from indexer.rpc import RpcClient

    rpc = RpcClient(rpc_url, timeout=600)
    rpc.call("eth_getLogs", [{"address": meta["contract_address"], "fromBlock": hex(meta["start_block"]),
                              "toBlock": hex(meta["head"]), "topics": [RECORD_EVENT_TOPICS]}])
    numbers = list(range(meta["start_block"], meta["head"] + 1))
    for chunk in _chunks(numbers, 200):
        rpc.batch([("eth_getBlockByNumber", [hex(n), False]) for n in chunk])
    rpc.close()


def best(results: list[dict[str, Any]]) -> dict[str, Any]:
    return min(results, key=lambda r: r["seconds"])


def report(chain: ChainInfo, args: argparse.Namespace, runs: dict[str, dict[str, Any] | str],
           profile: dict[str, Any] | None) -> bool:
    """Prints the table; True when every run verified."""
    meta = chain.meta
    blocks = meta["head"] - meta["start_block"] + 1
    print()
    how = (f"built in {chain.built_seconds:.1f} s" if chain.built_seconds is not None
           else f"loaded from the cache in {chain.load_seconds:.1f} s; it was built in {meta['build_seconds']:.1f} s")
    print(f"Indexer backfill benchmark: {meta['events']:,} record events from {meta['transactions']:,} transactions "
          f"in {blocks:,} blocks ({how})")
    mix = ", ".join(f"{name} {n:,}" for name, n in sorted(meta["events_by_type"].items(), key=lambda kv: -kv[1]))
    print(f"event mix: {mix}")
    print(f"indexer: confirmations 0, BOUNTY_GETLOGS_MAX_BLOCKS {args.max_span}; best of "
          f"{max(CEILING_RUNS, args.repeat)} ceiling run(s) and {args.repeat} backfill run(s) each; "
          f"{os.cpu_count()} CPU(s)")
    print()
    ceiling = runs.get("ceiling")
    ceiling_rate = ceiling["events"] / ceiling["seconds"] if isinstance(ceiling, dict) else None
    header = (f"{'run':<12}{'events':>9}{'blocks':>8}{'batches':>8}{'seconds':>10}{'events/s':>11}{'vs ceiling':>12}"
              f"{'cpu s':>8}{'db cpu s':>10}")
    print(header)
    print("-" * len(header))
    ok = True
    for name, result in runs.items():
        label = {"ceiling": "ceiling", "sqlite": "SQLite", "postgres": "PostgreSQL"}[name]
        if isinstance(result, str):
            print(f"{label:<12}{'skipped: ' + result}")
            continue
        rate = result["events"] / result["seconds"]
        ratio = f"{100 * rate / ceiling_rate:.1f}%" if ceiling_rate else "-"
        db_cpu = "-" if result.get("db_cpu") is None else f"{result['db_cpu']:.2f}"
        print(f"{label:<12}{result['events']:>9,}{blocks:>8,}{result['steps']:>8}{result['seconds']:>10.3f}"
              f"{rate:>11,.0f}{ratio:>12}{result.get('cpu', 0.0):>8.2f}{db_cpu:>10}")
    print()
    stages = ("getLogs", "decode", "headers", "prepare", "commit")
    header = f"{'seconds in':<12}" + "".join(f"{s:>10}" for s in (*stages, "other"))
    print(header)
    print("-" * len(header))
    for name, result in runs.items():
        if isinstance(result, str):
            continue
        label = {"ceiling": "ceiling", "sqlite": "SQLite", "postgres": "PostgreSQL"}[name]
        parts = [result["stages"].get(s, 0.0) for s in stages]
        print(f"{label:<12}" + "".join(f"{p:>10.3f}" for p in parts) + f"{result['seconds'] - sum(parts):>10.3f}")
    print("(getLogs: eth_getLogs incl. JSON parsing; decode: decode_log of every log; headers: eth_getBlockByNumber "
          "batches;\n prepare: applying a batch in memory and rendering its rows; commit: the database transaction of "
          "a batch;\n other: the rest, waiting for the reader, the index build. A bulk backfill reads and decodes in "
          "one process\n of its own and prepares in another: their stages are not seen here, only the wait for them)")
    print()
    short = {"load records": "load", "apply_event": "apply", "update records": "upd rec", "payloads": "payload",
             "insert records": "ins rec", "insert AppliedLog": "ins log", "insert ChangeLog": "ins chg",
             "insert IndexedBlock": "ins blk", "wait": "wait"}
    header = f"{'commit in':<12}" + "".join(f"{short[p]:>9}" for p in COMMIT_PARTS) + f"{'rest':>9}"
    print(header)
    print("-" * len(header))
    for name, result in runs.items():
        if isinstance(result, str) or name == "ceiling":
            continue
        label = {"sqlite": "SQLite", "postgres": "PostgreSQL"}[name]
        parts = [result["stages"].get(p, 0.0) for p in COMMIT_PARTS]
        # On PostgreSQL the inserts run in a background thread, overlapping the other parts.
        overlapping = {"insert records", "insert AppliedLog", "insert ChangeLog", "insert IndexedBlock"}
        inline = sum(t for p, t in zip(COMMIT_PARTS, parts, strict=True)
                     if result.get("vendor") != "postgresql" or p not in overlapping)
        rest = result["stages"].get("commit", 0.0) - inline
        print(f"{label:<12}" + "".join(f"{p:>9.3f}" for p in parts) + f"{rest:>9.3f}")
    print("(load: RecordStore.load; apply: apply_event, the transitions in memory; upd rec: bulk_update of changed\n"
          " records; payload: rendering the change-log payloads; ins rec/log/chg/blk: the bulk inserts of records,\n"
          " AppliedLog, ChangeLogEntry, IndexedBlock, on PostgreSQL COPYs in a background thread that overlap the\n"
          " other parts; wait: for those COPYs to finish; rest: building rows, SyncState, pruning, COMMIT.\n"
          " cpu s: CPU seconds of the indexer process; db cpu s: of its PostgreSQL backend)")
    print()
    for name, result in runs.items():
        if isinstance(result, dict) and name != "ceiling":
            label = {"sqlite": "SQLite", "postgres": "PostgreSQL"}[name]
            if result["problems"]:
                ok = False
                print(f"{label} verification FAILED: " + "; ".join(result["problems"]))
            else:
                r = result["records"]
                print(f"{label} verified: {result['events']:,} AppliedLog rows = events; records {r['bounty']:,} "
                      f"bounties, {r['submission']:,} submissions, {r['dispute']:,} disputes with the expected "
                      f"statuses; {result['change_log']:,} change-log entries; synced to block {meta['head']}")
    print()
    print("targets, against the ceiling of the same run (backfill: to caught up, records served, the index build"
          " excluded; end to end: the build included):")
    summary: dict[str, Any] = {"events": meta["events"], "ceiling_eps": round(ceiling_rate or 0.0)}
    for name, label in (("sqlite", "SQLite"), ("postgres", "PostgreSQL")):
        result = runs.get(name)
        if not isinstance(result, dict) or not ceiling_rate:
            print(f"  {label}: not evaluated (no run)")
            summary[f"{name}_eps"] = summary[f"{name}_ratio"] = summary[f"{name}_backfill_ratio"] = None
            continue
        rate = result["events"] / result["seconds"]
        backfill_seconds = result["seconds"] - result["index_build_seconds"]
        ratios = {"backfill": result["events"] / backfill_seconds / ceiling_rate, "end_to_end": rate / ceiling_rate}
        for kind, ratio in ratios.items():
            target = TARGETS[name][kind]
            met = "met" if ratio >= target else "NOT met"
            print(f"  {label} {kind.replace('_', ' ')} >= {target:.0%} of the ceiling: {ratio:.1%}  -> {met}")
        print(f"    ({backfill_seconds:.2f} s to caught up, index build {result['index_build_seconds']:.2f} s, "
              f"{result['seconds']:.2f} s end to end, {rate:,.0f} events/s)")
        summary.update({f"{name}_eps": round(rate), f"{name}_ratio": round(ratios["end_to_end"], 3),
                        f"{name}_backfill_ratio": round(ratios["backfill"], 3),
                        f"{name}_seconds": round(result["seconds"], 3),
                        f"{name}_backfill_s": round(backfill_seconds, 3),
                        f"{name}_index_build_s": round(result["index_build_seconds"], 3)})
    verified = [r for n, r in runs.items() if n != "ceiling" and isinstance(r, dict)]
    summary["verified"] = bool(verified) and all(not r["problems"] for r in verified)
    summary["postgres_index_build_s"] = summary.get("postgres_index_build_s")
    summary_line = "BENCH_SUMMARY " + json.dumps(summary)
    if profile is not None:
        print()
        vendor = "PostgreSQL" if profile.get("vendor") == "postgresql" else "SQLite"
        rate = profile["events"] / profile["seconds"]
        print(f"profile: a separate {vendor} backfill under cProfile ({profile['seconds']:.2f} s, {rate:,.0f} events/s "
              f"with the profiler's overhead)")
        print(profile["profile"])
    print()
    print(summary_line)
    return ok


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--events", type=int, default=50_000, help="at least this many record events (50000)")
    parser.add_argument("--per-block", type=int, default=500, help="transactions per block while building (500)")
    parser.add_argument("--seed", type=int, default=1, help="seed of the generated activity (1)")
    parser.add_argument("--max-span", type=int, default=5_000,
                        help="BOUNTY_GETLOGS_MAX_BLOCKS for the runs (5000); lower it for more, smaller batches")
    parser.add_argument("--repeat", type=int, default=1, help="runs of each measurement; the best counts (1)")
    parser.add_argument("--backends", default="sqlite,postgres", help="comma-separated: sqlite, postgres")
    parser.add_argument("--postgres-url", default="postgresql://postgres@127.0.0.1:5432/postgres",
                        help="a PostgreSQL server's maintenance database; the benchmark creates and drops its own")
    parser.add_argument("--no-cache", action="store_true", help="neither read nor write the chain cache")
    parser.add_argument("--rebuild", action="store_true", help="rebuild the chain even if it is cached")
    parser.add_argument("--no-profile", action="store_true", help="skip the profiled PostgreSQL run")
    parser.add_argument("--profile-lines", type=int, default=15, help="functions per profile listing (15)")
    parser.add_argument("--child", choices=("ceiling", "sqlite", "postgres"), help=argparse.SUPPRESS)
    parser.add_argument("--meta", help=argparse.SUPPRESS)
    parser.add_argument("--profile", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child_main(args)
        return

    backends = [b.strip() for b in args.backends.split(",") if b.strip()]
    if unknown := set(backends) - {"sqlite", "postgres"}:
        parser.error(f"unknown backends {sorted(unknown)}")

    def say(message: str) -> None:
        print(message, flush=True)

    _project_on_path()
    chain = prepare_chain(args, say)
    ok = False
    try:
        if chain.built_seconds is not None:
            say(f"chain: built in {chain.built_seconds:.1f} s: {chain.meta['events']:,} record events, "
                f"{chain.meta['transactions']:,} transactions, head block {chain.meta['head']:,}")
        else:
            say(f"chain: loaded in {chain.load_seconds:.1f} s: {chain.meta['events']:,} record events, "
                f"head block {chain.meta['head']:,}")
        warm_up(chain.rpc_url, chain.meta)
        with tempfile.TemporaryDirectory(prefix="bench-indexer-meta-") as tmp:
            meta_file = Path(tmp) / "meta.json"
            meta_file.write_text(json.dumps(chain.meta), encoding="utf-8")
            runs: dict[str, dict[str, Any] | str] = {}
            with sqlite_database() as unused_url:  # the ceiling needs settings but never touches a database
                say("run: ceiling")
                runs["ceiling"] = best([run_child("ceiling", chain, args, meta_file, unused_url)
                                        for _ in range(max(CEILING_RUNS, args.repeat))])
            postgres_problem = postgres_available(args.postgres_url) if "postgres" in backends else "not selected"
            if "sqlite" in backends:
                results = []
                for _ in range(args.repeat):
                    say("run: backfill into SQLite")
                    with sqlite_database() as url:
                        results.append(run_child("sqlite", chain, args, meta_file, url))
                runs["sqlite"] = best(results)
            if "postgres" in backends:
                if postgres_problem:
                    runs["postgres"] = f"PostgreSQL at {args.postgres_url} unreachable ({postgres_problem})"
                else:
                    results = []
                    for _ in range(args.repeat):
                        say("run: backfill into PostgreSQL")
                        with postgres_database(args.postgres_url) as url:
                            results.append(run_child("postgres", chain, args, meta_file, url))
                    runs["postgres"] = best(results)
            profile = None
            if not args.no_profile:
                if "postgres" in backends and not postgres_problem:
                    say("run: profiled backfill into PostgreSQL")
                    with postgres_database(args.postgres_url) as url:
                        profile = run_child("postgres", chain, args, meta_file, url, profile=True)
                elif "sqlite" in backends:
                    say("run: profiled backfill into SQLite")
                    with sqlite_database() as url:
                        profile = run_child("sqlite", chain, args, meta_file, url, profile=True)
            ok = report(chain, args, runs, profile)
    finally:
        chain.finish()
    if not ok:
        sys.exit(1)


if __name__ == "__main__":
    main()
