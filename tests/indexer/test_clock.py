"""The poll schedule (indexer.clock) on simulated chains: when each block can first be seen by this
machine's clock, and the timestamp the chain gives it. The indexer's polls are replayed (one call
each, answered at once); what is measured is how late each block was seen, the calls per block
once the chain's rhythm could be learnt, and the longest wait. Every chain shape that once broke
the schedule is here: the median of timestamps that jumped, an automine chain's pauses, a halt,
a clock ahead of the chain's, timestamps that disagree with the arrivals, a chain that lived a
scenario and a burst; and once `run_indexer` itself through a node proxy, on a real anvil."""

from __future__ import annotations

import random
import signal
import statistics
import time
from dataclasses import dataclass

import pytest

from contracts.devchain import free_port, increase_time
from indexer.clock import BEHIND_AGAIN, BlockClock
from indexer.models import SyncState
from tests.chain import Chain
from tests.indexer.conftest import post_bounty, process_env
from tests.indexer.test_metrics import scrape
from tests.indexer.test_run_indexer_command import start, wait_until
from tests.metrics import value
from tests.node_proxy import NodeLimits, NodeProxy

POLL = 0.25  # BOUNTY_INDEXER_POLL_MS's default
DEV_POLL = 0.5  # as scripts/dev sets it
CEILING = 15.0  # BOUNTY_INDEXER_MAX_WAIT_MS's default
DAY = 86_400

Block = tuple[float, int]  # when it can first be seen (this machine's clock), its timestamp


@dataclass
class Replay:
    blocks: list[Block]
    polls: list[float]
    late: list[float]  # per block: how long after it could be seen a poll found it
    longest_wait: float
    clock: BlockClock
    trusted: list[tuple[int, bool]]  # per poll: the newest block seen, and whether a rhythm was trusted then
    next_poll: float  # when the clock would poll after the last block

    def trusted_from(self, first: int) -> int | None:
        """The first block from `first` on after which a rhythm was trusted to the end."""
        since = None
        for newest, trusted in self.trusted:
            if not trusted:
                since = None
            elif since is None and newest >= first:
                since = newest
        return since

    def calls_per_block(self, first: int, last: int | None = None) -> float:
        """Polls from when block `first` could be seen until `last` (default the newest), per block."""
        last = len(self.blocks) - 1 if last is None else last
        start, end = self.blocks[first][0], self.blocks[last][0]
        return sum(start <= poll < end for poll in self.polls) / (last - first)

    def late_quantile(self, q: float, first: int = 0) -> float:
        late = sorted(self.late[first:])
        return late[min(len(late) - 1, int(q * len(late)))]


def replay(blocks: list[Block], poll_interval: float = POLL, ceiling: float = CEILING) -> Replay:
    clock = BlockClock(poll_interval, ceiling)
    now, newest, polls, late, longest = blocks[0][0], -1, [], [0.0] * len(blocks), 0.0
    trusted = []
    while newest < len(blocks) - 1:
        polls.append(now)
        head = newest
        while head + 1 < len(blocks) and blocks[head + 1][0] <= now:
            head += 1
        if head >= 0:
            clock.polled(head, blocks[head][1], now)
        for number in range(newest + 1, head + 1):
            late[number] = now - blocks[number][0]
        newest = head
        trusted.append((newest, clock.trusted))
        wait = clock.wait(now)
        longest = max(longest, wait)
        now += wait
    return Replay(blocks, polls, late, longest, clock, trusted, now)


def steady(count: int, block_time: float = 1.0, delay: float = 0.3, jitter: float = 0.05, *, missing: float = 0.0,
           jumps: float = 0.0, seed: int = 7, start: float = 1_000_000.0, offset: int = 0) -> list[Block]:
    """Blocks every `block_time` seconds (a share `missing` of the slots empty), each seen `delay`
    (plus up to `jitter`) after its timestamp; a share `jumps` of the timestamps a second ahead of
    the one before (and all after: anvil's drift); `offset` added to every timestamp (a chain's
    clock ahead of this machine's, or behind it if negative)."""
    rng = random.Random(seed)
    blocks: list[Block] = []
    slot, ahead = 0, 0
    while len(blocks) < count:
        if rng.random() >= missing:
            made = start + slot * block_time
            ahead += rng.random() < jumps
            blocks.append((made + delay + rng.uniform(0, jitter), int(made) + ahead + offset))
        slot += 1
    return blocks


