"""The indexer behind a misbehaving RPC: a proxy between it and anvil injects HTTP errors, rate
limits, slow, truncated and dropped answers and getLogs range refusals on a fixed schedule; the
mirror still ends equal to the chain. Deterministic errors fail fast instead of retrying forever.
"""

from __future__ import annotations

import itertools
import json
import math
import threading
import time
import urllib.request
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from contextlib import ExitStack
from typing import Any

import pytest

from contracts.demo import seed_demo_activity
from indexer.errors import IndexerError, RangeTooLarge, RetriesExhausted, RpcError
from indexer.models import SyncState
from indexer.rpc import Backoff, RpcClient
from indexer.sync import Indexer
from tests.chain import USDC, Chain
from tests.indexer.conftest import catch_up_to_head, config_for
from tests.indexer.mirror import assert_live_consumer_is_current, assert_mirror_equals_chain
from tests.indexer.test_rpc import Reply, answer_each, calls_of, local_server

CLIENT_TIMEOUT = 0.3
NODE_LOG_LIMIT = 3  # blocks per eth_getLogs the proxied node accepts
# A refusal of the span [start, end] when the node takes at most NODE_LOG_LIMIT blocks.
Refusal = Callable[[int, int], dict[str, Any]]
# The node's own answer to eth_getLogs of [start, end]: None, or (what to count it as, a JSON-RPC error).
LogsRule = Callable[[int, int], tuple[str, dict[str, Any]] | None]


def _errors(request: Any, error: dict[str, Any]) -> Reply:
    return answer_each(request, lambda call: {"error": error})


class FaultProxy:
    """Forwards JSON-RPC to `upstream`, but answers the n-th request with `schedule[n % len]` when that
    names a fault, and eth_getLogs with `refuse_logs(start, end)` when that returns an error."""

    def __init__(self, upstream: str, schedule: Sequence[str | None] = (),
                 refuse_logs: LogsRule = lambda start, end: None) -> None:
        self.upstream = upstream
        self.schedule = schedule
        self.refuse_logs = refuse_logs
        self.injected: Counter[str] = Counter()
        self.methods: Counter[str] = Counter()
        self._numbers = itertools.count()
        self._lock = threading.Lock()

    def forward(self, request: Any) -> bytes:
        upstream = urllib.request.Request(self.upstream, data=json.dumps(request).encode(),
                                          headers={"Content-Type": "application/json"})
        with urllib.request.urlopen(upstream, timeout=10) as response:
            body: bytes = response.read()
            return body

    def __call__(self, request: Any) -> Reply:
        with self._lock:
            number = next(self._numbers)
            self.methods.update(call["method"] for call in calls_of(request))
        fault = self.schedule[number % len(self.schedule)] if self.schedule else None
        if fault is not None:
            self._count(fault)
            return FAULTS[fault](self, request)
        if not isinstance(request, list) and request["method"] == "eth_getLogs" and \
                "fromBlock" in request["params"][0]:  # by range, not by a block's hash
            query = request["params"][0]
            refusal = self.refuse_logs(int(query["fromBlock"], 16), int(query["toBlock"], 16))
            if refusal is not None:
                name, error = refusal
                self._count(name)
                return _errors(request, error)
        return Reply(body=self.forward(request))

    def _count(self, fault: str) -> None:
        with self._lock:
            self.injected[fault] += 1


