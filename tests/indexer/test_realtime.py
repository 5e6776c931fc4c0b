"""The realtime phase's parts (indexer.realtime): the bloom test against real headers of the dev
chain, the headers kept linked by parent hash, and the block clock on a simulated chain whose
blocks come every second and can be seen some time after their timestamp."""

from __future__ import annotations

import random

import pytest

from indexer.realtime import BlockClock, BloomFilter, HeaderChain
from tests.chain import USDC, Chain


def test_the_bloom_admits_the_contracts_record_blocks_and_rules_out_the_others(chain: Chain) -> None:
    chain.send(chain.usdc.functions.approve(chain.board.address, 2**256 - 1), chain.account(1))
    approval = chain.w3.eth.block_number
    chain.send(chain.board.functions.createBounty("ipfs://bloom", b"\x05" * 32, 3 * USDC, 3600), chain.account(1))
    created = chain.w3.eth.block_number
    bloom = BloomFilter(chain.deployment.contract_address.lower())

    def logs_bloom(number: int) -> str:
        return "0x" + bytes(chain.w3.eth.get_block(number)["logsBloom"]).hex()

    assert bloom.may_hold(logs_bloom(created))
    assert not bloom.may_hold(logs_bloom(approval))  # the token's log: another address and topic
    assert not bloom.may_hold("0x" + "00" * 256)
    assert not BloomFilter("0x" + "12" * 20).may_hold(logs_bloom(created))  # another contract
    assert bloom.may_hold(None)  # a node that sends no bloom: the block is read


def _header(number: int, parent: str) -> dict[str, str]:
    return {"number": hex(number), "hash": f"0x{number:064x}", "parentHash": parent}


def test_headers_hang_together_from_the_indexed_tip_and_a_broken_link_drops_them_all() -> None:
    chain = HeaderChain()
    for number in range(11, 16):
        chain.add(_header(number, f"0x{number - 1:064x}"))
    assert chain.linked(11, 15, f"0x{10:064x}") == (15, False)
    assert chain.linked(11, 17, f"0x{10:064x}") == (15, False)  # 16 not here yet
    assert chain.missing(11, 17) == [16, 17]
    chain.add(_header(14, "0x" + "ee" * 32))  # 14 replaced by a block of another branch: 13 may be stale too
    assert chain.linked(11, 15, f"0x{10:064x}") == (10, True)
    assert chain.missing(11, 15) == [11, 12, 13, 14, 15]
    chain.add(_header(11, f"0x{10:064x}"))
    assert chain.linked(11, 13, "0x" + "aa" * 32) == (10, True)  # the tip is not 11's parent


def _simulate(blocks: int, delay: float, jitter: float, seed: int = 7,
              missing: float = 0.0, block_time: int = 1, jumps: float = 0.0) -> tuple[float, list[float]]:
    """Polls the way the indexer does (one call each) a chain of blocks every `block_time`
    seconds (a share `missing` of the slots empty), each seen `delay` (plus up to `jitter`) after
    its timestamp by this machine's clock, a share `jumps` of the timestamps a second ahead of the
    one before (and all after: anvil's drift); calls per block once it has learnt the block time
    (from the 10th block on), and how late each block was seen."""
    rng = random.Random(seed)
    slots: list[int] = []
    slot = 0
    while len(slots) < blocks:
        if rng.random() >= missing:
            slots.append(slot * block_time)
        slot += 1
    visible = [t + delay + rng.uniform(0, jitter) for t in slots]
    ahead = 0
    for n in range(blocks):  # the timestamps the chain gives; the blocks still come as they did
        ahead += rng.random() < jumps
        slots[n] += ahead
    clock = BlockClock(poll_interval=0.25)
    now, newest, calls = 0.0, -1, 0
    late: list[float] = []
    while newest < blocks - 1:
        calls += newest >= 10
        head = newest
        while head + 1 < blocks and visible[head + 1] <= now:
            head += 1
        if head > newest:
            clock.seen(head, slots[head], now)
            late.extend(now - visible[n] for n in range(newest + 1, head + 1))
            newest = head
        else:
            clock.missed(now)
        now += clock.wait(now)
    return calls / (blocks - 11), late


@pytest.mark.parametrize(("delay", "jitter"), [
    pytest.param(0.05, 0.0, id="seen-at-once"),
    pytest.param(0.3, 0.1, id="a-node-300ms-behind"),
    pytest.param(0.8, 0.15, id="late-in-the-second"),
    pytest.param(2.5, 0.1, id="a-local-clock-2.5s-ahead"),
])
def test_the_block_clock_asks_about_once_a_block_and_soon_after_it_can_be_seen(delay: float, jitter: float) -> None:
    per_block, late = _simulate(600, delay, jitter)
    steady = sorted(late[60:])  # once it has learnt the chain
    assert per_block <= 1.2
    assert steady[len(steady) // 2] <= 0.15  # the median block is seen within 150 ms
    assert steady[int(0.9 * len(steady))] <= 0.25


def test_timestamps_that_jump_ahead_do_not_make_it_late() -> None:
    per_block, late = _simulate(300, 0.3, 0.05, jumps=0.1)
    steady = sorted(late[60:])
    assert per_block <= 1.3
    assert steady[int(0.9 * len(steady))] <= 0.25


def test_slots_without_a_block_cost_few_polls() -> None:
    per_block, late = _simulate(200, 0.3, 0.05, missing=0.1, block_time=12)
    assert per_block <= 2.0
    assert sorted(late)[len(late) // 2] <= 0.3


def test_without_a_block_time_it_polls_every_poll_interval() -> None:
    clock = BlockClock(poll_interval=0.25)
    assert clock.wait(0.0) == 0.25
    for number in range(5):  # blocks that share a timestamp (a chain faster than a second)
        clock.seen(number, 100, 100.0)
    assert clock.block_time is None and clock.wait(100.0) == 0.25