def automine(pauses: list[float], *, start: float = 1_000_000.0, moved: dict[int, int] | None = None,
             per_transaction: int = 1) -> list[Block]:
    """An automine chain: `per_transaction` blocks each time a transaction comes, after each pause,
    stamped with this machine's time plus what the chain's clock was moved by before block n
    (`moved`: evm_increaseTime then evm_mine, a block of its own a second after the one before)."""
    blocks: list[Block] = []
    now, offset = start, 0
    for n, pause in enumerate(pauses):
        for _ in range((moved or {}).get(n, 0)):
            now += 1.0
            offset += DAY
            blocks.append((now + 0.02, int(now) + offset))
        now += pause
        blocks.extend((now + 0.02, int(now) + offset) for _ in range(per_transaction))
    return blocks


def _random_pauses(count: int, seed: int = 3) -> list[float]:
    rng = random.Random(seed)
    return [rng.uniform(1, 60) for _ in range(count)]


def _halted(seconds: float) -> list[Block]:
    before = steady(120)
    resumed = steady(60, start=before[-1][1] + seconds, delay=0.3)
    return before + resumed


def _jumped(hours: int) -> list[Block]:
    before = steady(60)
    after = steady(120, start=before[-1][1] + 1.0, delay=0.3)
    return before + [(seen, timestamp + hours * 3600) for seen, timestamp in after]


# -------------------------------------------------------------------- steady chains: about one call a block

@pytest.mark.parametrize(("delay", "jitter"), [
    pytest.param(0.05, 0.0, id="seen-at-once"),
    pytest.param(0.3, 0.1, id="a-node-300ms-behind"),
    pytest.param(0.8, 0.15, id="late-in-the-second"),
    pytest.param(2.5, 0.1, id="a-local-clock-2.5s-ahead"),
])
def test_a_steady_one_second_chain_costs_about_a_call_a_block_and_is_seen_soon(delay: float, jitter: float) -> None:
    run = replay(steady(600, delay=delay, jitter=jitter))
    assert run.calls_per_block(60) <= 1.2
    assert run.late_quantile(0.5, 60) <= 0.15
    assert run.late_quantile(0.9, 60) <= 0.25


def test_ethereums_twelve_second_rhythm_costs_at_most_one_and_a_half_calls_a_block() -> None:
    run = replay(steady(120, block_time=12, delay=0.3, jitter=0.2))
    assert run.calls_per_block(20) <= 1.5
    assert run.late_quantile(0.9, 20) <= 0.5
    assert run.longest_wait <= CEILING


def test_slots_without_a_block_cost_few_polls() -> None:
    run = replay(steady(200, block_time=12, missing=0.1))
    assert run.calls_per_block(30) <= 2.0
    assert run.late_quantile(0.5, 30) <= 0.3


def test_timestamps_that_drift_ahead_do_not_make_it_late() -> None:
    run = replay(steady(300, jumps=0.1))
    assert run.calls_per_block(60) <= 1.3
    assert run.late_quantile(0.9, 60) <= 0.25


@pytest.mark.parametrize("offset", [pytest.param(-6 * 3600, id="a-local-clock-hours-ahead-of-the-chains"),
                                    pytest.param(6 * DAY, id="a-chain-clock-days-ahead-of-the-local")])
def test_a_clock_far_off_the_chains_keeps_the_steady_targets(offset: int) -> None:
    run = replay(steady(300, offset=offset))
    assert run.calls_per_block(60) <= 1.2
    assert run.late_quantile(0.9, 60) <= 0.25


# -------------------------------------------------------------------- chains whose timestamps mislead

