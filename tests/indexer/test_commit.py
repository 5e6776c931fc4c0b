"""The commit stage (indexer.commit: one transaction a batch), proven the hard way: `manage.py
run_indexer` killed with SIGKILL over and over, during backfill and while following a chain that
keeps moving: each restart resumes after the last committed batch, and in the end the mirror
equals the chain with every log applied exactly once (docs/operations.md, The indexer)."""

from __future__ import annotations

import random
import signal
import subprocess
import sys
import threading
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest
from web3 import Web3

from contracts.demo import seed_demo_activity
from indexer import indexes
from indexer.bulk import insert_rows
from indexer.models import ChangeLogEntry, IndexStateChoice, SyncState
from records.models import Bounty, Deployment
from tests.chain import USDC, Chain
from tests.factories import make_bounty
from tests.indexer.conftest import process_env
from tests.indexer.mirror import assert_live_consumer_is_current, assert_mirror_equals_chain
from tests.indexer.test_run_indexer_command import PROJECT_DIR, wait_until

pytestmark = pytest.mark.django_db(transaction=True)

SEED = 20_261_122
ROUNDS_BEFORE_BACKFILL = 36  # 7 record logs in 7 blocks each, on top of the demo's 24 logs
EMPTY_BLOCKS_PER_ROUND = 60  # so that even a fast machine is killed many times before it catches up
FIRST_STEP_KILLS = 3  # soon after taking the writer lock: during the first batch
BACKFILL_KILLS = 10  # soon after the process's first commit
FOLLOW_KILLS = 7  # soon after catching up with the head, while transactions keep coming
HASH = b"\x33" * 32


class Activity:
    """Rounds of transactions that emit every kind of record log but the closing ones, through a
    connection of their own (so that a thread can send them while the test reads the chain)."""

    def __init__(self, chain: Chain) -> None:
        rpc_url = chain.deployment.rpc_url
        self.chain = Chain(Web3(Web3.HTTPProvider(rpc_url, request_kwargs={"timeout": 10})), chain.deployment)
        self.poster, self.claimants = chain.account(1), (chain.account(2), chain.account(5))
        self.arbiter, self.grouts = chain.deployment.arbiter, chain.deployment.grouts
        for account in (self.poster, *self.claimants, *self.grouts):
            self.chain.send(self.chain.usdc.functions.approve(self.chain.board.address, 2**256 - 1), account)

    def _id(self, call: object, sender: str, event: str, key: str) -> int:
        return int(self.chain.events(self.chain.send(call, sender), event)[0][key])

    def round(self, n: int) -> None:
        """A bounty with a submission cleared by a rejected dispute and one rejected by an upheld one."""
        board = self.chain.board.functions
        bounty = self._id(board.createBounty(f"ipfs://round-{n}", HASH, (n % 40 + 1) * USDC, 30 * 86_400),
                          self.poster, "BountyCreated", "bountyId")
        cleared, rejected = (self._id(board.submit(bounty, f"ipfs://work-{n}-{i}", HASH), claimant,
                                      "SubmissionCreated", "submissionId")
                             for i, claimant in enumerate(self.claimants))
        for submission, grout, upheld in ((cleared, self.grouts[0], False), (rejected, self.grouts[1], True)):
            dispute = self._id(board.dispute(submission, f"ipfs://objection-{n}", HASH), grout,
                               "DisputeCreated", "disputeId")
            self.chain.send(board.resolveDispute(dispute, upheld), self.arbiter)


class Traffic:
    """Activity rounds in a background thread until stopped."""

    def __init__(self, activity: Activity, first_round: int) -> None:
        self.activity = activity
        self.rounds = first_round
        self.stopped = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.error: BaseException | None = None

    def _run(self) -> None:
        try:
            while not self.stopped.wait(0.05):
                self.activity.round(self.rounds)
                self.rounds += 1
        except BaseException as exc:  # reported by stop()
            self.error = exc

    def __enter__(self) -> Traffic:
        self.thread.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.stopped.set()
        self.thread.join(timeout=30)
        assert self.error is None, f"the traffic thread failed: {self.error!r}"


@dataclass(frozen=True)
class Kill:
    phase: str
    started_at: int | None  # the last indexed block when the process could start indexing
    killed_at: int | None  # ... when it was killed
    head: int  # the chain head just before the kill


