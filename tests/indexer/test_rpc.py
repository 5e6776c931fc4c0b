"""The JSON-RPC client: which provider errors mean what, backoff, answers matched to calls by id,
and getLogs spans that adapt to what the node allows.

`LocalServer` is a real HTTP server on loopback whose answers a test scripts; the fault-injecting
proxy of `test_rpc_faults.py` is built on it too.
"""

from __future__ import annotations

import json
import re
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

import indexer.fetch as fetch_module
from indexer.errors import (
    IndexerError,
    NodeBehind,
    RangeTooLarge,
    RetriesExhausted,
    RpcError,
    Stopped,
    TransientRpcError,
)
from indexer.fetch import LogFetcher
from indexer.pacing import Pacer
from indexer.rpc import Backoff, RpcClient, classify_error

ADDRESS = "0x" + "ab" * 20


@dataclass
class Reply:
    """What the server sends back: a status, headers and body, or a cut or dropped connection."""

    status: int = 200
    body: bytes = b""
    headers: dict[str, str] = field(default_factory=dict)
    delay: float = 0.0
    declared_length: int | None = None  # a Content-Length above len(body) cuts the body short
    drop: bool = False  # close the connection without answering

    @classmethod
    def json(cls, value: Any, status: int = 200) -> Reply:
        return cls(status=status, body=json.dumps(value).encode())


Answer = Callable[[Any], Reply]


def _handler(answer: Answer) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"
        disable_nagle_algorithm = True

        def do_POST(self) -> None:
            reply = answer(json.loads(self.rfile.read(int(self.headers["Content-Length"]))))
            self.close_connection = reply.drop or reply.declared_length is not None
            if reply.delay:
                threading.Event().wait(reply.delay)
            if reply.drop:
                return
            try:
                self.send_response(reply.status)
                for name, value in {"Content-Type": "application/json", **reply.headers}.items():
                    self.send_header(name, value)
                self.send_header("Content-Length", str(reply.declared_length or len(reply.body)))
                self.end_headers()
                self.wfile.write(reply.body)
            except OSError:  # the client gave up waiting (a slow answer)
                self.close_connection = True

        def log_message(self, format: str, *args: Any) -> None:
            pass

    return Handler


@contextmanager
def local_server(answer: Answer) -> Iterator[str]:
    """A JSON-RPC endpoint on loopback answering each parsed request body with `answer`; yields its URL."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(answer))
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.01}, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()
        thread.join()


class Script:
    """Answers requests with the given replies in turn (the last one repeats), keeping the requests."""

    def __init__(self, *replies: Reply | Answer) -> None:
        self.replies = list(replies)
        self.requests: list[Any] = []

    def __call__(self, request: Any) -> Reply:
        self.requests.append(request)
        reply = self.replies[min(len(self.requests), len(self.replies)) - 1]
        return reply if isinstance(reply, Reply) else reply(request)


def calls_of(request: Any) -> list[dict[str, Any]]:
    return request if isinstance(request, list) else [request]


def answer_each(request: Any, answer: Callable[[dict[str, Any]], dict[str, Any]], status: int = 200) -> Reply:
    """One JSON-RPC answer (`{"result": ...}` or `{"error": ...}`) per call, shaped as the request: single or batch."""
    answers = [{"jsonrpc": "2.0", "id": call["id"], **answer(call)} for call in calls_of(request)]
    return Reply.json(answers if isinstance(request, list) else answers[0], status=status)


def results(request: Any) -> Reply:
    """Success for every call of the request, with the call's method name as the result."""
    return answer_each(request, lambda call: {"result": call["method"]})


def client(url: str, attempts: int = 4) -> RpcClient:
    """A client whose backoff starts at 10 ms: its retries wait, briefly."""
    return RpcClient(url, timeout=2, backoff=Backoff(base=0.01, cap=5, attempts=attempts))


