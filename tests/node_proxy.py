"""A node far away, made on loopback: a JSON-RPC proxy in front of anvil that behaves as hosted
endpoints do. It adds latency to every request, refuses eth_getLogs over a block range cap,
limits the calls per second (each call of a batch counted, 429 with Retry-After over the
budget), caps batches, and can present a longer chain than anvil holds: `gap` empty blocks of
its own inserted after block `gap_after`, so that a range scan over 100,000 blocks costs
nothing to mine.

Used by bench/remote_sync.py and by the indexer's tests of a far node (tests/indexer/test_far_node.py).
It counts what it saw: requests, calls by method, refusals, the most requests in flight at once
and the most calls that arrived within any one second.
"""

from __future__ import annotations

import asyncio
import collections
import json
import threading
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from aiohttp import ClientSession, web
from eth_utils.crypto import keccak

from contracts.devchain import free_port


@dataclass
class NodeLimits:
    latency: float = 0.0  # seconds added to every request
    max_log_blocks: int | None = None  # eth_getLogs range cap
    requests_per_second: int | None = None  # calls per second (sliding window), each call of a batch counted
    max_batch: int | None = None  # calls per batch
    gap: int = 0  # empty blocks presented after block `gap_after`
    gap_after: int = 0


@dataclass
class NodeStats:
    requests: int = 0
    calls: Counter[str] = field(default_factory=Counter)
    refused: Counter[str] = field(default_factory=Counter)  # by reason
    max_in_flight: int = 0
    max_calls_per_second: int = 0  # the most calls that arrived in any window of one second

    @property
    def total_calls(self) -> int:
        return sum(self.calls.values())


