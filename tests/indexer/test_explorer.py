"""The explorer as the historical phase's guide (indexer.explorer), through a node capped at 5
blocks per eth_getLogs (tests/node_proxy.py) and a Blockscout made on loopback (tests/explorer.py):
the node is asked only about the blocks the explorer names, each proven by the node's header; the
mirror is proven against the contract's state once caught up; a log the explorer hides is found and
repaired; an explorer that lags, fails, answers wrong or is down costs speed only."""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest
from django.test import override_settings

from contracts.demo import seed_demo_activity
from indexer import reread
from indexer.events import RECORD_EVENT_TOPICS, decode_log
from indexer.health import indexer_health
from indexer.models import SyncState
from indexer.sync import Indexer
from tests.chain import USDC, Chain
from tests.explorer import ExplorerFaults, FakeBlockscout
from tests.indexer.conftest import catch_up_to_head, config_for, mine
from tests.indexer.mirror import assert_mirror_equals_chain
from tests.indexer.test_historical import assert_consistent
from tests.node_proxy import NodeLimits, NodeProxy

pytestmark = pytest.mark.django_db(transaction=True)

CAP = 5  # blocks per eth_getLogs, as free plans allow
QUIET = 1_000  # empty blocks between the demo activity and the bounties after it
WITHIN = 300  # seconds a catch-up may take before the test fails (a loaded machine's, many times the usual)


@pytest.fixture
def history(chain: Chain) -> Chain:
    """Demo activity, a quiet stretch, three bounties, and enough blocks after them that every
    event lies below the realtime phase's blocks."""
    seed_demo_activity(chain.w3, chain.deployment)
    mine(chain, QUIET)
    chain.send(chain.usdc.functions.approve(chain.board.address, 2**256 - 1), chain.account(1))
    for n in range(3):
        chain.send(chain.board.functions.createBounty(f"ipfs://guided-{n}", b"\x07" * 32, (n + 1) * USDC, 3600),
                   chain.account(1))
    mine(chain, 64)
    return chain


def _record_logs(chain: Chain) -> list[dict[str, Any]]:
    logs: list[dict[str, Any]] = chain.w3.provider.make_request("eth_getLogs", [{  # type: ignore[arg-type]
        "address": chain.deployment.contract_address, "fromBlock": hex(chain.deployment.start_block),
        "toBlock": "latest", "topics": [list(RECORD_EVENT_TOPICS)]}])["result"]
    return logs


@contextmanager
def guided(chain: Chain, faults: ExplorerFaults | None = None,
           **settings: Any) -> Iterator[tuple[Indexer, NodeProxy, FakeBlockscout]]:
    with NodeProxy(chain.deployment.rpc_url, NodeLimits(latency=0.005, max_log_blocks=CAP)) as node, \
            FakeBlockscout(chain.deployment.rpc_url, faults) as explorer:
        indexer = Indexer(config_for(chain, **{"BOUNTY_RPC_URL": node.url, "BOUNTY_EXPLORER_RPC_URL": explorer.url,
                                               "BOUNTY_GETLOGS_MAX_BLOCKS": CAP, **settings}))
        indexer.check_node()
        indexer.ensure_deployment()
        yield indexer, node, explorer


def _range_reads(node: NodeProxy) -> int:
    return node.stats.calls["eth_getLogs"] - node.stats.calls["eth_getBlockByNumber"] // 2


def _proofs(indexer: Indexer, outcome: str) -> float:
    value = indexer.metrics.registry.get_sample_value(
        "bounty_indexer_mirror_proofs_total", {"chain_id": str(indexer.config.chain_id),
                                              "contract": indexer.config.contract_address, "outcome": outcome})
    return value or 0.0


def test_a_guided_sync_asks_the_node_only_about_the_blocks_the_explorer_names(history: Chain) -> None:
    chain = history
    blocks = chain.w3.eth.block_number - chain.deployment.start_block + 1
    event_blocks = len({log["blockNumber"] for log in _record_logs(chain)})
    with guided(chain) as (indexer, node, explorer):
        catch_up_to_head(indexer, within=WITHIN)
        assert explorer.stats.calls["eth_getLogs"] >= 1
        # By range: the realtime phase's blocks read a second time (at 5 blocks a call); without the
        # explorer, every block of the history.
        ranges = sum(1 for _ in range(0, blocks, CAP))
        assert node.stats.calls["eth_getLogs"] <= event_blocks + 40
        assert node.stats.calls["eth_getLogs"] < ranges / 4
        assert node.stats.total_calls <= 3 * event_blocks + 60
        phases = indexer.committer.phase_calls(indexer.rpc.tally.take())
        assert phases["explorer"] == explorer.stats.requests
        assert phases["proof"] > 0  # the mirror proven against the contract once caught up
    assert_consistent(chain, indexer)
    assert _proofs(indexer, "equal") == 1 and _proofs(indexer, "differs") == 0
    state = SyncState.objects.get(deployment=indexer.deployment)
    assert state.guided_from_block is None  # proven
    assert indexer_health(indexer.deployment)["rpc_calls_by_phase"]["explorer"] == explorer.stats.requests