def backoff_waits(caplog: pytest.LogCaptureFixture) -> list[float]:
    """The seconds waited before each retry, as the client's log says them."""
    said = (re.search(r"; retry \d+ in ([\d.]+) s$", record.getMessage()) for record in caplog.records
            if record.name == "indexer.rpc")
    return [float(match.group(1)) for match in said if match]


# ---------------------------------------------------------------- classify_error

INFURA_RESULTS = {"code": -32005, "message": "query returned more than 10000 results",
                  "data": {"from": "0x10", "limit": 10000, "to": "0x14"}}
ALCHEMY_RESPONSE_SIZE = {
    "code": -32602,
    "message": "Log response size exceeded. You can make eth_getLogs requests with up to a 2K block range and no "
               "limit on the response size, or you can request any block range with a cap of 10K logs in the "
               "response. Based on your parameters and the response size limit, this block range should work: "
               "[0x10, 0x4a]",
}
ALCHEMY_BLOCK_RANGE = {"code": -32600, "message": "You can make eth_getLogs requests with up to a 500 block range. "
                       "Based on your parameters, this block range should work: [0x1a30dfd, 0x1a30ff0]"}
MAXIMUM_BLOCK_RANGE = {"code": -32000, "message": "exceed maximum block range: 5"}


@pytest.mark.parametrize("error", [
    pytest.param({"code": -32005, "message": "rate limit exceeded"}, id="rate-limit-exceeded"),
    pytest.param({"code": -32005, "message": "daily request count exceeded, request rate limited"}, id="infura-daily"),
    pytest.param({"code": 429, "message": "Your app has exceeded its compute units per second capacity. If you have "
                                          "retries enabled, you can safely ignore this message."}, id="alchemy-cu"),
    pytest.param({"code": -32000, "message": "Too Many Requests"}, id="too-many-requests"),
    pytest.param({"code": -32603, "message": "request timed out, try again"}, id="try-again"),
])
def test_rate_limits_and_passing_node_trouble_are_transient(error: dict[str, Any]) -> None:
    assert type(classify_error(error)) is TransientRpcError


@pytest.mark.parametrize("error", [
    pytest.param({"code": -32602, "message": "invalid argument 0: hex string without 0x prefix"}, id="invalid-arg"),
    pytest.param({"code": 3, "message": "execution reverted", "data": "0x08c379a0"}, id="reverted"),
    pytest.param({"code": -32601, "message": "the method eth_foo does not exist/is not available"}, id="no-method"),
    pytest.param({}, id="empty-error-object"),
])
def test_other_errors_are_deterministic_and_keep_code_and_data(error: dict[str, Any]) -> None:
    exc = classify_error(error)
    assert type(exc) is RpcError
    assert (exc.code, exc.data) == (error.get("code"), error.get("data"))


# ---------------------------------------------------------------- Backoff

def test_backoff_grows_exponentially_with_jitter_and_is_capped() -> None:
    backoff = Backoff(base=0.1, cap=1.0, attempts=20)
    for attempt in range(20):
        ceiling = min(1.0, 0.1 * 2**attempt)
        delays = [backoff.delay(attempt) for _ in range(200)]
        assert all(0 <= delay <= ceiling for delay in delays)
        assert max(delays) > ceiling / 2, "full jitter spreads over the whole interval"


@pytest.mark.parametrize(("retry_after", "expected"), [(0.0, 0.0), (3.0, 3.0), (600.0, 5.0), (-1.0, 0.0)])
def test_backoff_honours_retry_after_within_the_cap(retry_after: float, expected: float) -> None:
    assert Backoff(base=1.0, cap=5.0).delay(6, retry_after) == expected


# ---------------------------------------------------------------- RpcClient

def test_batch_results_follow_the_calls_whatever_order_the_answers_come_in() -> None:
    def reversed_results(request: Any) -> Reply:
        return Reply.json(list(reversed(json.loads(results(request).body))))

    with local_server(reversed_results) as url:
        answers = client(url).batch([("eth_chainId", []), ("eth_blockNumber", []), ("net_version", [])])
    assert answers == ["eth_chainId", "eth_blockNumber", "net_version"]


