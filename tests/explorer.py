"""An explorer made on loopback: Blockscout's `/api/eth-rpc` over a chain (anvil, or a
tests/node_proxy.py in front of it that presents a longer chain), as Blockscout documents it.

`eth_getLogs` over any block range, no cap; at most `page` logs a call (1,000, as Blockscout; fewer
to page through a short history), in block and log order; the next page asked with
`paging_options` (`blockNumber`, `logIndex` of the last log received, hex without 0x); logs
without `blockTimestamp`. `eth_blockNumber` is the explorer's own
head: `lag` blocks behind the chain's. Errors in Blockscout's shapes: a JSON-RPC error that is a
bare string, HTTP 429 `{"message": "Too Many Requests"}` over its budget of requests a second.

And the ways an explorer fails: it can omit logs from its index (`omit`: (block, log index)), name
a block with a hash of another chain (`wrong_hash`), answer 500 to the next `fail_next`
requests or to every page from a block on (`fail_from_block`), time out on ranges wider than
`slow_over` blocks (an answer after `slow_seconds`), ask for any wait over its budget
(`retry_after`), and go away (`go_down`, `come_back`). It counts what it was asked.
"""

from __future__ import annotations

import asyncio
import time
from collections import Counter, deque
from dataclasses import dataclass, field
from typing import Any

from aiohttp import web

from tests.loopback import LoopbackServer, numbered_span


@dataclass
class ExplorerFaults:
    lag: int = 0  # blocks its index is behind the chain's head
    page: int = 1_000  # logs a call at most
    omit: set[tuple[int, int]] = field(default_factory=set)  # (block, log index) missing from its index
    wrong_hash: set[int] = field(default_factory=set)  # blocks it names with a hash the chain does not have
    fail_next: int = 0  # the next requests answered HTTP 500
    fail_from_block: int | None = None  # a getLogs page asked from this block on answered HTTP 500 (it breaks mid-way)
    requests_per_second: int | None = None
    retry_after: str | None = None  # the Retry-After of its 429s over that budget (none, as Blockscout's)
    slow_over: int | None = None  # getLogs ranges wider than this many blocks answered after `slow_seconds`
    slow_seconds: float = 0.0
    gateway_timeout_over: int | None = None  # getLogs ranges wider than this answered 504 by a proxy in front


@dataclass
class ExplorerStats:
    requests: int = 0
    calls: Counter[str] = field(default_factory=Counter)
    failed: int = 0  # answered 500, 429, or too late


