"""The historical phase (indexer.historical, its ranges read by indexer.fetch) through a node far
away (tests/node_proxy.py: latency, a getLogs range cap, a budget of calls per second, a batch
cap), catching up as production does: several ranges in flight, committed in block order, within
the plan's budget, never giving up on a rate limit, and the mirror equal to the chain in the
end, a reorganisation while ranges are in flight included."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest

from contracts.demo import seed_demo_activity
from indexer.fetch import GROWING_AHEAD
from indexer.health import indexer_health
from indexer.models import AppliedLog, IndexedBlock
from indexer.sync import Indexer
from records.models import Bounty
from tests.chain import USDC, Chain
from tests.indexer.conftest import catch_up_to_head, config_for, mine
from tests.indexer.mirror import assert_live_consumer_is_current, assert_mirror_equals_chain, record_log_count
from tests.node_proxy import NodeLimits, NodeProxy

pytestmark = pytest.mark.django_db(transaction=True)

QUIET_BLOCKS = 150


def _bounties(chain: Chain, prompts: list[str]) -> None:
    chain.send(chain.usdc.functions.approve(chain.board.address, 2**256 - 1), chain.account(1))
    for n, prompt in enumerate(prompts):
        chain.send(chain.board.functions.createBounty(prompt, b"\x05" * 32, (n + 1) * USDC, 3600), chain.account(1))


@contextmanager
def far_indexer(chain: Chain, limits: NodeLimits, **settings: Any) -> Iterator[tuple[Indexer, NodeProxy]]:
    with NodeProxy(chain.deployment.rpc_url, limits) as node:
        indexer = Indexer(config_for(chain, BOUNTY_RPC_URL=node.url, **settings))
        indexer.check_node()
        indexer.ensure_deployment()
        yield indexer, node


def assert_consistent(chain: Chain, indexer: Indexer) -> None:
    assert_mirror_equals_chain(chain.board, indexer.deployment)
    assert_live_consumer_is_current(indexer.deployment)
    assert AppliedLog.objects.count() == record_log_count(chain.board), "every log applied once"


@pytest.fixture
def busy_then_quiet(chain: Chain) -> Chain:
    """Demo activity, a quiet stretch, more bounties: records at both ends of many ranges."""
    seed_demo_activity(chain.w3, chain.deployment)
    mine(chain, QUIET_BLOCKS)
    _bounties(chain, [f"ipfs://after-the-quiet-{n}" for n in range(3)])
    return chain


def test_ranges_are_read_several_at_once_and_committed_in_order(busy_then_quiet: Chain) -> None:
    chain = busy_then_quiet
    with far_indexer(chain, NodeLimits(latency=0.03, max_log_blocks=5)) as (indexer, node):
        catch_up_to_head(indexer)
        assert node.stats.max_in_flight > 4
        assert node.stats.refused["range"] >= 1  # it learnt the cap from the node's refusal
        assert node.stats.refused["range"] <= GROWING_AHEAD  # while the span grew, few ranges were planned ahead
        phases = indexer.committer.phase_calls(indexer.rpc.tally.take())
        assert phases["historical"] > 0 and sum(phases.values()) == node.stats.total_calls  # each call in one phase
    assert_consistent(chain, indexer)


def test_a_plans_budget_is_never_exceeded(busy_then_quiet: Chain) -> None:
    chain = busy_then_quiet
    limits = NodeLimits(latency=0.01, max_log_blocks=10, requests_per_second=30)
    with far_indexer(chain, limits, BOUNTY_RPC_MAX_REQUESTS_PER_SECOND=30) as (indexer, node):
        catch_up_to_head(indexer)
        assert node.stats.max_calls_per_second <= 30
        assert not node.stats.refused["rate limit"]
    assert_consistent(chain, indexer)


def test_a_rate_limit_storm_slows_the_indexer_down_and_never_stops_it(busy_then_quiet: Chain) -> None:
    chain = busy_then_quiet
    with far_indexer(chain, NodeLimits(latency=0.01, max_log_blocks=10, requests_per_second=15)) as (indexer, node):
        catch_up_to_head(indexer)
        assert node.stats.refused["rate limit"] >= 3
        assert indexer.rpc.pacer.limit < indexer.rpc.pacer.max_concurrency  # it backed off
    assert_consistent(chain, indexer)
    assert indexer_health(indexer.deployment)["rate_limited"] is True  # /health says so


def test_a_batch_cap_is_learnt_from_the_nodes_refusal(busy_then_quiet: Chain) -> None:
    chain = busy_then_quiet
    with far_indexer(chain, NodeLimits(max_log_blocks=40, max_batch=2)) as (indexer, node):
        catch_up_to_head(indexer)
        assert node.stats.refused["batch"] >= 1
        assert indexer.rpc.max_batch <= 2
    assert_consistent(chain, indexer)


def test_a_reorganisation_while_ranges_are_in_flight_leaves_the_mirror_equal_to_the_new_chain(chain: Chain) -> None:
    _bounties(chain, ["ipfs://kept"])
    with far_indexer(chain, NodeLimits(latency=0.02, max_log_blocks=4)) as (indexer, node):
        catch_up_to_head(indexer)
        fork = chain.w3.provider.make_request("evm_snapshot", [])["result"]  # type: ignore[arg-type]
        mine(chain, 40)
        _bounties(chain, ["ipfs://orphaned-0", "ipfs://orphaned-1"])
        mine(chain, 40)
        reads = node.stats.calls["eth_getLogs"]
        reorganised = threading.Event()

        def reorganise(call: dict[str, Any]) -> None:
            """Once ranges of the old branch have been answered, and others are still in flight."""
            if call.get("method") == "eth_getLogs" and node.stats.calls["eth_getLogs"] >= reads + 8 \
                    and not reorganised.is_set():
                reorganised.set()
                assert chain.w3.provider.make_request("evm_revert", [fork])["result"] is True  # type: ignore[arg-type]
                mine(chain, 30)
                _bounties(chain, ["ipfs://new-branch-0", "ipfs://new-branch-1", "ipfs://new-branch-2"])
                mine(chain, 60)

        node.before_call = reorganise
        catch_up_to_head(indexer)
        node.before_call = None
        assert reorganised.is_set()
        assert node.stats.max_in_flight > 1
    assert_consistent(chain, indexer)
    assert sorted(Bounty.objects.values_list("prompt", flat=True)) == [
        "ipfs://kept", "ipfs://new-branch-0", "ipfs://new-branch-1", "ipfs://new-branch-2"]


@pytest.mark.parametrize("stamped", [True, False], ids=["logs-with-blockTimestamp", "logs-without"])
def test_event_blocks_need_no_header_when_their_logs_carry_their_time(busy_then_quiet: Chain, stamped: bool) -> None:
    """Nodes that put `blockTimestamp` in every log (geth 1.16 on, reth, anvil) are asked no header
    for the event blocks a range holds; nodes that do not are asked as before. Either way each
    record is stamped with its block's time, and each event block's hash is kept."""
    chain = busy_then_quiet
    limits = NodeLimits(latency=0.002, max_log_blocks=50, no_block_timestamps=not stamped)
    with far_indexer(chain, limits, BOUNTY_LIVE_BLOCKS=0) as (indexer, node):
        catch_up_to_head(indexer)
        asked = node.stats.calls["eth_getBlockByNumber"]
    assert_consistent(chain, indexer)
    for bounty in Bounty.objects.all():
        assert bounty.created_at.timestamp() == chain.w3.eth.get_block(bounty.block_number)["timestamp"]
    event_blocks = set(AppliedLog.objects.values_list("block_number", flat=True))
    kept = dict(IndexedBlock.objects.values_list("number", "hash"))
    assert all(kept[number] == chain.w3.eth.get_block(number)["hash"].to_0x_hex() for number in event_blocks)
    if stamped:  # headers only for the batches' ends and the blocks before them, and the polls
        assert asked < len(event_blocks) // 2, (asked, event_blocks)
    else:
        assert asked >= len(event_blocks)