def test_a_body_that_is_not_json_is_retried_after_a_backoff(caplog: pytest.LogCaptureFixture) -> None:
    script = Script(Reply(body=b'{"jsonrpc": "2.0", "id": 1, "res'), Reply(body=b"<html>502</html>"), results)
    with local_server(script) as url:
        assert client(url).call("eth_blockNumber", []) == "eth_blockNumber"
    assert len(script.requests) == 3
    waits = backoff_waits(caplog)
    assert len(waits) == 2 and all(0 <= s <= 0.02 for s in waits)


def test_a_body_that_is_never_json_exhausts_the_retries(caplog: pytest.LogCaptureFixture) -> None:
    script = Script(Reply(body=b"not json"))
    with local_server(script) as url, pytest.raises(RetriesExhausted, match=r"not JSON.*after 4 attempts"):
        client(url, attempts=4).call("eth_blockNumber", [])
    assert (len(script.requests), len(backoff_waits(caplog))) == (4, 3)


def test_an_answer_past_the_byte_cap_that_is_no_range_is_retried_and_counted_too_large() -> None:
    """Declared past the cap (not read at all) or found past it while read: either way retried."""
    padded = Reply(body=b'{"jsonrpc": "2.0", "id": 1, "result": "0x1"}' + b" " * 70_000)
    script = Script(padded, Reply(body=padded.body, declared_length=10**9), results)
    with local_server(script) as url:
        rpc = RpcClient(url, timeout=2, backoff=Backoff(base=0.01, cap=0.02), max_response_bytes=65_536)
        assert rpc.call("eth_blockNumber", []) == "eth_blockNumber"
    assert len(script.requests) == 3
    assert rpc.tally.take().errors == {"too_large": 2}


def test_http_429_waits_as_long_as_retry_after_says(caplog: pytest.LogCaptureFixture) -> None:
    script = Script(Reply(status=429, headers={"Retry-After": "3"}), Reply(status=503), results)
    with local_server(script) as url:
        started = time.monotonic()
        assert client(url).call("eth_chainId", []) == "eth_chainId"
        waited = time.monotonic() - started
    retry_after, backoff = backoff_waits(caplog)
    assert retry_after == 3.0 and waited >= 3.0
    assert 0 <= backoff <= 0.02


UNKNOWN_BLOCK = {"code": -32000, "message": "unknown block"}  # a backend that lacks the block asked by hash


def test_a_block_the_node_lacks_is_asked_again_after_the_first_steps_wait_each_time(
        caplog: pytest.LogCaptureFixture) -> None:
    """The realtime phase's bounded retries (behind_retries): behind a load balancer the next
    request likely meets another backend, so the wait never grows (grown, the eighth could be
    1.28 s here)."""
    script = Script(lambda request: answer_each(request, lambda call: {"error": UNKNOWN_BLOCK}))
    with local_server(script) as url, pytest.raises(NodeBehind, match="unknown block"):
        client(url).call("eth_getLogs", [{"blockHash": "0x" + "ab" * 32}], behind_retries=8)
    waits = backoff_waits(caplog)
    assert len(script.requests) == 9 and len(waits) == 8
    assert all(0 <= wait <= 0.01 for wait in waits), waits


def test_another_http_status_fails_at_once() -> None:
    script = Script(Reply(status=403, body=b"forbidden: bad API key"))
    with local_server(script) as url, pytest.raises(RpcError, match=r"HTTP 403.*bad API key") as caught:
        client(url).call("eth_chainId", [])
    assert type(caught.value) is RpcError
    assert len(script.requests) == 1


