"""The far node itself (tests/node_proxy.py), asked through plain JSON-RPC in front of anvil: the
providers' wordings of a range refusal, each read by indexer.refusals; the backend behind the
head, as a load balancer's lagging backend answers; the node that omits a block's logs once; and
the gap's empty blocks by hash. The indexer's tests through it trust what is checked here."""

from __future__ import annotations

from typing import Any

import httpx
import pytest

from indexer.refusals import read_refusal
from tests.chain import USDC, Chain
from tests.node_proxy import EMPTY_BLOOM, WORDINGS, NodeLimits, NodeProxy

BEHIND = 3
TOTAL_SUPPLY = "0x18160ddd"  # TestUSDC.totalSupply()


def _rpc(url: str, method: str, *params: Any) -> dict[str, Any]:
    """The whole answer of one call: `result` or `error`."""
    answer: dict[str, Any] = httpx.post(url, json={"jsonrpc": "2.0", "id": 1, "method": method,
                                                   "params": list(params)}).json()
    return answer


def _result(url: str, method: str, *params: Any) -> Any:
    answer = _rpc(url, method, *params)
    assert "error" not in answer, answer
    return answer["result"]


def _bounties(chain: Chain, prompts: list[str]) -> None:
    """One block a transaction, each with logs: the approval's, then each bounty's."""
    chain.send(chain.usdc.functions.approve(chain.board.address, 2**256 - 1), chain.account(1))
    for n, prompt in enumerate(prompts):
        chain.send(chain.board.functions.createBounty(prompt, b"\x05" * 32, (n + 1) * USDC, 3600), chain.account(1))


@pytest.fixture
def busy_top(chain: Chain) -> Chain:
    """A chain whose newest blocks, more than BEHIND of them, all hold logs."""
    _bounties(chain, [f"ipfs://top-{n}" for n in range(BEHIND + 2)])
    return chain


# ------------------------------------------------------------------------ providers' wordings

@pytest.mark.parametrize("wording", list(WORDINGS))
def test_each_providers_wording_refuses_a_range_over_the_cap_and_is_read(chain: Chain, wording: str) -> None:
    cap, start = 10, 3
    with NodeProxy(chain.deployment.rpc_url, NodeLimits(max_log_blocks=cap, wording=wording)) as node:
        answer = _rpc(node.url, "eth_getLogs", {"fromBlock": hex(start), "toBlock": hex(start + 2 * cap)})
        assert _result(node.url, "eth_getLogs", {"fromBlock": hex(start), "toBlock": hex(start + cap - 1)}) \
            is not None  # within the cap: answered
        assert node.stats.refused["range"] == 1
    assert answer["error"] == WORDINGS[wording](start, start + 2 * cap, cap)
    refusal = read_refusal(answer["error"])
    assert refusal is not None, answer["error"]
    assert refusal.provider != "any"  # read by the provider's own line, not a generic one
    assert refusal.cap in (None, cap)
    if refusal.last is not None:  # the range to try it names is the cap's worth from the start
        assert (refusal.first, refusal.last) == (start, start + cap - 1)


def test_without_a_wording_a_range_is_refused_as_before(chain: Chain) -> None:
    with NodeProxy(chain.deployment.rpc_url, NodeLimits(max_log_blocks=5)) as node:
        answer = _rpc(node.url, "eth_getLogs", {"fromBlock": "0x0", "toBlock": "0x9"})
    assert answer["error"] == {"code": -32600, "message": "eth_getLogs is limited to a 5 block range"}


def test_an_unknown_wording_is_refused() -> None:
    with pytest.raises(ValueError, match="no wording"):
        NodeProxy("http://127.0.0.1:1", NodeLimits(wording="nobody"))


# ------------------------------------------------------------------------ the backend behind