@dataclass(frozen=True)
class Run:
    """A process's start: where the mirror and the chain were, and where its output goes."""

    process: subprocess.Popen[bytes]
    log: Path
    started_at: int | None
    head: int


def last_indexed() -> int | None:
    return SyncState.objects.values_list("last_indexed_block", flat=True).first()


class IndexerRuns:
    """`manage.py run_indexer` processes one after the other, each writing to its own log file. The
    next process is started just before the current one is killed, as a supervisor restarting it would."""

    def __init__(self, chain: Chain, logs: Path, defer_indexes: str = "never") -> None:
        self.chain = chain
        # Tiny getLogs spans make backfill many batches; the system checks only slow each start down.
        self.command = [sys.executable, "manage.py", "run_indexer", "--skip-checks"]
        self.env = process_env(chain, BOUNTY_GETLOGS_MAX_BLOCKS="2", BOUNTY_DEFER_INDEXES=defer_indexes)
        self.logs = logs
        self.kills: list[Kill] = []
        self.next = self._start()

    def _start(self) -> tuple[subprocess.Popen[bytes], Path]:
        log = self.logs / f"run-{len(self.kills) + 1}.log"
        with log.open("wb") as output:
            process = subprocess.Popen(self.command, cwd=PROJECT_DIR, env=self.env, stdout=output,
                                       stderr=subprocess.STDOUT)
        return process, log

    def kill(self, phase: str, until: Callable[[Run], bool], delay: float) -> None:
        """Runs the next process until `until(run)`, then SIGKILLs it `delay` seconds later."""
        run = Run(*self.next, started_at=last_indexed(), head=self.chain.w3.eth.block_number)
        try:
            # A process that starts with nothing left of the backfill (the one before finished it in
            # its last moments) has nothing to commit: it is killed as soon as it holds the lock.
            wait_until(lambda: until(run) or run.process.poll() is not None
                       or (run.started_at == run.head and holds_the_lock(run)))
            self.next = self._start()
            time.sleep(delay)
            assert run.process.poll() is None, f"the indexer exited by itself:\n{run.log.read_text()}"
            head = self.chain.w3.eth.block_number
            run.process.send_signal(signal.SIGKILL)
            assert run.process.wait(timeout=10) == -signal.SIGKILL
        finally:
            if run.process.poll() is None:
                run.process.kill()
                run.process.wait()
        self.kills.append(Kill(phase, run.started_at, last_indexed(), head))

    def run_to_head_and_stop(self) -> None:
        """Leaves the next process to reach the head, then stops it cleanly (once it has started:
        a SIGTERM during Python's start-up, before the command's handler, would just kill it)."""
        process, log = self.next
        head = self.chain.w3.eth.block_number
        run = Run(process, log, started_at=last_indexed(), head=head)
        try:
            wait_until(lambda: (holds_the_lock(run) and last_indexed() == head) or process.poll() is not None)
        finally:
            process.send_signal(signal.SIGTERM)
            process.wait(timeout=30)
        assert process.returncode == 0 and "indexer stopped" in log.read_text(), log.read_text()

    def close(self) -> None:
        process, _ = self.next
        if process.poll() is None:
            process.kill()
            process.wait()


def holds_the_lock(run: Run) -> bool:
    return "indexing chain" in run.log.read_text()


def committed(run: Run) -> bool:
    return last_indexed() != run.started_at


def caught_up(run: Run) -> bool:
    """Indexed every block there was when the process started: following the head from then on."""
    indexed = last_indexed()
    return indexed is not None and indexed >= run.head