@pytest.mark.parametrize("status", [400, 413])
def test_a_range_refusal_sent_with_an_http_error_status_is_a_range_error(status: int) -> None:
    script = Script(lambda request: answer_each(request, lambda call: {"error": ALCHEMY_BLOCK_RANGE}, status))
    with local_server(script) as url, pytest.raises(RangeTooLarge):
        client(url).call("eth_getLogs", [{}])


def test_a_single_error_answering_a_whole_batch_is_classified() -> None:
    rate_limit = {"code": -32005, "message": "rate limit exceeded"}
    rate_limited = Reply.json({"jsonrpc": "2.0", "id": None, "error": rate_limit})
    script = Script(rate_limited, results)
    with local_server(script) as url:
        assert client(url).batch([("eth_chainId", []), ("eth_blockNumber", [])]) == ["eth_chainId", "eth_blockNumber"]
    assert len(script.requests) == 2


def test_an_error_for_one_call_of_a_batch_raises_it() -> None:
    def second_fails(request: Any) -> Reply:
        first, second = request
        reverted = {"code": 3, "message": "execution reverted"}
        return Reply.json([{"jsonrpc": "2.0", "id": first["id"], "result": "0x1"},
                           {"jsonrpc": "2.0", "id": second["id"], "error": reverted}])

    with local_server(Script(second_fails)) as url, pytest.raises(RpcError, match="execution reverted"):
        client(url).batch([("eth_chainId", []), ("eth_call", [])])


def test_a_batch_answer_missing_a_call_is_retried() -> None:
    def first_only(request: Any) -> Reply:
        return Reply.json([{"jsonrpc": "2.0", "id": request[0]["id"], "result": "0x1"}])

    script = Script(first_only, results)
    with local_server(script) as url:
        assert client(url).batch([("eth_chainId", []), ("net_version", [])]) == ["eth_chainId", "net_version"]
    assert len(script.requests) == 2


def test_a_rate_limit_is_never_fatal_however_often_it_comes() -> None:
    script = Script(*[Reply(status=429, headers={"Retry-After": "0"})] * 12, results)
    with local_server(script) as url:
        assert client(url, attempts=4).call("eth_chainId", []) == "eth_chainId"
    assert len(script.requests) == 13


def test_a_rate_limit_inside_the_json_rpc_answer_is_never_fatal_either() -> None:
    limited = Reply.json({"jsonrpc": "2.0", "id": None, "error": {"code": -32005, "message": "rate limit exceeded"}})
    script = Script(*[limited] * 6, results)
    with local_server(script) as url:
        assert client(url, attempts=2).call("eth_chainId", []) == "eth_chainId"


def _refuse_batches_over(limit: int, message: str) -> Answer:
    def answer(request: Any) -> Reply:
        if isinstance(request, list) and len(request) > limit:
            return Reply.json({"jsonrpc": "2.0", "id": None,
                               "error": {"code": -32600, "message": message.format(n=len(request), limit=limit)}})
        return results(request)

    return answer


@pytest.mark.parametrize(("limit", "message"), [
    (10, "batch of {n} requests exceeds the limit of {limit}"),
    (3, "Batch size too large"),
    (1, "batch requests are not supported"),
])
def test_a_batch_the_node_refuses_for_its_size_is_split_and_later_ones_keep_to_the_size(limit: int,
                                                                                      message: str) -> None:
    script = Script(_refuse_batches_over(limit, message))
    calls = [("eth_getBlockByNumber", [hex(n), False]) for n in range(25)]
    with local_server(script) as url:
        rpc = client(url)
        assert rpc.batch(calls) == ["eth_getBlockByNumber"] * 25
        assert rpc.max_batch <= limit
        refused = len(script.requests)
        rpc.batch(calls)
    sizes = [len(request) if isinstance(request, list) else 1 for request in script.requests[refused:]]
    assert max(sizes) <= limit and sum(sizes) == 25  # no refusal the second time