@pytest.mark.parametrize("blocks", [
    pytest.param(automine([2.0], moved={0: 6}) + automine(_random_pauses(10), start=1_000_010.0,
                                                          moved={0: 0}), id="a-day-forward-six-times-then-bounties"),
    pytest.param(automine([1, 1, 1, 1, 1, 1, *_random_pauses(20)], moved={3: 6}), id="moved-during-a-steady-run"),
    pytest.param(automine(_random_pauses(40)), id="forty-bounties-at-random-pauses"),
    pytest.param(automine([0.1, 20.3, 25.2, 30.4, 5.1, 40.3, 3.2, 30.1, 30.3, 2.2]), id="human-pauses"),
    pytest.param(automine(_random_pauses(20), per_transaction=3), id="blocks-sharing-a-timestamp"),
    pytest.param(automine([DAY / 2] * 3 + [5, 5]), id="a-median-of-half-days"),
])
def test_an_automine_chain_is_polled_every_poll_interval_and_each_block_found_within_it(
        blocks: list[Block]) -> None:
    run = replay(blocks, poll_interval=DEV_POLL)
    assert max(run.late) <= DEV_POLL
    assert run.longest_wait <= DEV_POLL


def test_timestamps_that_step_two_seconds_a_block_every_second_are_not_trusted() -> None:
    blocks = [(seen, 2 * timestamp) for seen, timestamp in steady(200)]
    run = replay(blocks)
    assert max(run.late) <= POLL


def test_a_chain_halted_five_minutes_is_seen_within_a_poll_interval_once_it_resumes() -> None:
    blocks = _halted(300)
    run = replay(blocks)
    assert run.late[120] <= POLL  # the first block after the halt
    assert run.longest_wait <= CEILING
    assert run.calls_per_block(150) <= 1.2  # trusted again within 30 blocks


def test_timestamps_that_jump_hours_ahead_once_keep_the_steady_targets_thirty_blocks_later() -> None:
    run = replay(_jumped(3))
    assert max(run.late) <= POLL
    assert run.calls_per_block(90) <= 1.2
    assert run.late_quantile(0.9, 90) <= 0.25


@pytest.mark.parametrize("blocks", [
    pytest.param(steady(100, block_time=12) + steady(10, start=1_000_000 + 100 * 12 + 3600.0, block_time=12),
                 id="twelve-second-blocks-halted-an-hour"),
    pytest.param(automine([DAY] * 8), id="a-block-a-day"),
    pytest.param(steady(50, block_time=60), id="a-block-a-minute"),
])
def test_no_wait_is_longer_than_the_ceiling(blocks: list[Block]) -> None:
    run = replay(blocks, ceiling=5.0)
    assert run.longest_wait <= 5.0
    assert max(run.late) <= 5.0


def test_the_rhythm_is_trusted_only_once_the_arrivals_bear_it_out() -> None:
    clock = BlockClock(poll_interval=POLL, ceiling=CEILING)
    assert clock.wait(0.0) == POLL
    for number in range(5):  # blocks that share a timestamp (a chain faster than a second)
        clock.polled(number, 100, 100.0 + number * 0.3)
    assert clock.block_time is None and not clock.trusted and clock.wait(101.0) == POLL
    run = replay(steady(12))
    assert statistics.median(run.polls[i + 1] - run.polls[i] for i in range(len(run.polls) - 1)) <= POLL


def test_the_rhythm_is_trusted_at_the_sixth_precise_poll_that_bears_it_out() -> None:
    """Each block seen a tenth of a second after a poll that lacked it: precise polls. The block
    time is known from the third step; trust comes at the sixth poll that bears it out, not before."""
    clock = BlockClock(poll_interval=POLL, ceiling=CEILING)
    trusted_at = None
    for number in range(20):
        made = 1_000.0 + number
        if number:
            clock.polled(number - 1, int(made) - 1, made - 0.05)  # too early
        clock.polled(number, int(made), made + 0.05)
        if clock.trusted and trusted_at is None:
            trusted_at = number
    assert trusted_at == 3 + 6 - 1  # the block time known at block 3, borne out by blocks 3 to 8



# -------------------------------------------------------------------- chains that have lived: the rhythm relearnt

def _lived(block_time: float, timestamp_step: int, steady_blocks: int = 60) -> list[Block]:
    """A dev chain's day: a scenario at human pauses with the clock moved a day forward three
    times, then a burst of 40 blocks (20 a second, each timestamp a second after the last), then
    steady blocks every `block_time` seconds whose timestamps step `timestamp_step` (a script's
    `anvil_mine` with a timestamp interval, each tick of the wall clock: timestamps that run ahead
    of this machine's clock by more each block)."""
    blocks = automine([1.2, 0.8, 2.5, 3.1, 5.0, 1.4, 0.9, 2.2, 8.0, 1.1], moved={2: 1, 5: 1, 8: 1})
    seen, timestamp = blocks[-1][0] + 3.0, blocks[-1][1]
    for _ in range(40):
        seen, timestamp = seen + 0.05, timestamp + 1
        blocks.append((seen, timestamp))
    rng = random.Random(4)
    for _ in range(steady_blocks):
        seen, timestamp = seen + block_time, timestamp + timestamp_step
        blocks.append((seen + 0.03 + rng.uniform(0, 0.05), timestamp))
    return blocks


