"""A node far away, made on loopback: a JSON-RPC proxy in front of anvil that behaves as hosted
endpoints do. It adds latency to every request, refuses eth_getLogs over a block range cap (in
the words of a named provider, if asked: `WORDINGS`), limits the calls per second (each call of
a batch counted, 429 with Retry-After over the budget), caps batches, and can present a longer
chain than anvil holds: `gap` empty blocks of its own inserted after block `gap_after`, so that a
range scan over 100,000 blocks costs nothing to mine.

Hosted endpoints are load balancers over backends that are not all at the head: a share of the
calls (`behind_share`, each call of a batch drawn apart) is answered as a backend `behind_blocks`
behind would, which lacks the newest blocks and says so in a backend's ways: a lower head, a
null header, a getLogs range silently cut at its head, "unknown block", "header not found". And
a node may omit, once, what it has (`blank_bloom_once`): a header whose logsBloom rules every log
out, a block's logs or receipts without their logs; asked again, it answers truly.

And a node may send what no client should have to take: its next requests answered 429 with any
Retry-After (`limited_next`, `retry_after`), with 4 KB of `[` (`deep_next`: too deep for any JSON
parser), or with the true answer dripped a few bytes every 50 ms over `drip_seconds` (`drip_next`); a getLogs
over more than `oversized_over` blocks answered with the true answer padded with blanks to
`oversized_bytes`, in chunks. It counts the answers the client hung up on before their end.

Used by bench/remote_sync.py and by the indexer's tests of a far node (tests/indexer/test_historical.py,
tests/indexer/test_node_proxy.py). It counts what it saw: requests, calls by method, refusals,
the most requests in flight at once, the most calls that arrived within any one second, the
calls the lagging backend answered and the answers blanked.
"""

from __future__ import annotations

import asyncio
import collections
import json
import math
import random
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from aiohttp import web
from eth_utils.crypto import keccak

from tests.loopback import LoopbackServer, numbered_span

EMPTY_BLOOM = "0x" + "00" * 256  # a logsBloom that rules every log out
DRIP_GAP = 0.05  # seconds between two pieces of a dripped answer


# ------------------------------------------------------------------------ providers' refusals

def _try(start: int, cap: int, separator: str = ", ") -> str:
    """The range a provider names as one to try instead: the cap's worth of blocks from `start`."""
    return f"[0x{start:x}{separator}0x{start + cap - 1:x}]"


# How each provider refuses an eth_getLogs range [start, end] over its cap, as the JSON-RPC error
# object it sends (start, end, cap) -> error; the texts are the ones indexer.refusals reads
# (tests/indexer/test_refusals.py holds them as captured). Those that name a range to try name
# [start, start + cap - 1], the cap standing for what fits their response-size limit.
WORDINGS: dict[str, Callable[[int, int, int], dict[str, Any]]] = {
    "alchemy-free": lambda start, end, cap: {
        "code": -32600,
        "message": f"Under the Free tier plan, you can make eth_getLogs requests with up to a {cap} block range. "
                   f"Based on your parameters, this block range should work: {_try(start, cap)}"},
    "alchemy-size": lambda start, end, cap: {
        "code": -32602,
        "message": "Log response size exceeded. You can make eth_getLogs requests with up to a 2K block range and no "
                   "limit on the response size, or you can request any block range with a cap of 10K logs in the "
                   f"response. Based on your parameters, this block range should work: {_try(start, cap)}"},
    "infura": lambda start, end, cap: {
        "code": -32005,
        "message": f"query returned more than 10000 results. Try with this block range {_try(start, cap)}.",
        "data": {"from": hex(start), "to": hex(start + cap - 1), "limit": 10000}},
    "tenderly": lambda start, end, cap: {
        "code": -32000,
        "message": f"Query returned more than 20000 results. Try with this block range {_try(start, cap, ',')}"},
    "thirdweb": lambda start, end, cap: {
        "code": -32602, "message": "invalid params",
        "data": f"range {end - start + 1} is bigger than range limit {cap}"},
    "quicknode": lambda start, end, cap: {"code": -32614, "message": f"eth_getLogs is limited to a {cap:,} range"},
    "ankr": lambda start, end, cap: {"code": -32600, "message": "block range is too wide"},
    "chainstack": lambda start, end, cap: {"code": -32000, "message": "Block range limit exceeded."},
    "blastapi": lambda start, end, cap: {"code": -32000,
                                         "message": f"Maximum allowed number of requested blocks is {cap}"},
    "drpc": lambda start, end, cap: {
        "code": -32602, "message": f"query exceeds max results 20000, retry with the range {start}-{start + cap - 1}"},
    "cloudflare": lambda start, end, cap: {"code": -32047,
                                           "message": f"'fromBlock'-'toBlock' range too large. Max range: {cap}"},
    "base": lambda start, end, cap: {"code": -32000, "message": f"please limit the query to at most {cap} blocks"},
    "publicnode": lambda start, end, cap: {"code": -32000, "message": f"exceed maximum block range: {cap}"},
    "op-proxyd": lambda start, end, cap: {"code": -32602, "message": f"block range greater than {cap} max"},
}