def test_a_batch_that_keeps_meeting_the_rate_limit_is_halved() -> None:
    def per_second_budget_of_four(request: Any) -> Reply:
        if isinstance(request, list) and len(request) > 4:
            return Reply(status=429, headers={"Retry-After": "0"})
        return results(request)

    script = Script(per_second_budget_of_four)
    with local_server(script) as url:
        rpc = client(url)
        assert rpc.batch([("eth_chainId", [])] * 16) == ["eth_chainId"] * 16
    assert rpc.max_batch <= 4


def test_a_batch_is_never_larger_than_the_plans_budget() -> None:
    script = Script(results)
    with local_server(script) as url:
        rpc = RpcClient(url, pacer=Pacer(requests_per_second=5))
        rpc.batch([("eth_chainId", [])] * 12)
    assert [len(request) for request in script.requests] == [5, 5, 2]


def test_request_ids_are_never_reused() -> None:
    script = Script(results)
    with local_server(script) as url:
        rpc = client(url)
        rpc.call("eth_chainId", [])
        rpc.batch([("eth_chainId", []), ("eth_blockNumber", [])])
        rpc.call("eth_chainId", [])
    ids = [call["id"] for request in script.requests for call in (request if isinstance(request, list) else [request])]
    assert ids == [1, 2, 3, 4]


# ---------------------------------------------------------------- LogFetcher

class LogsNode:
    """An eth_getLogs endpoint that refuses spans above `limit` with `refusal(from, to)`; keeps the spans asked."""

    def __init__(self, limit: int | None = None,
                 refusal: Callable[[int, int], dict[str, Any]] = lambda start, end: MAXIMUM_BLOCK_RANGE) -> None:
        self.limit = limit
        self.refusal = refusal
        self.ranges: list[tuple[int, int]] = []

    def __call__(self, request: Any) -> Reply:
        start, end = (int(request["params"][0][key], 16) for key in ("fromBlock", "toBlock"))
        self.ranges.append((start, end))
        if self.limit is not None and end - start + 1 > self.limit:
            return answer_each(request, lambda call: {"error": self.refusal(start, end)})
        return answer_each(request, lambda call: {"result": []})

    @property
    def spans(self) -> list[int]:
        return [end - start + 1 for start, end in self.ranges]


@contextmanager
def fetcher(node: LogsNode, span: int, max_span: int = 50_000) -> Iterator[LogFetcher]:
    with local_server(node) as url:
        yield LogFetcher(client(url), ADDRESS, span=span, max_span=max_span)


def fetch_all(logs: LogFetcher, start: int, end: int) -> list[int]:
    """Fetches [start, end] to the end; the ends of the ranges returned."""
    ends = []
    while start <= end:
        to, _ = logs.fetch(start, end)
        ends.append(to)
        start = to + 1
    return ends


def test_the_span_doubles_on_each_success_up_to_the_maximum() -> None:
    node = LogsNode()
    with fetcher(node, span=2, max_span=16) as logs:
        fetch_all(logs, 100, 100 + 2 + 4 + 8 + 16 + 16 + 16 - 1)
    assert node.spans == [2, 4, 8, 16, 16, 16]
    assert node.ranges[0] == (100, 101)


def test_a_range_cut_short_by_the_end_does_not_grow_the_span() -> None:
    node = LogsNode()
    with fetcher(node, span=8) as logs:
        assert logs.fetch(10, 12)[0] == 12
        assert logs.span == 8


def _infura(start: int, end: int) -> dict[str, Any]:
    return {**INFURA_RESULTS, "data": {"from": hex(start), "limit": 10000, "to": hex(start + 4)}}


def _alchemy(start: int, end: int) -> dict[str, Any]:
    return {"code": -32600, "message": "You can make eth_getLogs requests with up to a 2K block range. Based on your "
                                       f"parameters, this block range should work: [{hex(start)}, {hex(start + 4)}]"}