@pytest.mark.parametrize(("block_time", "timestamp_step"), [
    pytest.param(1.0, 2, id="a-block-a-second-stamped-two-seconds-apart"),
    pytest.param(12.0, 24, id="a-block-every-12s-stamped-24s-apart"),
    pytest.param(1.0, 1, id="a-block-a-second-after-the-burst"),
    pytest.param(2.0, 1, id="a-block-every-2s-stamped-a-second-apart"),
])
def test_after_a_scenario_and_a_burst_the_rhythm_is_relearnt_within_ten_blocks_and_costs_a_call_a_block(
        block_time: float, timestamp_step: int) -> None:
    """Measured before: 3.5 calls a block over the 30 blocks after 20 steady ones, never trusting
    the rhythm again (the timestamps ran ahead of the arrivals by a second more each block)."""
    blocks = _lived(block_time, timestamp_step)
    first_steady = len(blocks) - 60
    run = replay(blocks)
    trusted = run.trusted_from(first_steady)
    assert trusted is not None and trusted - first_steady <= 10
    assert run.calls_per_block(len(blocks) - 31) <= 1.2
    assert run.late_quantile(0.9, len(blocks) - 30) <= max(0.3, POLL)


@pytest.mark.parametrize("offset", [pytest.param(40, id="forty-seconds-ahead"),
                                    pytest.param(-3 * DAY, id="three-days-behind")])
def test_a_constant_offset_of_the_chains_clock_after_a_burst_keeps_the_steady_targets(offset: int) -> None:
    blocks = _lived(1.0, 1)
    blocks = blocks[:-60] + [(seen, timestamp + offset) for seen, timestamp in blocks[-60:]]
    run = replay(blocks)
    assert run.calls_per_block(len(blocks) - 31) <= 1.2
    assert run.late_quantile(0.9, len(blocks) - 30) <= 0.25


def test_an_automine_chain_whose_pauses_fit_no_period_is_not_paced_by_its_arrivals() -> None:
    """The arrivals' rhythm needs RUN blocks whose timestamps step evenly and whose arrivals fit
    one period: a developer's transactions at human pauses never do."""
    clock = BlockClock(DEV_POLL, CEILING)
    for number, (seen, timestamp) in enumerate(automine(_random_pauses(30))):
        clock.polled(number, timestamp, seen)
        assert not clock.paced and clock.wait(seen) == DEV_POLL


def _trusted_clock() -> tuple[BlockClock, float]:
    """A clock that trusts a 1 s chain's rhythm (block 39 the newest, block 40 seen a second after
    it); and when it polls next, for block 40."""
    blocks = steady(40, delay=0.3, jitter=0.0)
    run = replay(blocks)
    assert run.clock.trusted and blocks[-1][0] + 0.9 < run.next_poll < blocks[-1][0] + 1.3
    return run.clock, run.next_poll


def test_a_lagging_backends_lower_head_for_a_due_block_costs_a_retry_at_the_step_and_keeps_the_rhythm() -> None:
    clock, due = _trusted_clock()
    assert not clock.polled(36, 1_000_036, due)  # the backend 3 blocks behind
    assert clock.trusted and clock.wait(due) == clock.step
    assert clock.polled(40, 1_000_040, due + clock.step)
    assert clock.trusted


def test_lower_heads_before_a_rhythm_is_trusted_are_asked_again_at_the_step_a_few_times_in_a_row() -> None:
    blocks = steady(5, delay=0.3, jitter=0.0)
    clock = replay(blocks).clock
    assert not clock.trusted and clock.step < POLL  # a block time known, not yet borne out
    now = blocks[-1][0] + 0.1
    waits = []
    for _ in range(BEHIND_AGAIN + 1):
        assert not clock.polled(1, blocks[1][1], now)  # the backend 3 blocks behind
        waits.append(clock.wait(now))
        now += waits[-1]
    assert waits == [clock.step] * BEHIND_AGAIN + [POLL]  # then as the poll interval says: a node that fell back
    assert clock.polled(5, blocks[4][1] + 1, now) and clock.wait(now) == POLL