def test_sigkill_at_any_point_of_backfill_and_follow_leaves_every_log_applied_once(chain: Chain,
                                                                                   tmp_path: Path) -> None:
    rng = random.Random(SEED)
    seed_demo_activity(chain.w3, chain.deployment)
    activity = Activity(chain)
    for n in range(ROUNDS_BEFORE_BACKFILL):
        activity.round(n)
        chain.w3.provider.make_request("anvil_mine", [hex(EMPTY_BLOCKS_PER_ROUND)])  # type: ignore[arg-type]
    backfill_target = chain.w3.eth.block_number
    runs = IndexerRuns(chain, tmp_path)
    try:
        for _ in range(FIRST_STEP_KILLS):
            runs.kill("first step", holds_the_lock, rng.uniform(0, 0.05))
        for _ in range(BACKFILL_KILLS):
            runs.kill("backfill", committed, rng.uniform(0, 0.08))
        with Traffic(activity, first_round=ROUNDS_BEFORE_BACKFILL):
            for _ in range(FOLLOW_KILLS):
                runs.kill("follow", caught_up, rng.uniform(0, 0.3))
        runs.run_to_head_and_stop()
    finally:
        runs.close()

    kills = runs.kills
    assert len(kills) == FIRST_STEP_KILLS + BACKFILL_KILLS + FOLLOW_KILLS >= 20
    after_progress = [k for k in kills if k.killed_at != k.started_at]
    before_catching_up = [k for k in kills if k.killed_at is None or k.killed_at < backfill_target]
    following = [k for k in kills if k.phase == "follow" and (k.killed_at or 0) > backfill_target]
    assert len(after_progress) >= len(kills) // 2, kills
    assert len(before_catching_up) >= 8, kills
    assert len(following) >= 3, kills

    deployment = Deployment.objects.get()
    assert_mirror_equals_chain(chain.board, deployment)
    assert_live_consumer_is_current(deployment)
    created = Counter(ChangeLogEntry.objects.filter(type__endswith=".created").values_list("type", flat=True))
    board = chain.board.functions
    assert created == {"bounty.created": board.bountyCount().call(),
                       "submission.created": board.submissionCount().call(),
                       "dispute.created": board.disputeCount().call()}, "each record created once"
    assert not ChangeLogEntry.objects.filter(type__endswith=".removed").exists(), "no restart looked like a reorg"


def bounties_of_another_deployment(count: int) -> None:
    """Rows that make an index build take long enough to be killed in the middle of it."""
    other = Deployment.objects.create(chain_id=8453, contract_address="0x" + "42" * 20, usdc_address="0x" + "43" * 20)
    template = make_bounty(other, bounty_id=1)
    columns = [f.attname for f in Bounty._meta.concrete_fields if f.attname != "id"]
    values = {name: getattr(template, name) for name in columns}
    insert_rows(Bounty, columns, [[n if name == "bounty_id" else values[name] for name in columns]
                                  for n in range(2, count + 1)])


def test_sigkill_during_a_bulk_backfill_and_its_index_build_leaves_every_log_applied_once(chain: Chain,
                                                                                         tmp_path: Path) -> None:
    rng = random.Random(SEED + 1)
    seed_demo_activity(chain.w3, chain.deployment)
    activity = Activity(chain)
    for n in range(12):
        activity.round(n)
        for _ in range(5):  # in calls of 60: anvil took over the client's 10 s for 300 on a loaded machine
            chain.w3.provider.make_request("anvil_mine", [hex(EMPTY_BLOCKS_PER_ROUND)])  # type: ignore[arg-type]
    bounties_of_another_deployment(60_000)
    runs = IndexerRuns(chain, tmp_path, defer_indexes="always")
    try:
        for _ in range(2):
            runs.kill("first step", holds_the_lock, rng.uniform(0, 0.05))
        for _ in range(6):
            runs.kill("backfill", committed, rng.uniform(0, 0.05))
        assert indexes.index_state() != IndexStateChoice.READY
        runs.kill("index build", building, 0.05)
        assert indexes.missing_indexes(), "the build was cut short"
        wait_until(lambda: indexes.index_state() == IndexStateChoice.READY, timeout=60)  # the next start's build
        runs.run_to_head_and_stop()
    finally:
        runs.close()

    assert [k.phase for k in runs.kills].count("backfill") == 6
    deployment = Deployment.objects.get(chain_id=chain.deployment.chain_id)
    assert_mirror_equals_chain(chain.board, deployment)
    head = chain.w3.eth.block_number
    assert list(ChangeLogEntry.objects.values_list("type", "payload")) == [
        ("resync", {"from_block": chain.deployment.start_block, "to_block": head})]
    assert indexes.missing_indexes() == []


def building(run: Run) -> bool:
    return indexes.index_state() == IndexStateChoice.BUILDING