@pytest.mark.parametrize("refusal", [_infura, _alchemy])
def test_a_refused_range_shrinks_to_the_end_the_node_suggests(refusal: Callable[[int, int], dict[str, Any]]) -> None:
    node = LogsNode(limit=5, refusal=refusal)
    with fetcher(node, span=1_000) as logs:
        assert logs.fetch(0x100, 0x10000)[0] == 0x104
    assert node.ranges == [(0x100, 0x100 + 999), (0x100, 0x104)]


@pytest.mark.parametrize("message", ["exceed maximum block range: 5", "eth_getLogs is limited to a 5 range"])
def test_a_refused_range_shrinks_to_the_maximum_span_the_node_names(message: str) -> None:
    node = LogsNode(limit=5, refusal=lambda start, end: {"code": -32000, "message": message})
    with fetcher(node, span=1_000) as logs:
        assert logs.fetch(0, 10_000)[0] == 4
    assert node.ranges == [(0, 999), (0, 4)]


@pytest.mark.parametrize("refusal", [
    pytest.param(lambda start, end: {"code": -32600, "message": "block range too high"}, id="no-hint"),
    pytest.param(lambda start, end: {**INFURA_RESULTS, "data": {"from": hex(start), "to": hex(start - 1)}},
                 id="suggested-end-before-the-start"),
    pytest.param(lambda start, end: {"code": -32000, "message": "exceed maximum block range: 5000"},
                 id="named-maximum-not-below-the-span"),
])
def test_a_refused_range_is_halved_when_the_node_says_nothing_usable(
        refusal: Callable[[int, int], dict[str, Any]]) -> None:
    node = LogsNode(limit=10, refusal=refusal)
    with fetcher(node, span=64) as logs:
        assert logs.fetch(100, 1_000)[0] == 107
    assert node.spans == [64, 32, 16, 8]


def test_a_log_outside_the_range_asked_for_is_refused_naming_the_answer() -> None:
    def stray(request: Any) -> Reply:
        return answer_each(request, lambda call: {"result": [{"blockNumber": "0x99", "logIndex": "0x0"}]})

    with local_server(stray) as url, pytest.raises(IndexerError, match=r"for blocks 16-31 with a log of block 153"):
        LogFetcher(client(url), ADDRESS, span=16).fetch(16, 100)


def test_a_single_block_the_node_refuses_stops_the_fetcher() -> None:
    node = LogsNode(limit=0, refusal=lambda start, end: {"code": -32600, "message": "block range too high"})
    with fetcher(node, span=4) as logs, pytest.raises(IndexerError, match="even for the single block 42"):
        logs.fetch(42, 100)
    assert node.spans == [4, 2, 1]


def test_every_call_and_every_failure_is_tallied_by_method_and_kind() -> None:
    script = Script(
        Reply(status=429), Reply(status=503), Reply(delay=0.5, body=b"{}"), Reply(status=504),  # a gateway's timeout
        Reply.json({"jsonrpc": "2.0", "id": 5, "error": {"code": -32000, "message": "rate limit exceeded"}}),
        results,  # the sixth attempt succeeds
        lambda request: answer_each(request, lambda call: {
            "error": {"code": -32005, "message": "query returned more than 10000 results"}}),
        lambda request: answer_each(request, lambda call: {"error": {"code": -32601, "message": "method not found"}}),
    )
    with local_server(script) as url:
        rpc = RpcClient(url, timeout=0.2, backoff=Backoff(base=0.001, attempts=8))
        assert rpc.call("eth_blockNumber", []) == "eth_blockNumber"
        with pytest.raises(RangeTooLarge):
            rpc.call("eth_getLogs", [{}])
        with pytest.raises(RpcError, match="method not found"):
            rpc.batch([("eth_foo", []), ("eth_foo", [])])
    counts = rpc.tally.take()
    assert counts.calls == {"eth_blockNumber": 6, "eth_getLogs": 1, "eth_foo": 2}
    assert counts.errors == {"rate_limited": 2, "server_error": 1, "timeout": 2, "range_limit": 1, "other": 1}
    assert rpc.tally.take().calls == {}  # taken: the tally starts again