@dataclass
class NodeLimits:
    latency: float = 0.0  # seconds added to every request
    max_log_blocks: int | None = None  # eth_getLogs range cap
    wording: str | None = None  # the provider (a key of WORDINGS) whose words refuse a range over the cap
    requests_per_second: int | None = None  # calls per second (sliding window), each call of a batch counted
    max_batch: int | None = None  # calls per batch
    gap: int = 0  # empty blocks presented after block `gap_after`
    gap_after: int = 0
    behind_share: float = 0.0  # the share of calls (0..1) answered by a backend `behind_blocks` behind the head
    behind_blocks: int = 3
    seed: int = 0  # of the draw that routes each call to a backend
    blank_bloom_once: frozenset[int] = frozenset()  # blocks whose first header, logs by hash, receipts hold no log
    no_block_timestamps: bool = False  # logs without `blockTimestamp`, as nodes before geth 1.16 send them
    state_kept: int | None = None  # blocks below the head whose state it keeps (a full node): eth_getCode older fails
    empty_logs_once: frozenset[int] = frozenset()  # blocks whose first getLogs by hash answers [] (bloom true)
    slow_ranges: float = 0.0  # seconds before it answers a getLogs over two blocks or more (a node that times out)
    ranges_status: int | None = None  # the HTTP status a request of a getLogs over two blocks or more is answered
    retry_after: str = "1"  # the Retry-After of its 429s
    limited_next: int = 0  # the next requests answered 429 (each fault's count goes down as it is used)
    deep_next: int = 0  # the next requests answered 200 with 4 KB of `[`
    drip_next: int = 0  # the next requests' true answers, headers and all, sent a piece every 50 ms ...
    drip_seconds: float = 5.0  # ... over this long, whatever their size
    oversized_over: int | None = None  # getLogs over more blocks than this: the answer padded to `oversized_bytes`
    oversized_bytes: int = 0


@dataclass
class NodeStats:
    requests: int = 0
    calls: Counter[str] = field(default_factory=Counter)
    refused: Counter[str] = field(default_factory=Counter)  # by reason
    max_in_flight: int = 0
    max_calls_per_second: int = 0  # the most calls that arrived in any window of one second
    behind: int = 0  # calls answered by the backend behind the head
    blanked: int = 0  # answers that omitted a block's logs (blank_bloom_once)
    longest_gap: float = 0.0  # the longest time between two requests (seconds)
    faults: Counter[str] = field(default_factory=Counter)  # answers limited, deep, dripped, oversized
    cut_short: int = 0  # answers the client hung up on before their last byte
    lowest_block_read: int | None = None  # the lowest block of an eth_getLogs range or a header asked by number

    def read_block(self, number: int) -> None:
        self.lowest_block_read = number if self.lowest_block_read is None else min(self.lowest_block_read, number)
    last_arrival: float | None = None  # when the newest request came (time.monotonic())

    @property
    def total_calls(self) -> int:
        return sum(self.calls.values())