def test_a_backend_behind_lacks_the_newest_blocks_and_says_so_as_nodes_do(busy_top: Chain) -> None:
    chain = busy_top
    upstream = chain.deployment.rpc_url
    head = int(_result(upstream, "eth_blockNumber"), 16)
    lagging = head - BEHIND
    top = _result(upstream, "eth_getBlockByNumber", hex(head), False)
    seen = _result(upstream, "eth_getBlockByNumber", hex(lagging), False)
    with NodeProxy(upstream, NodeLimits(behind_share=1.0, behind_blocks=BEHIND)) as node:
        url = node.url
        assert int(_result(url, "eth_blockNumber"), 16) == lagging
        assert _result(url, "eth_getBlockByNumber", "latest", False) == seen  # its real logsBloom with it
        assert _result(url, "eth_getBlockByNumber", hex(lagging), False) == seen
        assert _result(url, "eth_getBlockByNumber", hex(head), False) is None
        assert _result(url, "eth_getBlockByNumber", "safe", False) == \
            _result(upstream, "eth_getBlockByNumber", "safe", False)  # anvil's safe block is far below
        assert _result(url, "eth_getBlockByHash", top["hash"], False) is None
        assert _result(url, "eth_getBlockByHash", seen["hash"], False) == seen

        # A range: cut at its head, silently; over blocks it lacks only: [].
        everything = {"fromBlock": hex(lagging - 1), "toBlock": hex(head)}
        assert _result(url, "eth_getLogs", everything) == \
            _result(upstream, "eth_getLogs", {**everything, "toBlock": hex(lagging)})
        assert _result(upstream, "eth_getLogs", {**everything, "fromBlock": hex(lagging + 1)})  # what it lacks
        assert _result(url, "eth_getLogs", {**everything, "fromBlock": hex(lagging + 1)}) == []

        # By hash: refused for a block it lacks.
        assert _rpc(url, "eth_getLogs", {"blockHash": top["hash"]})["error"] == \
            {"code": -32000, "message": "unknown block"}
        assert _result(url, "eth_getLogs", {"blockHash": seen["hash"]}) == \
            _result(upstream, "eth_getLogs", {"blockHash": seen["hash"]})
        assert _result(url, "eth_getBlockReceipts", hex(head)) is None
        assert _result(url, "eth_getBlockReceipts", top["hash"]) is None
        assert _result(url, "eth_getBlockReceipts", seen["hash"]) == \
            _result(upstream, "eth_getBlockReceipts", seen["hash"])

        # State: none above its head; latest is its head.
        call = {"to": chain.deployment.usdc_address, "data": TOTAL_SUPPLY}
        assert _rpc(url, "eth_call", call, hex(head))["error"] == {"code": -32000, "message": "header not found"}
        assert _result(url, "eth_call", call, hex(lagging)) == _result(upstream, "eth_call", call, hex(lagging))
        assert _result(url, "eth_call", call, "latest") == _result(upstream, "eth_call", call, hex(lagging))
        assert node.stats.behind == node.stats.total_calls


def test_each_call_of_a_batch_is_routed_apart_by_the_seeded_draw(chain: Chain) -> None:
    head = int(_result(chain.deployment.rpc_url, "eth_blockNumber"), 16)
    limits = NodeLimits(behind_share=0.5, behind_blocks=BEHIND, seed=7)
    with NodeProxy(chain.deployment.rpc_url, limits) as node:
        batch = [{"jsonrpc": "2.0", "id": n, "method": "eth_blockNumber", "params": []} for n in range(50)]
        answers = httpx.post(node.url, json=batch).json()
        heads = [int(answer["result"], 16) for answer in answers]
        assert set(heads) == {head, head - BEHIND}
        assert node.stats.behind == heads.count(head - BEHIND)
        assert 10 < node.stats.behind < 40
    with NodeProxy(chain.deployment.rpc_url, limits) as again:  # the same seed, the same routes
        assert [int(answer["result"], 16) for answer in httpx.post(again.url, json=batch).json()] == heads


def test_a_node_at_the_head_answers_as_anvil_does(busy_top: Chain) -> None:
    upstream = busy_top.deployment.rpc_url
    head = _result(upstream, "eth_getBlockByNumber", "latest", False)
    with NodeProxy(upstream, NodeLimits()) as node:
        assert _result(node.url, "eth_blockNumber") == head["number"]
        assert _result(node.url, "eth_getBlockByHash", head["hash"], False) == head
        assert _result(node.url, "eth_getLogs", {"blockHash": head["hash"]}) == \
            _result(upstream, "eth_getLogs", {"blockHash": head["hash"]})
        assert _result(node.url, "eth_getBlockReceipts", head["number"]) == \
            _result(upstream, "eth_getBlockReceipts", head["number"])
        assert node.stats.behind == 0