def test_once_stopped_no_request_is_sent_and_a_retry_wait_ends_at_once() -> None:
    script = Script(Reply(status=503))
    with local_server(script) as url:
        rpc = RpcClient(url, timeout=2, backoff=Backoff(base=30, cap=30, attempts=3))
        stopper = threading.Timer(0.2, rpc.stop.set)
        stopper.start()
        started = time.monotonic()
        with pytest.raises(Stopped, match="retry"):
            rpc.call("eth_blockNumber", [])
        assert time.monotonic() - started < 1
        with pytest.raises(Stopped, match="before a request"):
            rpc.call("eth_blockNumber", [])
    assert len(script.requests) == 1


# ---------------------------------------------------------------- each kind of refusal learned once

def _refuse_with(message: str, data: Any = None) -> Callable[[int, int], dict[str, Any]]:
    return lambda start, end: {"code": -32000, "message": message, **({"data": data} if data is not None else {})}


@pytest.mark.parametrize("refusal", [
    pytest.param(_refuse_with("block range is too wide"), id="ankr-no-number"),
    pytest.param(lambda start, end: {"code": -32602, "message": f"query exceeds max results 20000, retry with the "
                                                                f"range {start}-{start + 39}"}, id="drpc-range"),
    pytest.param(lambda start, end: {"code": -32602, "message": "invalid params",
                                     "data": f"range {end - start + 1} is bigger than range limit 40"}, id="thirdweb"),
    pytest.param(_refuse_with("query timeout exceeded"), id="too-much"),
    pytest.param(_refuse_with("something nobody wrote down"), id="unrecognised"),
])
def test_a_refusal_is_learned_once_and_the_span_never_grows_past_it_again(
        refusal: Callable[[int, int], dict[str, Any]]) -> None:
    node = LogsNode(limit=40, refusal=refusal)
    with fetcher(node, span=16) as logs:
        fetch_all(logs, 0, 40 * 100)
    refused = [span for span in node.spans if span > 40]
    assert len(refused) == 1, node.spans
    assert max(node.spans[node.spans.index(refused[0]) + 1:]) <= 40


def test_a_ceiling_without_a_named_cap_is_probed_upwards_only_rarely() -> None:
    node = LogsNode(limit=40, refusal=_refuse_with("block range is too wide"))
    with fetcher(node, span=64) as logs:
        fetch_all(logs, 0, 32 * 1_000)
    refusals = sum(1 for span in node.spans if span > 40)
    assert 1 < refusals <= 1 + 1_000 // fetch_module.PROBE_EVERY


def test_a_node_behind_the_range_is_asked_again_for_the_same_range() -> None:
    answers = iter([{"code": -32019, "message": "block is out of range"}] * 2)
    ranges: list[tuple[int, int]] = []

    def behind_then_answers(request: Any) -> Reply:
        ranges.append((int(request["params"][0]["fromBlock"], 16), int(request["params"][0]["toBlock"], 16)))
        error = next(answers, None)
        return answer_each(request, lambda call: {"error": error} if error else {"result": []})

    with local_server(behind_then_answers) as url:
        logs = LogFetcher(client(url), ADDRESS, span=32)
        assert logs.fetch(100, 1_000)[0] == 131
    assert ranges == [(100, 131)] * 3
    assert logs.span == 64  # nothing shrank


def test_a_node_that_does_not_serve_get_logs_stops_the_fetcher_saying_so() -> None:
    node = LogsNode(limit=0, refusal=lambda start, end: {"code": -32601, "message": "the method eth_getLogs does "
                                                                                     "not exist/is not available"})
    with fetcher(node, span=4) as logs, pytest.raises(IndexerError, match="cannot serve eth_getLogs"):
        logs.fetch(42, 100)
    assert node.spans == [4]