@pytest.mark.parametrize("which", ["the last", "a creation with later events"])
def test_a_log_the_explorer_hides_is_found_and_repaired_from_the_node(history: Chain, which: str,
                                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    chain = history
    monkeypatch.setattr(reread, "REREAD_WINDOW", 16)  # the repair's second reading in several windows, as a long one
    logs = _record_logs(chain)
    created = [log for log in logs if type(decode_log(log)).__name__ == "BountyCreated"]
    hidden = logs[-1] if which == "the last" else created[1]
    key = (int(hidden["blockNumber"], 16), int(hidden["logIndex"], 16))
    ranges = (chain.w3.eth.block_number - chain.deployment.start_block + 1) / CAP
    with guided(chain, ExplorerFaults(omit={key})) as (indexer, node, _):
        catch_up_to_head(indexer, within=WITHIN)
        assert indexer.reader.guide is not None and not indexer.reader.guide.in_use  # set aside for the process
        # The guided blocks read again by range once, the blocks before the lost log not a third time.
        assert node.stats.calls["eth_getLogs"] < 1.5 * ranges
    assert_consistent(chain, indexer)
    if which == "the last":  # found by the proof, once caught up: the guided blocks read again by range
        assert _proofs(indexer, "differs") == 1 and _proofs(indexer, "equal") == 1
        assert indexer.metrics.registry.get_sample_value(
            "bounty_indexer_reread_repairs_total", {"chain_id": str(indexer.config.chain_id),
                                                    "contract": indexer.config.contract_address}) == 1
    # A creation hidden is found at its record's next event (a record the mirror lacks), before the
    # batch that holds it is committed: the blocks from there are read by range.


@pytest.mark.parametrize("faults", [
    pytest.param(ExplorerFaults(lag=150), id="lags 150 blocks"),
    pytest.param(ExplorerFaults(fail_next=2), id="answers 500 twice, then recovers"),
    pytest.param(ExplorerFaults(fail_next=1_000), id="answers 500 for good"),
    pytest.param(ExplorerFaults(page=4), id="pages of 4 logs"),
    pytest.param(ExplorerFaults(wrong_hash={-1}), id="names a block of another chain"),
    pytest.param(ExplorerFaults(requests_per_second=1), id="limits the rate"),
    pytest.param(ExplorerFaults(slow_over=400, slow_seconds=1.5), id="times out on wide ranges"),
    pytest.param(ExplorerFaults(gateway_timeout_over=400), id="a proxy in front answers 504 on wide ranges"),
])
def test_an_explorer_that_fails_costs_speed_only(history: Chain, faults: ExplorerFaults) -> None:
    chain = history
    if faults.wrong_hash:
        faults.wrong_hash = {int(_record_logs(chain)[5]["blockNumber"], 16)}
    set_aside = faults.fail_next >= 1_000 or bool(faults.wrong_hash)
    kept = faults.lag or faults.fail_next or faults.page < 1_000 or faults.gateway_timeout_over
    with guided(chain, faults, BOUNTY_RPC_TIMEOUT_SECONDS=1) as (indexer, _, _):
        catch_up_to_head(indexer, within=WITHIN)
        guide = indexer.reader.guide
        assert guide is not None
        if set_aside:
            assert not guide.in_use and guide.set_aside_because
        elif kept:
            assert guide.in_use, guide.set_aside_because  # it guided what it could
    assert _proofs(indexer, "differs") == 0
    assert_consistent(chain, indexer)
    assert SyncState.objects.get(deployment=indexer.deployment).guided_from_block is None


def test_an_explorer_asking_for_a_wait_past_the_ceiling_is_set_aside(history: Chain) -> None:
    """A wait of years from the explorer's 429 held every request to it, so the historical phase
    stalled until a restart; an explorer costs speed only."""
    faults = ExplorerFaults(requests_per_second=1, retry_after="999999999")
    with guided(history, faults) as (indexer, _, explorer):
        catch_up_to_head(indexer, within=60)
        guide = indexer.reader.guide
        assert guide is not None and not guide.in_use
        assert "asked to wait 999999999 s (Retry-After), more than BOUNTY_RPC_MAX_RETRY_AFTER_SECONDS (60 s)" \
            in str(guide.set_aside_because)
        assert explorer.stats.failed == 1  # not asked again
    assert_consistent(history, indexer)


@pytest.mark.parametrize("bulk", [False, True], ids=["in this process", "in a bulk backfill's reader process"])
def test_an_explorer_that_is_down_costs_speed_only(history: Chain, bulk: bool) -> None:
    chain = history
    with guided(chain) as (indexer, _, explorer):
        explorer.go_down()
        if bulk:
            with override_settings(BOUNTY_DEFER_INDEXES="always"):
                indexer.prepare()
            assert SyncState.objects.get(deployment=indexer.deployment).bulk_from_block is not None
        catch_up_to_head(indexer, within=WITHIN)
        # Set aside where it was found, and so in this process too: not asked again.
        assert indexer.reader.guide is not None and not indexer.reader.guide.in_use
    if bulk:  # a bulk backfill logs one resync, not a change-log entry a change
        assert_mirror_equals_chain(chain.board, indexer.deployment)
    else:
        assert_consistent(chain, indexer)


def test_the_explorer_is_asked_only_where_it_pays(history: Chain) -> None:
    chain = history
    with guided(chain, BOUNTY_GETLOGS_MAX_BLOCKS=10_000) as (indexer, _, explorer):  # a paid plan's ranges
        catch_up_to_head(indexer, within=WITHIN)
        assert explorer.stats.requests == 0
    assert_consistent(chain, indexer)


def test_a_short_catch_up_after_a_guided_sync_is_read_by_range(history: Chain) -> None:
    chain = history
    with guided(chain) as (indexer, _, explorer):
        catch_up_to_head(indexer, within=WITHIN)
        asked = explorer.stats.requests
        chain.send(chain.board.functions.createBounty("ipfs://after-the-guided-sync", b"\x07" * 32, USDC, 3600),
                   chain.account(1))
        mine(chain, 60)  # a minute of chain 91342 while the indexer was away: 12 ranges of 5 blocks
        catch_up_to_head(indexer, within=WITHIN)
        assert explorer.stats.requests == asked
        assert SyncState.objects.get(deployment=indexer.deployment).guided_from_block is None  # no second proof
    assert_consistent(chain, indexer)


def test_a_creation_hidden_before_the_explorer_broke_is_repaired_from_the_node(history: Chain) -> None:
    """The explorer hides a bounty's creation, then breaks before the bounty's next event: the
    blocks after are read by range, where that event finds a record the mirror lacks. The guided
    blocks are unproven, so they are read again by range and the creation repaired (the indexer
    does not stop as it does for a start block after the deployment)."""
    chain = history
    logs = _record_logs(chain)
    created = [log for log in logs if type(decode_log(log)).__name__ == "BountyCreated"]
    hidden = created[0]
    block = int(hidden["blockNumber"], 16)
    later = next(int(log["blockNumber"], 16) for log in logs if int(log["blockNumber"], 16) > block
                 and type(decode_log(log)).__name__ == "BountyCreated")  # the next bounty's: named, then it breaks
    faults = ExplorerFaults(page=1, omit={(block, int(hidden["logIndex"], 16))}, fail_from_block=later)
    with guided(chain, faults) as (indexer, _, _):
        catch_up_to_head(indexer, within=WITHIN)
        assert indexer.reader.guide is not None and not indexer.reader.guide.in_use
    assert_consistent(chain, indexer)
    assert indexer.metrics.registry.get_sample_value(
        "bounty_indexer_reread_repairs_total", {"chain_id": str(indexer.config.chain_id),
                                                "contract": indexer.config.contract_address}) == 1


def test_a_node_that_lacks_settled_blocks_is_waited_for_and_the_explorer_not_asked_wide_again(
        history: Chain, monkeypatch: pytest.MonkeyPatch) -> None:
    """A full run hung here: the session's anvil had lost blocks far below its head (null headers:
    an anvil_mine an earlier test gave up on under load went on mining through the fixture's
    evm_revert, which took away the blocks mined so far). Each step's first guided batch ended in
    a block the node lacked, which was taken for a reorganisation (a step at once), and each step
    asked the explorer again from that batch's first block: the same wide ranges timed out on
    three times each and split the same way, 13 s a step, for ever. A block the node lacks that
    deep is waited for, as a backend behind is; the explorer's ranges stay as narrow as it answered."""
    chain = history
    events = sorted({int(log["blockNumber"], 16) for log in _record_logs(chain)})
    before, after = max(itertools.pairwise(events), key=lambda pair: pair[1] - pair[0])  # the quiet stretch
    lacking = range(before + 100, after - 100)
    with guided(chain, ExplorerFaults(slow_over=400, slow_seconds=1.5), BOUNTY_RPC_TIMEOUT_SECONDS=1) \
            as (indexer, node, explorer):
        header_as = node._header_as

        async def lacks(tag: Any, full: Any, behind: bool) -> Any:
            if isinstance(tag, str) and tag.startswith("0x") and int(tag, 16) in lacking:
                return None
            return await header_as(tag, full, behind)

        monkeypatch.setattr(node, "_header_as", lacks)
        catch_up_to_head(indexer, max_rounds=10, within=WITHIN)  # not a step at once, for ever: waits (False)
        indexed = SyncState.objects.get(deployment=indexer.deployment).last_indexed_block
        assert indexed is not None and indexed < lacking.start
        timed_out = explorer.stats.failed
        assert timed_out >= 3  # a wide range, three times, before it was split
        assert not indexer.catch_up()  # the node still lacks it: waited for again
        monkeypatch.setattr(node, "_header_as", header_as)
        catch_up_to_head(indexer, within=WITHIN)
        assert explorer.stats.failed == timed_out  # the ranges it timed out on not asked again
        assert indexer.reader.guide is not None and indexer.reader.guide.in_use
    assert_consistent(chain, indexer)
    assert SyncState.objects.get(deployment=indexer.deployment).guided_from_block is None