class NodeProxy(LoopbackServer):
    name = "node proxy"

    def __init__(self, upstream: str, limits: NodeLimits) -> None:
        if limits.wording is not None and limits.wording not in WORDINGS:
            raise ValueError(f"no wording {limits.wording!r}: one of {', '.join(WORDINGS)}")
        super().__init__()
        self.upstream = upstream
        self.limits = limits
        self.stats = NodeStats()
        self.url = f"http://127.0.0.1:{self.port}/v2/bench-secret-key"
        self._arrivals: collections.deque[float] = collections.deque()  # one entry per call, last second
        # Called with each call before it is answered, on the proxy's thread (a test's hook: the
        # chain may be changed there, between two answers).
        self.before_call: Callable[[dict[str, Any]], None] | None = None
        self._random = random.Random(limits.seed)
        self._blanked: set[tuple[str, int]] = set()  # (what, block) answered once already
        self._gap_hashes: dict[str, int] = {}  # the hashes of gap blocks handed out, to their numbers
        self._in_flight = 0

    def reset_stats(self) -> NodeStats:
        """The counts so far; counting starts again."""
        stats, self.stats = self.stats, NodeStats()
        return stats

    # ---------------------------------------------------------------- serving

    async def handle(self, request: web.Request) -> web.StreamResponse:
        if (cut := self.cut_if_down(request)) is not None:  # as a node gone away: no answer, the connection reset
            return cut
        self._in_flight += 1
        self.stats.max_in_flight = max(self.stats.max_in_flight, self._in_flight)
        try:
            body = await request.json()
            calls = body if isinstance(body, list) else [body]
            self.stats.requests += 1
            arrived = time.monotonic()
            if self.stats.last_arrival is not None:
                self.stats.longest_gap = max(self.stats.longest_gap, arrived - self.stats.last_arrival)
            self.stats.last_arrival = arrived
            self.stats.calls.update(str(call.get("method")) for call in calls)
            if self.limits.ranges_status is not None and any((numbered_span(call) or 0) > 1 for call in calls):
                return web.Response(status=self.limits.ranges_status, text=f"HTTP {self.limits.ranges_status}")
            if self._fault("limited_next"):
                return web.Response(status=429, headers={"Retry-After": self.limits.retry_after},
                                    text="Too Many Requests")
            if self._fault("deep_next"):
                return web.Response(body=b"[" * 4096, content_type="application/json")
            refusal = self._over_budget(len(calls))
            await asyncio.sleep(self.limits.latency)
            if refusal is not None:
                self.stats.refused["rate limit"] += 1
                return web.Response(status=429, headers={"Retry-After": self.limits.retry_after},
                                    text="Too Many Requests")
            if self.limits.max_batch is not None and len(calls) > self.limits.max_batch:
                self.stats.refused["batch"] += 1
                return web.json_response({"jsonrpc": "2.0", "id": None, "error": {
                    "code": -32600,
                    "message": f"batch of {len(calls)} requests exceeds the limit of {self.limits.max_batch}"}})
            answers = [await self._answer(call) for call in calls]
            answer = json.dumps(answers if isinstance(body, list) else answers[0]).encode()
            if self._fault("drip_next"):
                return await self._drip(request, answer)
            over = self.limits.oversized_over
            if over is not None and any((numbered_span(call) or 0) > over for call in calls):
                self.stats.faults["oversized"] += 1
                return await self._padded(request, answer)
            return web.Response(body=answer, content_type="application/json")
        finally:
            self._in_flight -= 1

    def _fault(self, name: str) -> bool:
        """Whether this request takes one of the next-requests faults (`limited_next`, ...)."""
        left = getattr(self.limits, name)
        if left <= 0:
            return False
        setattr(self.limits, name, left - 1)
        self.stats.faults[name.removesuffix("_next")] += 1
        return True

    async def _drip(self, request: web.Request, answer: bytes) -> web.StreamResponse:
        """The whole HTTP answer, status line and headers too, a piece every DRIP_GAP seconds over
        `drip_seconds`: each piece well within any read's timeout. The connection closed after it
        (or once the client has gone)."""
        transport = request.transport
        assert transport is not None
        raw = (b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nConnection: close\r\n"
               b"Content-Length: %d\r\n\r\n%s" % (len(answer), answer))
        piece = max(1, math.ceil(len(raw) * DRIP_GAP / self.limits.drip_seconds))
        try:
            for start in range(0, len(raw), piece):
                if transport.is_closing():
                    self.stats.cut_short += 1
                    break
                transport.write(raw[start : start + piece])
                await asyncio.sleep(DRIP_GAP)
        finally:
            transport.close()
        return web.Response()  # never sent: the connection is closed

    async def _padded(self, request: web.Request, answer: bytes) -> web.StreamResponse:
        """The answer followed by blanks up to `oversized_bytes`, in chunks of 64 KiB, of no
        declared length: a client learns its size only by reading it."""
        response = web.StreamResponse(headers={"Content-Type": "application/json"})
        await response.prepare(request)
        chunk, left = b" " * 65_536, self.limits.oversized_bytes - len(answer)
        try:
            await response.write(answer)
            while left > 0:
                await response.write(chunk[:left])
                left -= len(chunk)
            await response.write_eof()
        except ConnectionError:  # the client hung up
            self.stats.cut_short += 1
        return response

    def _over_budget(self, calls: int) -> str | None:
        now = time.monotonic()
        while self._arrivals and self._arrivals[0] <= now - 1.0:
            self._arrivals.popleft()
        self._arrivals.extend([now] * calls)
        self.stats.max_calls_per_second = max(self.stats.max_calls_per_second, len(self._arrivals))
        budget = self.limits.requests_per_second
        return "rate limit" if budget is not None and len(self._arrivals) > budget else None

    def _routed_behind(self) -> bool:
        """Whether the load balancer sends this call to the backend behind the others. Drawn for
        each call, those of one batch apart, as balancers spread a batch's calls over backends."""
        behind = self.limits.behind_share > 0 and self._random.random() < self.limits.behind_share
        self.stats.behind += behind
        return behind

    async def _answer(self, call: dict[str, Any]) -> dict[str, Any]:
        if self.before_call is not None:
            self.before_call(call)
        method, params = str(call.get("method")), list(call.get("params") or [])
        reply = {"jsonrpc": "2.0", "id": call.get("id")}
        return {**reply, **await self._answer_as(method, params, behind=self._routed_behind())}

    async def _answer_as(self, method: str, params: list[Any], *, behind: bool) -> dict[str, Any]:
        """The `result` or `error` of one call, as the backend it was routed to answers it: the
        one at the head, or (`behind`) the one that lacks the newest `behind_blocks` blocks."""
        if method == "eth_getLogs":
            query = dict(params[0])
            if "blockHash" in query:
                return await self._logs_by_hash(query, behind)
            start = await self._block_number(query.get("fromBlock", "latest"), behind)
            end = await self._block_number(query.get("toBlock", "latest"), behind)
            self.stats.read_block(start)
            cap = self.limits.max_log_blocks
            if cap is not None and end - start + 1 > cap:
                self.stats.refused["range"] += 1
                return {"error": self._range_refusal(start, end, cap)}
            if self.limits.slow_ranges and end > start:
                await asyncio.sleep(self.limits.slow_ranges)
            if behind:  # a backend answers for the blocks it has, and says nothing of the others
                end = min(end, await self._lagging_head())
                if start > end:
                    return {"result": []}
            return {"result": await self._logs(query, start, end)}
        if method == "eth_blockNumber":
            return {"result": hex(await self._lagging_head() if behind else await self._head())}
        if method == "eth_getBlockByNumber":
            if str(params[0]).startswith("0x"):
                self.stats.read_block(self._number(params[0]))
            header = await self._header_as(params[0], params[1] if len(params) > 1 else False, behind)
            return {"result": self._shown(header)}
        if method == "eth_getBlockByHash":
            header = await self._header_by_hash(params[0], params[1] if len(params) > 1 else False)
            if behind and header is not None and int(header["number"], 16) > await self._lagging_head():
                header = None
            return {"result": self._shown(header)}
        if method == "eth_getBlockReceipts":
            return await self._receipts(params[0], behind)
        if method == "eth_getCode" and len(params) > 1 and str(params[1]).startswith("0x"):
            number = self._number(params[1])
            if self.limits.state_kept is not None and number < await self._head() - self.limits.state_kept:
                return {"error": {"code": -32000, "message": "missing trie node 7f3a0c (path ) state is not available"}}
            params = [params[0], hex(self._real(number))]
        if method == "eth_call":
            block = params[1] if len(params) > 1 else "latest"
            if isinstance(block, dict) and "blockNumber" in block:  # EIP-1898
                block = block["blockNumber"]
            if behind and block == "latest":
                block = hex(await self._lagging_head())
            if isinstance(block, str) and block.startswith("0x"):
                number = self._number(block)
                if behind and number > await self._lagging_head():
                    return {"error": {"code": -32000, "message": "header not found"}}
                params = [params[0], hex(self._real(number)), *params[2:]]
        return self._kept(await self._upstream(method, params))

    @staticmethod
    def _kept(answer: dict[str, Any]) -> dict[str, Any]:
        return {key: value for key, value in answer.items() if key in ("result", "error")}

    def _range_refusal(self, start: int, end: int, cap: int) -> dict[str, Any]:
        if self.limits.wording is None:
            return {"code": -32600, "message": f"eth_getLogs is limited to a {cap} block range"}
        return WORDINGS[self.limits.wording](start, end, cap)

    # ---------------------------------------------------------------- the backend behind

    async def _head(self) -> int:
        """The presented chain's head."""
        return self._virtual(int((await self._upstream("eth_blockNumber", []))["result"], 16))

    async def _lagging_head(self) -> int:
        """The head of the backend behind: it has not seen the newest `behind_blocks` blocks yet."""
        return max(0, await self._head() - self.limits.behind_blocks)

    async def _header_as(self, tag: Any, full: Any, behind: bool) -> Any:
        """A header by number or tag, as the backend asked knows it: one behind knows no block above
        its head, and its latest (and safe or finalized, when those are above it) is its head."""
        if not behind:
            return await self._header(tag, full)
        head = await self._lagging_head()
        if tag == "latest":
            return await self._header(hex(head), full)
        if tag in ("safe", "finalized"):
            header = await self._header(tag, full)
            return header if header is not None and int(header["number"], 16) <= head else \
                await self._header(hex(head), full)
        if isinstance(tag, str) and tag.startswith("0x") and self._number(tag) > head:
            return None
        return await self._header(tag, full)  # earliest, pending: as the node at the head

    async def _block_number(self, tag: Any, behind: bool) -> int:
        """A block parameter's number: a tag is the one of its header, as the backend knows it."""
        if isinstance(tag, str) and tag.startswith("0x"):
            return self._number(tag)
        header = await self._header_as(tag, False, behind)
        return int(header["number"], 16)

    async def _number_of_hash(self, block_hash: str) -> int | None:
        """The presented number of the block with this hash, None when the node knows no such block."""
        if block_hash in self._gap_hashes:
            return self._gap_hashes[block_hash]
        header = (await self._upstream("eth_getBlockByHash", [block_hash, False]))["result"]
        return None if header is None else self._virtual(int(header["number"], 16))

    async def _unseen(self, number: int | None, behind: bool) -> bool:
        """Whether the backend behind lacks this block."""
        return behind and number is not None and number > await self._lagging_head()

    # ---------------------------------------------------------------- the node that omits, once

    def _blank_once(self, what: str, number: int) -> bool:
        """Whether this answer (`what`: header, logs, receipts) about block `number` is its first,
        and is to omit the block's logs. Later answers are true."""
        if number not in self.limits.blank_bloom_once or (what, number) in self._blanked:
            return False
        self._blanked.add((what, number))
        self.stats.blanked += 1
        return True

    def _shown(self, header: Any) -> Any:
        """A header as answered: the first one of a block of `blank_bloom_once` with a bloom that
        rules every log out."""
        if header is not None and self._blank_once("header", int(header["number"], 16)):
            return {**header, "logsBloom": EMPTY_BLOOM}
        return header

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

    def _gap_hash(self, number: int) -> str:
        """A gap block's hash, remembered so that the block can be asked for by it."""
        block_hash = _gap_hash(number)
        self._gap_hashes[block_hash] = number
        return block_hash

    def _presented(self, header: Any) -> Any:
        """A real header as presented: its number after the gap, and the first block after the gap
        a child of the gap's last (so that the presented chain links by parent hashes)."""
        if not header:
            return header
        number = self._virtual(int(header["number"], 16))
        header = {**header, "number": hex(number)}
        if self.limits.gap and number == self.limits.gap_after + self.limits.gap + 1:
            header["parentHash"] = self._gap_hash(number - 1)
        return header

    async def _header(self, tag: Any, full: Any) -> Any:
        if isinstance(tag, str) and not tag.startswith("0x"):  # latest, safe, finalized...
            return self._presented((await self._upstream("eth_getBlockByNumber", [tag, full]))["result"])
        number = self._number(tag)
        if self._in_gap(number):
            return await self._gap_header(number)
        real = hex(self._real(number))
        return self._presented((await self._upstream("eth_getBlockByNumber", [real, full]))["result"])

    async def _gap_header(self, number: int) -> dict[str, Any]:
        """An empty block of the gap: the header of the block before the gap, renumbered, rehashed,
        a second later a block, with no transactions and a bloom that holds no log."""
        base = (await self._upstream("eth_getBlockByNumber", [hex(self.limits.gap_after), False]))["result"]
        parent = base["hash"] if number == self.limits.gap_after + 1 else self._gap_hash(number - 1)
        return {**base, "number": hex(number), "hash": self._gap_hash(number), "parentHash": parent,
                "timestamp": hex(int(base["timestamp"], 16) + number), "transactions": [],
                "logsBloom": EMPTY_BLOOM}

    async def _header_by_hash(self, block_hash: Any, full: Any) -> Any:
        if block_hash in self._gap_hashes:
            return await self._gap_header(self._gap_hashes[block_hash])
        return self._presented((await self._upstream("eth_getBlockByHash", [block_hash, full]))["result"])

    def _presented_log(self, log: dict[str, Any]) -> dict[str, Any]:
        presented = {**log, "blockNumber": hex(self._virtual(int(log["blockNumber"], 16)))}
        if self.limits.no_block_timestamps:
            presented.pop("blockTimestamp", None)
        return presented

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
            logs.extend(self._presented_log(log) for log in answer["result"])
        return logs

    async def _logs_by_hash(self, query: dict[str, Any], behind: bool) -> dict[str, Any]:
        """eth_getLogs of one block by its hash (EIP-234, which anvil serves). A backend that lacks
        the block refuses it ("unknown block", as geth does for a hash it does not know) instead
        of answering `[]` as it does for a range."""
        block_hash = query["blockHash"]
        number = await self._number_of_hash(block_hash) if behind or self.limits.blank_bloom_once \
            or self.limits.empty_logs_once or block_hash in self._gap_hashes else None
        if await self._unseen(number, behind):
            return {"error": {"code": -32000, "message": "unknown block"}}
        if number in self.limits.empty_logs_once and ("emptied", number) not in self._blanked:
            self._blanked.add(("emptied", number))
            self.stats.blanked += 1
            return {"result": []}  # the header's bloom and the receipts still hold the logs
        if number is not None and self._in_gap(number):
            logs: list[dict[str, Any]] = []
        else:
            answer = await self._upstream("eth_getLogs", [query])
            if "error" in answer:
                return self._kept(answer)
            logs = [self._presented_log(log) for log in answer["result"]]
        return {"result": [] if number is not None and self._blank_once("logs", number) else logs}

    async def _receipts(self, block: Any, behind: bool) -> dict[str, Any]:
        """eth_getBlockReceipts by number, tag or hash (or EIP-1898's objects of either): null from a
        backend that lacks the block, as from a node for a block it has not seen."""
        if isinstance(block, dict):
            block = block.get("blockHash", block.get("blockNumber"))
        if isinstance(block, str) and len(block) == 66:  # a hash
            number = await self._number_of_hash(block) if behind or self.limits.blank_bloom_once \
                or block in self._gap_hashes else None
            asked = block
        else:
            number = await self._block_number(block, behind)
            asked = hex(self._real(number))
        if await self._unseen(number, behind):
            return {"result": None}
        if number is not None and self._in_gap(number):
            return {"result": []}
        answer = await self._upstream("eth_getBlockReceipts", [asked])
        if "error" in answer or answer.get("result") is None:
            return self._kept(answer)
        blank = number is not None and self._blank_once("receipts", number)
        return {"result": [{**receipt, "blockNumber": hex(self._virtual(int(receipt["blockNumber"], 16))),
                            "logs": [] if blank else [self._presented_log(log) for log in receipt["logs"]]}
                           for receipt in answer["result"]]}

    async def _upstream(self, method: str, params: list[Any]) -> dict[str, Any]:
        payload = {"jsonrpc": "2.0", "id": 1, "method": method, "params": params}
        async with self._session.post(self.upstream, data=json.dumps(payload),
                                      headers={"Content-Type": "application/json"}) as response:
            answer: dict[str, Any] = await response.json(content_type=None)
            return answer


def _gap_hash(number: int) -> str:
    return "0x" + keccak(text=f"gap block {number}").hex()