# ------------------------------------------------------------------------ the node that omits, once

def test_a_blank_bloom_once_omits_the_blocks_logs_the_first_time_only(busy_top: Chain) -> None:
    upstream = busy_top.deployment.rpc_url
    header = _result(upstream, "eth_getBlockByNumber", "latest", False)
    number = int(header["number"], 16)
    logs = _result(upstream, "eth_getLogs", {"blockHash": header["hash"]})
    receipts = _result(upstream, "eth_getBlockReceipts", header["hash"])
    assert logs and header["logsBloom"] != EMPTY_BLOOM
    with NodeProxy(upstream, NodeLimits(blank_bloom_once=frozenset({number}))) as node:
        url = node.url
        assert _result(url, "eth_getBlockByHash", header["hash"], False) == {**header, "logsBloom": EMPTY_BLOOM}
        assert _result(url, "eth_getLogs", {"blockHash": header["hash"]}) == []
        assert _result(url, "eth_getBlockReceipts", hex(number)) == [{**receipt, "logs": []} for receipt in receipts]
        assert node.stats.blanked == 3
        assert _result(url, "eth_getBlockByNumber", hex(number), False) == header
        assert _result(url, "eth_getBlockByHash", header["hash"], False) == header
        assert _result(url, "eth_getLogs", {"blockHash": header["hash"]}) == logs
        assert _result(url, "eth_getBlockReceipts", header["hash"]) == receipts
        assert _result(url, "eth_getBlockByNumber", hex(number - 1), False)["logsBloom"] != EMPTY_BLOOM  # others
        assert node.stats.blanked == 3


# ------------------------------------------------------------------------ the gap

def test_the_gaps_blocks_link_and_are_empty_by_hash_too(busy_top: Chain) -> None:
    upstream = busy_top.deployment.rpc_url
    after, gap = int(_result(upstream, "eth_blockNumber"), 16) - BEHIND - 3, 1_000  # the gap before the approval
    first_real = after + 1  # the first real block after the gap, presented as after + gap + 1
    before = _result(upstream, "eth_getBlockByNumber", hex(after), False)
    with NodeProxy(upstream, NodeLimits(gap=gap, gap_after=after)) as node:
        url = node.url
        chained = [_result(url, "eth_getBlockByNumber", hex(n), False) for n in (after + 1, after + 2)]
        assert chained[0]["parentHash"] == before["hash"]
        assert chained[1]["parentHash"] == chained[0]["hash"]
        last = _result(url, "eth_getBlockByNumber", hex(after + gap), False)
        child = _result(url, "eth_getBlockByNumber", hex(after + gap + 1), False)
        assert child["parentHash"] == last["hash"]
        assert child["hash"] == _result(upstream, "eth_getBlockByNumber", hex(first_real), False)["hash"]
        assert (last["transactions"], last["logsBloom"]) == ([], EMPTY_BLOOM)

        assert _result(url, "eth_getBlockByHash", last["hash"], False) == last
        assert _result(url, "eth_getLogs", {"blockHash": last["hash"]}) == []
        assert _result(url, "eth_getBlockReceipts", last["hash"]) == []
        assert _result(url, "eth_getBlockReceipts", hex(after + gap)) == []

        assert _result(url, "eth_getBlockByHash", child["hash"], False) == child
        receipts = _result(url, "eth_getBlockReceipts", child["hash"])
        assert {receipt["blockNumber"] for receipt in receipts} == {child["number"]}
        assert {log["blockNumber"] for receipt in receipts for log in receipt["logs"]} == {child["number"]}
        assert _result(url, "eth_getBlockReceipts", child["number"]) == receipts
        logs = _result(url, "eth_getLogs", {"blockHash": child["hash"]})
        assert logs and {log["blockNumber"] for log in logs} == {child["number"]}