class FakeBlockscout(LoopbackServer):
    name = "fake explorer"
    path = "/api/eth-rpc"

    def __init__(self, chain_url: str, faults: ExplorerFaults | None = None) -> None:
        super().__init__()
        self.chain_url = chain_url
        self.faults = faults or ExplorerFaults()
        self.stats = ExplorerStats()
        self.url = f"http://127.0.0.1:{self.port}/api/eth-rpc"
        self._arrivals: deque[float] = deque()

    # ---------------------------------------------------------------- serving

    async def handle(self, request: web.Request) -> web.StreamResponse:
        if (cut := self.cut_if_down(request)) is not None:
            return cut
        body = await request.json()
        self.stats.requests += 1
        faults = self.faults
        if faults.fail_next > 0:
            faults.fail_next -= 1
            self.stats.failed += 1
            return web.json_response({"message": "Internal server error"}, status=500)
        if self._breaks_at(body):
            self.stats.failed += 1
            return web.json_response({"message": "Internal server error"}, status=500)
        if self._gateway_times_out(body):
            self.stats.failed += 1
            return web.Response(status=504, content_type="text/html",
                                text="<html><head><title>504 Gateway Time-out</title></head></html>")
        if self._over_budget():
            self.stats.failed += 1
            headers = {"Retry-After": faults.retry_after} if faults.retry_after is not None else None
            return web.json_response({"message": "Too Many Requests"}, status=429, headers=headers)
        if isinstance(body, list):
            return web.json_response([await self._answer(call) for call in body])
        return web.json_response(await self._answer(body))

    def _breaks_at(self, body: Any) -> bool:
        """Whether this request asks for a page from `fail_from_block` on."""
        block = self.faults.fail_from_block
        if block is None or not isinstance(body, dict) or body.get("method") != "eth_getLogs":
            return False
        query = (body.get("params") or [{}])[0]
        paging = query.get("paging_options") if isinstance(query, dict) else None
        return isinstance(paging, dict) and int(paging["blockNumber"], 16) >= block

    def _gateway_times_out(self, body: Any) -> bool:
        """Whether a proxy in front gives up on this request: a getLogs over more than
        `gateway_timeout_over` blocks (numbered ones: the first log's query is let through)."""
        wider, span = self.faults.gateway_timeout_over, numbered_span(body)
        return wider is not None and span is not None and span > wider

    def _over_budget(self) -> bool:
        budget = self.faults.requests_per_second
        now = time.monotonic()
        while self._arrivals and self._arrivals[0] <= now - 1.0:
            self._arrivals.popleft()
        self._arrivals.append(now)
        return budget is not None and len(self._arrivals) > budget

    async def _answer(self, call: dict[str, Any]) -> dict[str, Any]:
        method, params = str(call.get("method")), list(call.get("params") or [])
        self.stats.calls[method] += 1
        reply: dict[str, Any] = {"jsonrpc": "2.0", "id": call.get("id")}
        if method == "eth_blockNumber":
            return {**reply, "result": hex(max(0, await self._head() - self.faults.lag))}
        if method == "eth_getLogs" and params and isinstance(params[0], dict):
            try:
                return {**reply, "result": await self._logs(params[0])}
            except ValueError as exc:
                return {**reply, "error": str(exc)}
        return {**reply, "error": "Action not found."}  # Blockscout's words for a method it does not serve

    async def _head(self) -> int:
        return int((await self._chain("eth_blockNumber", []))["result"], 16)

    async def _logs(self, query: dict[str, Any]) -> list[dict[str, Any]]:
        indexed_to = await self._head() - self.faults.lag
        first = self._block(query.get("fromBlock", "earliest"), indexed_to)
        last = min(self._block(query.get("toBlock", "latest"), indexed_to), indexed_to)
        if first > last:
            return []
        if self.faults.slow_over is not None and last - first + 1 > self.faults.slow_over:
            self.stats.failed += 1
            await asyncio.sleep(self.faults.slow_seconds)
        filtered = {key: query[key] for key in ("address", "topics") if key in query}
        answer = await self._chain("eth_getLogs", [{**filtered, "fromBlock": hex(first), "toBlock": hex(last)}])
        if "error" in answer:
            raise ValueError(str(answer["error"].get("message")))
        paging = query.get("paging_options")
        after = (int(paging["blockNumber"], 16), int(paging["logIndex"], 16)) if isinstance(paging, dict) else None
        logs = []
        for log in sorted(answer["result"], key=lambda log: (int(log["blockNumber"], 16), int(log["logIndex"], 16))):
            key = (int(log["blockNumber"], 16), int(log["logIndex"], 16))
            if (after is not None and key <= after) or key in self.faults.omit:
                continue
            shown = {name: value for name, value in log.items() if name != "blockTimestamp"}
            if key[0] in self.faults.wrong_hash:
                shown["blockHash"] = "0x" + "ab" * 32
            logs.append(shown)
            if len(logs) == self.faults.page:
                break
        return logs

    @staticmethod
    def _block(tag: Any, head: int) -> int:
        if tag == "earliest":
            return 0
        if tag in ("latest", "safe", "finalized", None):
            return head
        try:
            return int(str(tag), 16)
        except ValueError:
            raise ValueError(f"Invalid block number: {tag}") from None

    async def _chain(self, method: str, params: list[Any]) -> dict[str, Any]:
        async with self._session.post(self.chain_url, json={"jsonrpc": "2.0", "id": 1, "method": method,
                                                            "params": params}) as response:
            answer: dict[str, Any] = await response.json()
            return answer