class NodeProxy:
    def __init__(self, upstream: str, limits: NodeLimits) -> None:
        self.upstream = upstream
        self.limits = limits
        self.stats = NodeStats()
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}/v2/bench-secret-key"
        self._arrivals: collections.deque[float] = collections.deque()  # one entry per call, last second
        # Called with each call before it is answered, on the proxy's thread (a test's hook: the
        # chain may be changed there, between two answers).
        self.before_call: Callable[[dict[str, Any]], None] | None = None
        self._in_flight = 0
        self._loop = asyncio.new_event_loop()
        self._ready = threading.Event()
        self._thread = threading.Thread(target=self._serve, name="node-proxy", daemon=True)

    def __enter__(self) -> NodeProxy:
        self._thread.start()
        if not self._ready.wait(10):
            raise RuntimeError("the node proxy did not start")
        return self

    def __exit__(self, *exc_info: object) -> None:
        asyncio.run_coroutine_threadsafe(self._shutdown(), self._loop).result(10)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(5)
        self._loop.close()

    async def _shutdown(self) -> None:
        await self._runner.cleanup()  # closes the connections still open and their handlers
        await self._session.close()

    def reset_stats(self) -> NodeStats:
        """The counts so far; counting starts again."""
        stats, self.stats = self.stats, NodeStats()
        return stats

    # ---------------------------------------------------------------- serving

    def _serve(self) -> None:
        asyncio.set_event_loop(self._loop)
        app = web.Application(client_max_size=64 * 1024 * 1024)
        app.router.add_post("/{tail:.*}", self._handle)
        self._runner = runner = web.AppRunner(app, access_log=None)
        self._loop.run_until_complete(runner.setup())
        self._loop.run_until_complete(web.TCPSite(runner, "127.0.0.1", self.port).start())
        self._session = self._loop.run_until_complete(self._open_session())
        self._ready.set()
        self._loop.run_forever()

    @staticmethod
    async def _open_session() -> ClientSession:
        return ClientSession()

    async def _handle(self, request: web.Request) -> web.Response:
        self._in_flight += 1
        self.stats.max_in_flight = max(self.stats.max_in_flight, self._in_flight)
        try:
            body = await request.json()
            calls = body if isinstance(body, list) else [body]
            self.stats.requests += 1
            self.stats.calls.update(str(call.get("method")) for call in calls)
            refusal = self._over_budget(len(calls))
            await asyncio.sleep(self.limits.latency)
            if refusal is not None:
                self.stats.refused["rate limit"] += 1
                return web.Response(status=429, headers={"Retry-After": "1"}, text="Too Many Requests")
            if self.limits.max_batch is not None and len(calls) > self.limits.max_batch:
                self.stats.refused["batch"] += 1
                return web.json_response({"jsonrpc": "2.0", "id": None, "error": {
                    "code": -32600,
                    "message": f"batch of {len(calls)} requests exceeds the limit of {self.limits.max_batch}"}})
            answers = [await self._answer(call) for call in calls]
            return web.json_response(answers if isinstance(body, list) else answers[0])
        finally:
            self._in_flight -= 1

    def _over_budget(self, calls: int) -> str | None:
        now = time.monotonic()
        while self._arrivals and self._arrivals[0] <= now - 1.0:
            self._arrivals.popleft()
        self._arrivals.extend([now] * calls)
        self.stats.max_calls_per_second = max(self.stats.max_calls_per_second, len(self._arrivals))
        budget = self.limits.requests_per_second
        return "rate limit" if budget is not None and len(self._arrivals) > budget else None

    async def _answer(self, call: dict[str, Any]) -> dict[str, Any]:
        if self.before_call is not None:
            self.before_call(call)
        method, params = call.get("method"), list(call.get("params") or [])
        reply = {"jsonrpc": "2.0", "id": call.get("id")}
        if method == "eth_getLogs":
            query = dict(params[0])
            start, end = (self._number(query[key]) for key in ("fromBlock", "toBlock"))
            cap = self.limits.max_log_blocks
            if cap is not None and end - start + 1 > cap:
                self.stats.refused["range"] += 1
                return {**reply, "error": {"code": -32600,
                                           "message": f"eth_getLogs is limited to a {cap} block range"}}
            return {**reply, "result": await self._logs(query, start, end)}
        if method == "eth_blockNumber":
            head = int((await self._upstream("eth_blockNumber", []))["result"], 16)
            return {**reply, "result": hex(self._virtual(head))}
        if method == "eth_getBlockByNumber":
            return {**reply, "result": await self._header(params[0], params[1] if len(params) > 1 else False)}
        if method == "eth_call" and len(params) > 1 and str(params[1]).startswith("0x"):
            params[1] = hex(self._real(int(params[1], 16)))
        return {**reply, **{key: value for key, value in (await self._upstream(str(method), params)).items()
                            if key in ("result", "error")}}

    # ---------------------------------------------------------------- the presented chain

    def _virtual(self, real: int) -> int:
        return real + self.limits.gap if real > self.limits.gap_after else real

    def _real(self, virtual: int) -> int:
        """The real block a presented one stands for (a block of the gap: the one before it)."""
        if virtual <= self.limits.gap_after:
            return virtual
        return max(self.limits.gap_after, virtual - self.limits.gap)

    def _in_gap(self, virtual: int) -> bool:
        return self.limits.gap_after < virtual <= self.limits.gap_after + self.limits.gap

    @staticmethod
    def _number(value: Any) -> int:
        return int(str(value), 16)

    async def _header(self, tag: Any, full: Any) -> Any:
        if isinstance(tag, str) and not tag.startswith("0x"):  # latest, safe, finalized...
            header = (await self._upstream("eth_getBlockByNumber", [tag, full]))["result"]
            if header:
                header = {**header, "number": hex(self._virtual(int(header["number"], 16)))}
            return header
        number = self._number(tag)
        if self._in_gap(number):
            base = (await self._upstream("eth_getBlockByNumber", [hex(self.limits.gap_after), False]))["result"]
            return {**base, "number": hex(number), "hash": _gap_hash(number),
                    "parentHash": _gap_hash(number - 1), "timestamp": hex(int(base["timestamp"], 16) + number)}
        header = (await self._upstream("eth_getBlockByNumber", [hex(self._real(number)), full]))["result"]
        return {**header, "number": hex(number)} if header else header

    async def _logs(self, query: dict[str, Any], start: int, end: int) -> list[dict[str, Any]]:
        after = self.limits.gap_after
        spans = []  # real ranges outside the gap
        if start <= after:
            spans.append((start, min(end, after)))
        if end > after + self.limits.gap:
            spans.append((self._real(max(start, after + self.limits.gap + 1)), self._real(end)))
        logs: list[dict[str, Any]] = []
        for first, last in spans:
            answer = await self._upstream("eth_getLogs", [{**query, "fromBlock": hex(first), "toBlock": hex(last)}])
            if "error" in answer:
                raise RuntimeError(f"anvil refused eth_getLogs: {answer['error']}")
            logs.extend({**log, "blockNumber": hex(self._virtual(int(log["blockNumber"], 16)))}
                        for log in answer["result"])
        return logs

    async def _upstream(self, method: str, params: list[Any]) -> dict[str, Any]:
        payload = {"jsonrpc": "2.0", "id": 1, "method": method, "params": params}
        async with self._session.post(self.upstream, data=json.dumps(payload),
                                      headers={"Content-Type": "application/json"}) as response:
            answer: dict[str, Any] = await response.json(content_type=None)
            return answer


def _gap_hash(number: int) -> str:
    return "0x" + keccak(text=f"gap block {number}").hex()
