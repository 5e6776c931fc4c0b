"""The realtime phase's parts (indexer.realtime): the bloom test against real headers of the dev
chain, the headers kept linked by parent hash, the logs of a hand-over's blocks read by range where the
node allows it, by block hash where the range's answer lacks a block, and from the block's
receipts where getLogs by hash answers nothing for a block whose bloom says otherwise."""

from __future__ import annotations

import logging
from typing import Any

import pytest

from indexer import realtime
from indexer.errors import NodeBehind
from indexer.realtime import BloomFilter, HeaderChain, LiveReader
from indexer.rpc import UNREACHABLE_AFTER, Backoff, RpcClient
from indexer.sync import Indexer
from records.models import Bounty
from tests.chain import USDC, Chain
from tests.indexer.conftest import catch_up_to_head, config_for, post_bounty
from tests.node_proxy import NodeLimits, NodeProxy


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


def _created_in_a_row(chain: Chain, count: int) -> list[int]:
    chain.send(chain.usdc.functions.approve(chain.board.address, 2**256 - 1), chain.account(1))
    numbers: list[int] = []
    for n in range(count):
        chain.send(chain.board.functions.createBounty(f"ipfs://row-{n}", b"\x05" * 32, USDC, 3600), chain.account(1))
        numbers.append(chain.w3.eth.block_number)
    return numbers


def test_a_hand_over_of_several_record_blocks_reads_their_logs_in_one_range_call(chain: Chain) -> None:
    numbers = _created_in_a_row(chain, 3)
    asked: list[dict[str, Any]] = []
    with NodeProxy(chain.deployment.rpc_url, NodeLimits()) as node:
        node.before_call = lambda call: asked.append(call["params"][0]) if call["method"] == "eth_getLogs" else None
        live = LiveReader(RpcClient(node.url), chain.deployment.contract_address.lower(), span=lambda: 50)
        headers = [header for header in live.headers(list(range(numbers[0], numbers[-1] + 1))) if header]
        read = live.logs(headers)
    assert [len(logs) for logs in read] == [1, 1, 1]
    assert [int(logs[0]["blockNumber"], 16) for logs in read] == numbers
    assert len(asked) == 1 and "blockHash" not in asked[0]  # one range, not one call a block


def test_a_range_the_node_times_out_on_is_not_asked_for_a_while_once_its_blocks_answer_one_by_one(
        chain: Chain, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch) -> None:
    numbers = _created_in_a_row(chain, 3)
    ranges: list[dict[str, Any]] = []
    with NodeProxy(chain.deployment.rpc_url, NodeLimits(slow_ranges=1.0)) as node:
        node.before_call = lambda call: ranges.append(call) \
            if call["method"] == "eth_getLogs" and "blockHash" not in call["params"][0] else None
        rpc = RpcClient(node.url, timeout=0.3, backoff=Backoff(base=0.01, cap=0.02))
        live = LiveReader(rpc, chain.deployment.contract_address.lower(), span=lambda: 50)
        headers = [header for header in live.headers(numbers) if header]
        with caplog.at_level(logging.INFO, logger="indexer.realtime"):
            first = live.logs(headers)
        timed_out = len(ranges)
        again = live.logs(headers)
        not_asked = len(ranges)
        monkeypatch.setattr(realtime, "TIMED_OUT_FOR", 0.0)  # as when TIMED_OUT_FOR has passed
        assert live.logs(headers) == first
    assert [int(logs[0]["blockNumber"], 16) for logs in first] == numbers  # read one by one, nothing lost
    assert again == first
    assert timed_out == UNREACHABLE_AFTER and not_asked == timed_out  # the range not asked the second time
    assert len(ranges) == 2 * UNREACHABLE_AFTER  # asked again once the while has passed
    assert "timed out on getLogs over 3 blocks" in caplog.text