def _truncated(proxy: FaultProxy, request: Any) -> Reply:
    body = proxy.forward(request)
    return Reply(body=body[: len(body) // 2])


def _cut_mid_body(proxy: FaultProxy, request: Any) -> Reply:
    body = proxy.forward(request)
    return Reply(body=body[: len(body) // 2], declared_length=len(body))


FAULTS: dict[str, Callable[[FaultProxy, Any], Reply]] = {
    "http 500": lambda proxy, request: Reply(status=500, body=b"Internal Server Error"),
    "http 502": lambda proxy, request: Reply(status=502, body=b"<html>Bad Gateway</html>"),
    "http 503": lambda proxy, request: Reply(status=503, body=b"Service Unavailable"),
    "http 429": lambda proxy, request: Reply(status=429, headers={"Retry-After": "0"}, body=b"Too Many Requests"),
    "slow": lambda proxy, request: Reply(body=proxy.forward(request), delay=CLIENT_TIMEOUT + 0.15),
    "truncated body": _truncated,
    "connection cut mid-body": _cut_mid_body,
    "connection dropped": lambda proxy, request: Reply(drop=True),
    "rate limit exceeded": lambda proxy, request: _errors(request, {"code": -32005, "message": "rate limit exceeded"}),
}
# Each fault once per round, each followed by a clean answer, so no request fails twice in a row.
SCHEDULE = [step for fault in FAULTS for step in (fault, None)]


def infura(start: int, end: int) -> dict[str, Any]:
    return {"code": -32005, "message": "query returned more than 10000 results",
            "data": {"from": hex(start), "limit": 10000, "to": hex(start + NODE_LOG_LIMIT - 1)}}


def alchemy(start: int, end: int) -> dict[str, Any]:
    return {"code": -32602, "message": "Log response size exceeded. You can make eth_getLogs requests with up to a "
            "2K block range and no limit on the response size, or you can request any block range with a cap of 10K "
            "logs in the response. Based on your parameters and the response size limit, this block range should "
            f"work: [{hex(start)}, {hex(start + NODE_LOG_LIMIT - 1)}]"}


def maximum_block_range(start: int, end: int) -> dict[str, Any]:
    return {"code": -32000, "message": f"exceed maximum block range: {NODE_LOG_LIMIT}"}


REFUSALS: dict[str, Refusal] = {"infura range": infura, "alchemy range": alchemy,
                                "maximum block range": maximum_block_range}


def limited_node() -> LogsRule:
    """Refuses spans above NODE_LOG_LIMIT, in each provider's words in turn."""
    wordings = itertools.cycle(REFUSALS.items())

    def refuse(start: int, end: int) -> tuple[str, dict[str, Any]] | None:
        if end - start + 1 <= NODE_LOG_LIMIT:
            return None
        name, refusal = next(wordings)
        return name, refusal(start, end)

    return refuse


@pytest.fixture
def proxied(chain: Chain, db: None) -> Iterator[Callable[..., Indexer]]:
    """Makes an indexer that reaches the chain only through the given proxy, with a fast-retrying
    client; every block by range unless `live_blocks` says otherwise."""
    with ExitStack() as servers:
        def make(proxy: FaultProxy, live_blocks: int = 0) -> Indexer:
            url = servers.enter_context(local_server(proxy))
            rpc = RpcClient(url, timeout=CLIENT_TIMEOUT, backoff=Backoff(base=0.005, cap=0.02, attempts=12))
            indexer = Indexer(config_for(chain, BOUNTY_RPC_URL=url, BOUNTY_LIVE_BLOCKS=live_blocks), rpc=rpc)
            indexer.ensure_deployment()
            return indexer

        yield make


def _bounties(chain: Chain, count: int) -> list[int]:
    """Creates `count` bounties; the blocks they are in."""
    chain.send(chain.usdc.functions.approve(chain.board.address, 2**256 - 1), chain.account(1))
    return [chain.send(chain.board.functions.createBounty(f"ipfs://bounty-{n}", b"\x07" * 32, (n + 1) * USDC, 3600),
                       chain.account(1))["blockNumber"] for n in range(count)]


def test_the_mirror_equals_the_chain_through_every_kind_of_rpc_fault(
        chain: Chain, proxied: Callable[..., Indexer]) -> None:
    seed_demo_activity(chain.w3, chain.deployment)
    proxy = FaultProxy(chain.deployment.rpc_url, SCHEDULE, limited_node())
    indexer = proxied(proxy, live_blocks=4)  # both phases: ranges, then the last blocks one by one

    catch_up_to_head(indexer)
    _bounties(chain, 3)
    catch_up_to_head(indexer)

    assert_mirror_equals_chain(chain.board, indexer.deployment)
    assert_live_consumer_is_current(indexer.deployment)
    assert set(FAULTS) <= set(proxy.injected), f"faults never injected: {set(FAULTS) - set(proxy.injected)}"
    # A range refusal teaches the fetcher the node's limit, so later ranges keep to it: a refusal
    # or two (the ranges in flight together), whichever wording comes first; every other fault
    # recurs throughout.
    refusals = sum(n for kind, n in proxy.injected.items() if kind in REFUSALS)
    assert 1 <= refusals <= 4, proxy.injected
    assert all(n >= 2 for kind, n in proxy.injected.items() if kind not in REFUSALS), proxy.injected
    assert proxy.methods["eth_getBlockByNumber"] > 0 and proxy.methods["eth_getLogs"] > 0


def test_a_refusal_nobody_recognises_is_halved_down_to_one_block_then_stops_naming_it(
        chain: Chain, proxied: Callable[..., Indexer]) -> None:
    _bounties(chain, 1)
    invalid = {"code": -32602, "message": "invalid argument 0: hex string without 0x prefix"}
    proxy = FaultProxy(chain.deployment.rpc_url, refuse_logs=lambda start, end: ("invalid argument", invalid))
    indexer = proxied(proxy)

    started = time.monotonic()
    with pytest.raises(IndexerError, match=r"even for the single block .*invalid argument"):
        catch_up_to_head(indexer)
    assert proxy.methods["eth_getLogs"] == 1 + math.ceil(math.log2(indexer.config.initial_span))  # no retries
    assert time.monotonic() - started < 2


def test_a_node_that_does_not_serve_get_logs_stops_the_indexer_at_once(
        chain: Chain, proxied: Callable[..., Indexer]) -> None:
    _bounties(chain, 1)
    missing = {"code": -32601, "message": "the method eth_getLogs does not exist/is not available"}
    proxy = FaultProxy(chain.deployment.rpc_url, refuse_logs=lambda start, end: ("not served", missing))
    indexer = proxied(proxy)
    with pytest.raises(IndexerError, match=r"cannot serve eth_getLogs: .*does not exist") as caught:
        catch_up_to_head(indexer)
    assert not isinstance(caught.value, RangeTooLarge | RetriesExhausted | RpcError)
    assert proxy.methods["eth_getLogs"] == 1


def test_a_block_the_node_refuses_even_alone_stops_the_indexer_after_the_blocks_before_it(
        chain: Chain, proxied: Callable[..., Indexer]) -> None:
    crowded = _bounties(chain, 4)[2]

    def too_many_results(start: int, end: int) -> tuple[str, dict[str, Any]] | None:
        if not start <= crowded <= end:
            return None
        hint = {"data": {"from": hex(start), "limit": 10000, "to": hex(crowded - 1)}} if start < crowded else {}
        return "too many results", {"code": -32005, "message": "query returned more than 10000 results", **hint}

    indexer = proxied(FaultProxy(chain.deployment.rpc_url, refuse_logs=too_many_results))
    with pytest.raises(IndexerError, match=f"refuses eth_getLogs even for the single block {crowded}: "
                                           "query returned more than 10000 results"):
        catch_up_to_head(indexer)
    assert SyncState.objects.get(deployment=indexer.deployment).last_indexed_block == crowded - 1