def test_a_block_the_node_lacked_is_asked_for_again_at_the_step_and_the_next_poll_waits_for_the_next_block() -> None:
    """Before: the retry that found the block counted as a poll too early for the next one, and
    the schedule asked every step until it came (eight calls a block on a 1 s chain)."""
    clock, due = _trusted_clock()
    assert clock.polled(40, 1_000_040, due)
    clock.asked_again()  # its logs came from the backend behind
    assert clock.wait(due + 0.05) == clock.step
    retried = due + 0.05 + clock.step
    assert not clock.polled(40, 1_000_040, retried)  # the same head: the block indexed now
    assert clock.trusted
    assert clock.wait(retried) > 0.5  # until the next block is due, not every step


def test_the_trusted_rhythm_and_since_when_are_kept_for_health() -> None:
    clock = BlockClock(POLL, CEILING)
    assert (clock.rhythm, clock.trusted_since) == (None, None)
    trusted, _ = _trusted_clock()
    assert trusted.rhythm == 1.0 and trusted.trusted_since is not None
    paced = BlockClock(POLL, CEILING)
    for number, (seen, timestamp) in enumerate(_lived(1.0, 2)):
        paced.polled(number, timestamp, seen + 0.05)
    assert paced.paced and paced.rhythm is not None and abs(paced.rhythm - 1.0) < 0.02
    assert paced.trusted_since is not None


@pytest.mark.django_db(transaction=True)
def test_run_indexer_after_a_scenario_and_a_burst_on_anvil_relearns_the_rhythm_and_costs_a_call_a_block(
        chain: Chain) -> None:
    """The shape of bench/poll_schedule.py's lived-1s row, shortened: run_indexer (the default
    poll interval) through a node proxy 20 ms away follows a scenario (the clock moved a day
    forward, a bounty), a burst of 40 blocks, then a block each second mined as a script mines it
    (`anvil_mine` with a one-second timestamp step: timestamps two seconds apart). Over the last
    12 of 24 steady blocks: about a call a block (3.5 before), and /health's rhythm and the
    metrics' are a second, trusted since the steady blocks."""
    port = free_port()
    with NodeProxy(chain.deployment.rpc_url, NodeLimits(latency=0.02, max_log_blocks=50)) as node:
        process = start(process_env(chain, BOUNTY_RPC_URL=node.url, BOUNTY_INDEXER_POLL_MS="250",
                                    BOUNTY_INDEXER_METRICS_PORT=str(port)))
        try:
            wait_until(lambda: SyncState.objects.filter(last_indexed_block__isnull=False).exists())
            increase_time(chain.w3, DAY)
            post_bounty(chain, "ipfs://a-scenario")
            for _ in range(40):
                chain.w3.provider.make_request("anvil_mine", [1, 1])  # type: ignore[arg-type]
                time.sleep(0.05)
            started, steady_from = time.monotonic(), time.time()
            for n in range(24):
                time.sleep(max(0.0, started + n + 1 - time.monotonic()))
                if n == 12:
                    node.reset_stats()
                chain.w3.provider.make_request("anvil_mine", [1, 1])  # type: ignore[arg-type]
            calls = node.reset_stats().total_calls
            head = chain.w3.eth.block_number
            wait_until(lambda: SyncState.objects.get().last_indexed_block == head)
            state = SyncState.objects.get()
            samples = scrape(port)
        finally:
            process.send_signal(signal.SIGTERM)
            output, _ = process.communicate(timeout=30)
    assert calls / 12 <= 1.35, f"{calls} calls over 12 blocks; the indexer said:\n{output[-4000:]}"
    assert state.block_rhythm_seconds is not None and abs(state.block_rhythm_seconds - 1.0) < 0.05, output[-4000:]
    assert state.block_rhythm_since is not None and state.block_rhythm_since.timestamp() > steady_from
    assert abs(value(samples, "bounty_indexer_block_rhythm_seconds") - 1.0) < 0.05
    assert value(samples, "bounty_indexer_block_rhythm_trusted_since_seconds") == state.block_rhythm_since.timestamp()