def test_a_range_the_node_fails_on_otherwise_than_by_timing_out_is_asked_again_at_the_next_poll(
        chain: Chain) -> None:
    numbers = _created_in_a_row(chain, 3)
    with NodeProxy(chain.deployment.rpc_url, NodeLimits(ranges_status=503)) as node:
        rpc = RpcClient(node.url, timeout=0.3, backoff=Backoff(base=0.01, cap=0.02))
        live = LiveReader(rpc, chain.deployment.contract_address.lower(), span=lambda: 50)
        headers = [header for header in live.headers(numbers) if header]
        first = live.logs(headers)
        failed = node.stats.calls["eth_getLogs"]
        assert live.logs(headers) == first
        again = node.stats.calls["eth_getLogs"] - failed
    assert [int(logs[0]["blockNumber"], 16) for logs in first] == numbers  # read one by one, nothing lost
    assert failed == UNREACHABLE_AFTER + 3 and again == UNREACHABLE_AFTER + 3  # the range tried each time, then by hash


def test_a_node_that_times_out_on_everything_does_not_teach_a_narrower_range(chain: Chain) -> None:
    numbers = _created_in_a_row(chain, 3)
    ranges: list[dict[str, Any]] = []
    with NodeProxy(chain.deployment.rpc_url, NodeLimits()) as node:
        node.before_call = lambda call: ranges.append(call) \
            if call["method"] == "eth_getLogs" and "blockHash" not in call["params"][0] else None
        rpc = RpcClient(node.url, timeout=0.3, backoff=Backoff(base=0.01, cap=0.02))
        live = LiveReader(rpc, chain.deployment.contract_address.lower(), span=lambda: 50)
        headers = [header for header in live.headers(numbers) if header]
        node.limits.latency = 1.0  # every request: the node hangs
        with pytest.raises(NodeBehind):  # asked again at the next poll
            live.logs(headers)
        node.limits.latency = 0.0
        hung = len(ranges)
        read = live.logs(headers)
    assert [int(logs[0]["blockNumber"], 16) for logs in read] == numbers
    assert len(ranges) == hung + 1  # the range asked again once the node answers


@pytest.mark.parametrize("span", [1, 50])
def test_blocks_a_range_answer_lacks_or_cannot_cover_are_asked_by_hash(chain: Chain, span: int) -> None:
    numbers = _created_in_a_row(chain, 3)
    asked: list[dict[str, Any]] = []
    with NodeProxy(chain.deployment.rpc_url, NodeLimits()) as node:
        def spy(call: dict[str, Any]) -> None:
            if call["method"] == "eth_getLogs":
                asked.append(call["params"][0])
                if "blockHash" not in call["params"][0]:  # as a backend that lacks the newest block answers
                    call["params"][0]["toBlock"] = hex(numbers[-2])

        node.before_call = spy
        live = LiveReader(RpcClient(node.url), chain.deployment.contract_address.lower(), span=lambda: span)
        read = live.logs([header for header in live.headers(numbers) if header])
    assert [int(logs[0]["blockNumber"], 16) for logs in read] == numbers  # nothing lost
    by_hash = [query for query in asked if "blockHash" in query]
    assert len(by_hash) == (1 if span == 50 else 3)


@pytest.mark.django_db(transaction=True)
def test_a_matching_bloom_with_an_empty_answer_is_confirmed_by_the_receipts(
        chain: Chain, caplog: pytest.LogCaptureFixture) -> None:
    """getLogs by hash answers nothing once for a block whose bloom holds the contract's record:
    the block's receipts hold the log, and the first reading takes it from them."""
    with NodeProxy(chain.deployment.rpc_url, NodeLimits()) as node:
        indexer = Indexer(config_for(chain, BOUNTY_RPC_URL=node.url, BOUNTY_LIVE_BLOCKS=8))
        indexer.check_node()
        indexer.ensure_deployment()
        catch_up_to_head(indexer)
        node.limits.empty_logs_once = frozenset({chain.w3.eth.block_number + 2})
        post_bounty(chain, "ipfs://in-the-receipts")
        with caplog.at_level(logging.WARNING, logger="indexer.realtime"):
            catch_up_to_head(indexer)
        assert node.stats.blanked == 1 and node.stats.calls["eth_getBlockReceipts"] == 1
    assert list(Bounty.objects.values_list("prompt", flat=True)) == ["ipfs://in-the-receipts"]
    assert "answered eth_getLogs for block" in caplog.text and "but its receipts hold 1 record logs" in caplog.text
    assert indexer.metrics.reread_repairs._value.get() == 0
