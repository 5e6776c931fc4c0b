"""A JSON-RPC client that tells transient failures from deterministic ones.

Transient (retried with capped exponential backoff and jitter): timeouts (the client's own, and
HTTP 504 and 524: a proxy in front that gave up waiting), connection resets, HTTP 429 and
5xx, malformed bodies (not JSON: truncated, or nested too deep; answers missing a call), and
JSON-RPC errors that say "rate limit" or "try again". A rate limit is never fatal: it is retried
for as long as the indexer runs, after the node's Retry-After (at most `max_retry_after` seconds:
an impatient client, the explorer's, gives up at once on a longer one), with fewer requests in
flight (indexer.pacing). Deterministic (raised at once, `RpcError`): any other JSON-RPC error or
HTTP status. A getLogs range the node refuses raises `RangeTooLarge`, carrying the span or the
end block the node's message allows, where it names one. A node behind the block asked for
(NodeBehind) is retried too; where the caller bounds those retries (`behind_retries`: the realtime
phase, behind a load balancer whose next request likely meets another backend), each waits the
backoff's first step, never a grown one.

Nothing the node sends can hold or break the client. The request's timeout bounds the whole of
it (connection, request, headers and body: a node that drips its answer a byte at a time times
out as a silent one does), and its answer is read up to `max_response_bytes` at most: an answer
past it is `too_large`, which splits a getLogs range as a node's "too many results" does
(RangeTooLarge) and is retried otherwise.

Batches adapt to the node: one the node refuses for its size (`BatchTooLarge`: "batch of 60
requests exceeds the limit of 10", or no batches at all) is split, and later batches keep to
the size it allowed; a batch the plan's budget cannot admit in one second is split before it
is sent, and one that keeps meeting rate limits is halved.

Every call and every failure is tallied (`RpcTally`) for the indexer's metrics. A stop request
(`stop`, set by SIGTERM) ends a wait between retries at once, and ends a wait for an answer
through `interrupt_wait`, which the signal handler calls: a blocking socket read resumes after a
signal (PEP 475), so only an exception raised by the handler ends it.
"""

from __future__ import annotations

import ipaddress
import itertools
import json
import logging
import random
import re
import threading
import time
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, NoReturn
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

import httpcore
import httpx
import orjson

from bounty_client.metadata import nests_deeper_than
from indexer.errors import (
    BatchTooLarge,
    NodeBehind,
    RangeTooLarge,
    RetriesExhausted,
    RpcError,
    Stopped,
    TransientRpcError,
    WaitTooLong,
)
from indexer.pacing import Pacer, Ticket
from indexer.refusals import RefusalKind, read_refusal

logger = logging.getLogger(__name__)


# The kinds of failure the metrics count (bounty_indexer_rpc_errors_total{kind}).
# "explorer": a failed request to the explorer, or the explorer set aside (indexer.explorer).
# "malformed": an answer that is not JSON or is nested deeper than MAX_DEPTH; "too_large": one past
# max_response_bytes.
ERROR_KINDS = ("timeout", "rate_limited", "server_error", "node_behind", "range_limit", "batch_limit", "malformed",
               "too_large", "other", "explorer")


_answer_awaited = False  # the main thread waits for the node's answer (see interrupt_wait)


def interrupt_wait() -> None:
    """For the SIGTERM handler: raises Stopped if the main thread is waiting for the node's
    answer, ending the wait at once instead of at the request's timeout."""
    global _answer_awaited
    if _answer_awaited:
        _answer_awaited = False  # once: a second signal must not raise again in the clean-up
        raise Stopped("stopped while waiting for the node's answer")


@dataclass
class RpcCounts:
    """JSON-RPC calls by method and failures by kind (bounty_indexer_rpc_requests_total and
    bounty_indexer_rpc_errors_total)."""

    calls: Counter[str] = field(default_factory=Counter)
    errors: Counter[str] = field(default_factory=Counter)
    last_sent: float | None = None  # when the newest of these calls was sent (wall-clock seconds)
    phases: Counter[str] = field(default_factory=Counter)  # the calls by the indexer's phase that made them
    waits_capped: int = 0  # Retry-After waits the node asked past max_retry_after, waited only that long


# The indexer's phases, as the calls are counted for them (bounty_indexer_rpc_phase_calls_total,
# /health's rpc_calls_by_phase): the start-up checks, the historical phase (ranges, and the node's
# proof of the blocks an explorer named), the calls to the explorer itself (indexer.explorer),
# following the head (its polls, the realtime phase's blocks, reorganisation checks), the second
# reading, the proof of the mirror against the contract's state (indexer.proof).
PHASES = ("startup", "historical", "explorer", "realtime", "reread", "proof")


class RpcTally:
    """What a client has done since the last `take`, counted from any thread.

    A reader process tallies its own and hands the counts over with each batch, so that the
    metrics of the indexer process count every call, whichever process made it."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._counts = RpcCounts()
        self.last_sent: float | None = None  # when the client last sent a request, whatever `take` took

    def calls(self, methods: Sequence[str], phase: str) -> None:
        with self._lock:
            self._counts.calls.update(methods)
            self._counts.phases[phase] += len(methods)
            self._counts.last_sent = self.last_sent = time.time()

    def error(self, kind: str) -> None:
        with self._lock:
            self._counts.errors[kind] += 1

    def wait_capped(self) -> None:
        with self._lock:
            self._counts.waits_capped += 1

    def absorb(self, counts: RpcCounts, *, phase: str) -> None:
        """Another client's calls, counted for `phase`, and its failures as of kind `phase` (the
        explorer's, which the indexer's metrics count beside the node's)."""
        with self._lock:
            self._counts.calls.update(counts.calls)
            self._counts.phases[phase] += sum(counts.calls.values())
            self._counts.errors[phase] += sum(counts.errors.values())

    def take(self) -> RpcCounts:
        """The counts so far; the tally starts again from zero."""
        with self._lock:
            taken, self._counts = self._counts, RpcCounts()
        return taken


_BATCH_HINTS = re.compile(
    r"batch.*(?:limit|exceed|too (?:large|big|many)|not (?:supported|allowed|permitted)|max|disabled)|"
    r"(?:limit|exceed|too (?:large|big|many)|maximum|max).*batch",
    re.IGNORECASE,
)
_BATCH_LIMIT = re.compile(r"(?:limit|maximum|max)(?: size)?(?: of| is|:)?\s*(\d+)", re.IGNORECASE)
_NO_BATCHES = re.compile(r"not (?:supported|allowed|permitted)|disabled", re.IGNORECASE)
_RATE_LIMITED = re.compile(r"rate limit|too many requests", re.IGNORECASE)
# A proxy in front gave up waiting for the server: a gateway (504), Cloudflare (524). Counted as
# timeouts, as the client's own are: a range an explorer times out on is split (indexer.explorer).
_TIMEOUT_STATUSES = frozenset({504, 524})
_TRANSIENT_HINTS = re.compile(r"rate limit|too many requests|try again|temporarily|timeout|timed out|busy|overload",
                              re.IGNORECASE)
_NOT_SERVED = re.compile(r"method not found|does not exist|is not available|not supported|unsupported method",
                         re.IGNORECASE)


# Path segments that name a route, not a key: "rpc", "v2", "eth", "mainnet".
_ROUTE_SEGMENT = re.compile(r"[a-z][a-z-]{0,11}|v\d{1,2}")
REDACTED = "***"


def redact_url(url: str) -> str:
    """The node's URL as logs and messages may show it: providers put the API key in the path
    (`/v2/<key>`), the query (`?apikey=<key>`) or the user part, so those are masked but for
    the path's route words."""
    parts = urlsplit(url)
    host = parts.hostname or ""
    netloc = f"[{host}]" if ":" in host else host
    if parts.port is not None:
        netloc += f":{parts.port}"
    if parts.username or parts.password:
        netloc = f"{REDACTED}@{netloc}"
    path = "/".join(segment if not segment or _ROUTE_SEGMENT.fullmatch(segment) else REDACTED
                    for segment in parts.path.split("/"))
    query = urlencode([(name, REDACTED) for name, _ in parse_qsl(parts.query, keep_blank_values=True)], safe="*")
    return urlunsplit((parts.scheme, netloc, path, query, ""))


def classify_error(error: dict[str, Any] | str, method: str | None = None) -> Exception:
    """The exception a JSON-RPC error object stands for, answering a call of `method` (None: not
    known). Range refusals (indexer.refusals) are read for eth_getLogs only; a node that lags
    behind the block asked for (NodeBehind) for any method. An error that is a bare string (as
    Blockscout's /api/eth-rpc sends them) is read as its message."""
    if not isinstance(error, dict):
        error = {"message": str(error)}
    message = str(error.get("message", "unknown JSON-RPC error"))
    code = error.get("code")
    data = error.get("data")
    if _BATCH_HINTS.search(message):
        if _NO_BATCHES.search(message):
            return BatchTooLarge(f"the node serves no batches: {message}", max_size=1, code=code, data=data)
        limit = _BATCH_LIMIT.search(message)
        return BatchTooLarge(f"the node refused a batch: {message}", max_size=int(limit.group(1)) if limit else None,
                             code=code, data=data)
    limited = code == 429 or _RATE_LIMITED.search(message)
    refusal = None if limited or code == -32601 else read_refusal(error)
    if refusal is not None and refusal.kind == RefusalKind.NODE_BEHIND:
        return NodeBehind(f"JSON-RPC error {code}: {message} (the node lags behind the block asked for)")
    if refusal is not None and method in (None, "eth_getLogs"):
        return RangeTooLarge(f"{message}{'' if data is None else ' ' + json.dumps(data)}", refusal=refusal.kind,
                             provider=refusal.provider, cap=refusal.cap, first=refusal.first, last=refusal.last,
                             code=code, data=data)
    if limited or _TRANSIENT_HINTS.search(message):
        timeout = re.search(r"timeout|timed out", message, re.IGNORECASE)
        kind = "rate_limited" if limited else "timeout" if timeout else "server_error"
        return TransientRpcError(f"JSON-RPC error {code}: {message}", kind=kind)
    return RpcError(f"JSON-RPC error {code}: {message}", code=code, data=data)


def is_not_served(error: RpcError) -> bool:
    """Whether the node refused a call because it does not serve its method."""
    return error.code == -32601 or bool(_NOT_SERVED.search(str(error)))


MAX_BATCH = 200  # calls per request at most, unless the node or the budget admits fewer
MAX_RESPONSE_BYTES = 64 * 1024 * 1024  # BOUNTY_RPC_MAX_RESPONSE_BYTES's default (docs/operations.md says why)
MAX_RETRY_AFTER = 60.0  # BOUNTY_RPC_MAX_RETRY_AFTER_SECONDS's default
# Transient failures of a request after which a caller that reports the node as unreachable (and
# waits its own way) gives up on it: the first call at start, and every call of the realtime phase.
UNREACHABLE_AFTER = 3
RATE_LIMITED_SPLIT = 3  # rate limits in a row that halve a batch (too large for the plan)


@dataclass
class Backoff:
    """Capped exponential backoff: the indexer's one formula for waiting before asking again.

    `ceiling(n)` is `base * 2**n` seconds, at most `cap`. The client's retries wait a random time
    up to it (`delay`, full jitter: the threads and processes that failed together do not ask again
    together); the indexer's waits for a node or a database that does not answer
    (indexer.outage) wait it whole, as one loop asks there."""

    base: float = 0.25
    cap: float = 15.0
    attempts: int = 8

    def ceiling(self, attempt: int) -> float:
        return min(self.cap, self.base * 2.0 ** min(attempt, 64))  # 2**64 outgrows any cap; a float would overflow

    def delay(self, attempt: int, retry_after: float | None = None) -> float:
        if retry_after is not None:
            return min(self.cap, max(retry_after, 0.0))
        return float(random.uniform(0, self.ceiling(attempt)))


# Levels of nesting an answer may have: a JSON-RPC answer has a handful (a batch of getLogs
# answers, each a list of logs with their topics: 5). Deeper ones are malformed: the standard
# parser recurses once a level (RecursionError past the interpreter's limit, and past the C stack
# where a library raised that limit: py_ecc sets 100,000), and a value nested near the limit would
# raise RecursionError wherever it is shown. orjson parses at most 1,024 levels and serialises at
# most 254, which checks it in C: a walk in Python costs as much as the parse.
MAX_DEPTH = 254
def _malformed(why: str, body: bytes | bytearray) -> TransientRpcError:
    return TransientRpcError(f"the answer is {why} ({len(body)} bytes)", kind="malformed")


def _loads(body: bytes | bytearray) -> Any:
    """An answer's JSON; TransientRpcError of kind `malformed` when it is not JSON or is nested
    deeper than MAX_DEPTH."""
    # orjson parses a large getLogs answer several times faster; what it refuses but the standard
    # parser reads (NaN, text that is not UTF-8) goes the slow way, once its depth is known.
    try:
        answer = orjson.loads(body)
    except orjson.JSONDecodeError as exc:
        if nests_deeper_than(body, MAX_DEPTH):
            raise _malformed(f"nested deeper than {MAX_DEPTH} levels", body) from exc
        try:
            return json.loads(body)
        except ValueError as invalid:
            raise _malformed("not JSON", body) from invalid
    try:
        orjson.dumps(answer)
    except orjson.JSONEncodeError as exc:
        if "recursion" in str(exc).lower():  # not an integer past 64 bits, which orjson reads as a float
            raise _malformed(f"nested deeper than {MAX_DEPTH} levels", body) from exc
    return answer


def _json_rpc_error(body: bytes | bytearray) -> dict[str, Any] | None:
    """The JSON-RPC error object in a response body, if it holds one."""
    try:
        answer = _loads(body)
    except TransientRpcError:
        return None
    if isinstance(answer, list) and answer:
        answer = answer[0]
    error = answer.get("error") if isinstance(answer, dict) else None
    return error if isinstance(error, dict) else None


def _range_span(calls: Sequence[tuple[str, Sequence[Any]]]) -> int | None:
    """The blocks a request of one eth_getLogs over block numbers asks for (None for any other)."""
    if len(calls) != 1 or calls[0][0] != "eth_getLogs" or not calls[0][1] or not isinstance(calls[0][1][0], dict):
        return None
    query = calls[0][1][0]
    try:
        return int(query["toBlock"], 16) - int(query["fromBlock"], 16) + 1
    except (KeyError, TypeError, ValueError):
        return None


class _Deadline(threading.local):
    """When the request this thread sends must be over (time.monotonic(); None: no request)."""

    at: float | None = None

    def left(self, timeout: float | None) -> float | None:
        """What each wait of the request may take: `timeout`, and no longer than the time left
        (a little above zero once it is over, so that the socket's own timeout raises)."""
        if self.at is None:
            return timeout
        left = max(self.at - time.monotonic(), 0.001)
        return left if timeout is None else min(timeout, left)


class _DeadlineStream(httpcore.NetworkStream):
    """A connection whose every read and write waits no longer than the request's time left."""

    def __init__(self, stream: httpcore.NetworkStream, deadline: _Deadline) -> None:
        self._stream = stream
        self._deadline = deadline

    def read(self, max_bytes: int, timeout: float | None = None) -> bytes:
        return self._stream.read(max_bytes, self._deadline.left(timeout))

    def write(self, buffer: bytes, timeout: float | None = None) -> None:
        self._stream.write(buffer, self._deadline.left(timeout))

    def close(self) -> None:
        self._stream.close()

    def start_tls(self, ssl_context: Any, server_hostname: str | None = None,
                  timeout: float | None = None) -> httpcore.NetworkStream:
        return _DeadlineStream(self._stream.start_tls(ssl_context, server_hostname, self._deadline.left(timeout)),
                               self._deadline)

    def get_extra_info(self, info: str) -> Any:
        return self._stream.get_extra_info(info)


class _DeadlineBackend(httpcore.NetworkBackend):
    """httpcore's sockets, each wait bounded by the request's deadline: httpx's timeout bounds
    each read alone, which a node that sends a byte now and then never meets."""

    def __init__(self) -> None:
        self.deadline = _Deadline()
        self._backend = httpcore.SyncBackend()

    def connect_tcp(self, host: str, port: int, timeout: float | None = None, local_address: str | None = None,
                    socket_options: Any = None) -> httpcore.NetworkStream:
        stream = self._backend.connect_tcp(host, port, self.deadline.left(timeout), local_address, socket_options)
        return _DeadlineStream(stream, self.deadline)

    def connect_unix_socket(self, path: str, timeout: float | None = None,
                            socket_options: Any = None) -> httpcore.NetworkStream:
        stream = self._backend.connect_unix_socket(path, self.deadline.left(timeout), socket_options)
        return _DeadlineStream(stream, self.deadline)

    def sleep(self, seconds: float) -> None:
        self._backend.sleep(seconds)


class _DeadlineTransport(httpx.HTTPTransport):
    """httpx's transport over a _DeadlineBackend (httpx takes no network backend of its own),
    directly or through an HTTP(S) proxy (`proxy_for`): a transport of one's own makes httpx
    ignore HTTPS_PROXY and NO_PROXY, so the proxy is set up here as httpx would."""

    def __init__(self, backend: _DeadlineBackend, limits: httpx.Limits, proxy: str | None = None) -> None:
        super().__init__(limits=limits)
        context = httpx.create_ssl_context()
        if proxy is None:
            self._pool = httpcore.ConnectionPool(
                ssl_context=context, max_connections=limits.max_connections,
                max_keepalive_connections=limits.max_keepalive_connections, keepalive_expiry=limits.keepalive_expiry,
                network_backend=backend)
            return
        through = httpx.Proxy(proxy)
        self._pool = httpcore.HTTPProxy(
            proxy_url=httpcore.URL(scheme=through.url.raw_scheme, host=through.url.raw_host, port=through.url.port,
                                   target=through.url.raw_path),
            proxy_auth=through.raw_auth, proxy_headers=through.headers.raw, ssl_context=context,
            max_connections=limits.max_connections, max_keepalive_connections=limits.max_keepalive_connections,
            keepalive_expiry=limits.keepalive_expiry, network_backend=backend)


def proxy_for(url: str, proxies: Mapping[str, str]) -> str | None:
    """The proxy a request to `url` goes through, by the environment's convention (as curl and
    httpx read it; `proxies` as urllib.request.getproxies_environment() gives them): the scheme's
    proxy (`https_proxy`, `http_proxy`) or `all_proxy`, unless `no_proxy` names the host (`*`, the
    host, a domain it is in, an IP address or a network it is in); None: direct."""
    parts = urlsplit(url)
    proxy = proxies.get(parts.scheme) or proxies.get("all")
    host = (parts.hostname or "").rstrip(".").lower()
    if proxy is None or any(_bypasses(entry.strip().lower(), host) for entry in proxies.get("no", "").split(",")):
        return None
    return proxy


def _bypasses(entry: str, host: str) -> bool:
    """Whether a `no_proxy` entry names `host`."""
    if entry == "*":
        return True
    entry = _without_port(entry)
    try:
        return ipaddress.ip_address(host) in ipaddress.ip_network(entry, strict=False)
    except ValueError:
        domain = entry.lstrip("*").lstrip(".")
        return bool(domain) and (host == domain or host.endswith("." + domain))


def _without_port(entry: str) -> str:
    if entry.startswith("["):  # [::1]:8545
        return entry[1:].split("]", 1)[0]
    host, colon, port = entry.rpartition(":")
    return host if colon and port.isdigit() and ":" not in host else entry


class _TooLarge(Exception):
    """An answer past the byte cap (its declared length, or the bytes read so far)."""


@dataclass(frozen=True)
class _Answer:
    status: int
    headers: httpx.Headers
    body: bytearray

    def text(self, limit: int) -> str:
        return bytes(self.body[:limit]).decode("utf-8", "replace")


class RpcClient:
    """JSON-RPC over HTTP(S), single calls and batches, retrying transient failures; safe to use
    from several threads at once, which `pacer` keeps within the node's limits.

    `timeout` bounds each request, from its connection to its answer's last byte
    (BOUNTY_RPC_TIMEOUT_SECONDS); `max_response_bytes` its answer (BOUNTY_RPC_MAX_RESPONSE_BYTES);
    `max_retry_after` the wait a Retry-After may ask (BOUNTY_RPC_MAX_RETRY_AFTER_SECONDS). Once
    `stop` is set, a wait between retries ends at once and no further request is sent: both raise
    Stopped."""

    def __init__(
        self,
        url: str,
        *,
        timeout: float = 20.0,
        backoff: Backoff | None = None,
        stop: threading.Event | None = None,
        pacer: Pacer | None = None,
        max_batch: int = MAX_BATCH,
        patient: bool = True,
        max_response_bytes: int = MAX_RESPONSE_BYTES,
        max_retry_after: float = MAX_RETRY_AFTER,
        proxy: str | None = None,
    ) -> None:
        self.url = url
        self.proxy = proxy  # an HTTP(S) proxy the requests go through (proxy_for); None: direct
        self.node = redact_url(url)  # the URL may hold an API key: messages name this instead
        self.timeout = timeout
        self.backoff = backoff or Backoff()
        self.stop = stop or threading.Event()
        self.pacer = pacer or Pacer()
        budget = self.pacer.max_batch()
        self.max_batch = max(1, min(max_batch, budget) if budget is not None else max_batch)  # calls per request
        # A rate limit retried for as long as the indexer runs (the node: nothing goes on without it),
        # or counted with the other failures (an explorer, which the indexer can do without).
        self.patient = patient
        self.max_response_bytes = max_response_bytes
        self.max_retry_after = max_retry_after
        self._backend = _DeadlineBackend()
        limits = httpx.Limits(max_connections=None, max_keepalive_connections=64)
        self._http = httpx.Client(timeout=httpx.Timeout(timeout), headers={"Content-Type": "application/json"},
                                  transport=_DeadlineTransport(self._backend, limits, proxy))
        self._ids = itertools.count(1)
        self._ids_lock = threading.Lock()
        self.tally = RpcTally()
        # Which of the indexer's phases its calls are counted for (PHASES), set by the indexer as it
        # goes from one to the next; a reader process's client keeps the one it was made in.
        self.phase = "startup"

    def close(self) -> None:
        self._http.close()

    def fresh(self) -> RpcClient:
        """A client for a forked process: the same settings, connections of its own; the budget
        and a pause the node asked for stay shared (indexer.pacing)."""
        client = RpcClient(self.url, timeout=self.timeout, backoff=self.backoff, stop=self.stop,
                           pacer=self.pacer.for_another_process(), max_batch=self.max_batch, patient=self.patient,
                           max_response_bytes=self.max_response_bytes, max_retry_after=self.max_retry_after,
                           proxy=self.proxy)
        client.phase = self.phase
        return client

    def _sleep(self, seconds: float) -> None:
        if self.stop.wait(seconds):
            raise Stopped("stopped while waiting to retry a request to the node")

    def call(self, method: str, params: Sequence[Any], *, behind_retries: int | None = None,
             failures: int | None = None) -> Any:
        """One JSON-RPC call; its result, or the classified exception."""
        return self.batch([(method, params)], behind_retries=behind_retries, failures=failures)[0]

    def batch(self, calls: Sequence[tuple[str, Sequence[Any]]], *, behind_retries: int | None = None,
              failures: int | None = None) -> list[Any]:
        """Several calls, in as few requests as the node admits; results in the order of `calls`.

        An error in any call raises its classified exception (after retries if transient). A node
        that lags behind the blocks asked for (NodeBehind) is asked again for as long as the
        indexer runs, or `behind_retries` times (0: the caller waits its own way). Other transient
        failures give up (RetriesExhausted) after `failures` attempts (default: the backoff's)."""
        results: list[Any] = []
        start = 0
        while start < len(calls):
            size = min(self.max_batch, len(calls) - start)
            try:
                results.extend(self._request(calls[start : start + size], behind_retries, failures))
            except BatchTooLarge as refused:
                if size == 1:
                    raise RpcError(f"the node at {self.node} refuses even a single call: {refused}") from refused
                allowed = refused.max_size if refused.max_size is not None and refused.max_size < size else size // 2
                self.max_batch = max(1, min(self.max_batch, allowed))
                logger.warning("the node at %s refused a batch of %d calls (%s); sending at most %d a request",
                               self.node, size, refused, self.max_batch)
                continue
            start += size
        return results

    def _request(self, calls: Sequence[tuple[str, Sequence[Any]]], behind_retries: int | None = None,
                 attempts: int | None = None) -> list[Any]:
        """One request, retried while it fails transiently: for ever when the node limits the rate
        (halving a batch that keeps meeting the limit) or lags behind (up to `behind_retries`
        times when given), `backoff.attempts` times otherwise."""
        retries = failures = limited = behind = 0  # every retry (the backoff grows with them); others;
        while True:                                # rate limits in a row; answers of a node behind
            try:
                return self._send(calls)
            except (TransientRpcError, RpcError) as exc:
                self.tally.error(exc.kind)
                if isinstance(exc, RpcError):
                    raise
                if isinstance(exc, NodeBehind):
                    behind += 1
                    if behind_retries is not None and behind > behind_retries:
                        raise
                elif exc.kind == "rate_limited" and self.patient:
                    limited += 1
                    if limited >= RATE_LIMITED_SPLIT and len(calls) > 1:
                        raise BatchTooLarge(f"{exc}, {limited} times in a row", max_size=len(calls) // 2) from exc
                else:
                    limited = 0
                    failures += 1
                    if failures >= (attempts or self.backoff.attempts):
                        raise RetriesExhausted(
                            f"the node at {self.node}: {exc} (gave up after {failures} attempts)") from exc
                # A block the node lacks, asked again a bounded number of times: behind a load
                # balancer the next request likely meets another backend, which has it. Each wait
                # is the first step's, never a grown one (two of them cost 0.3-0.8 s of a record's
                # way to its clients when they grew).
                again = isinstance(exc, NodeBehind) and behind_retries is not None
                delay = self.backoff.delay(0 if again else retries, exc.retry_after)
                retries += 1
                logger.warning("RPC %s to %s failed transiently (%s); retry %d in %.2f s",
                               calls[0][0], self.node, exc, retries, delay)
                self._sleep(delay)

    def _post(self, content: bytes) -> _Answer:
        if threading.current_thread() is not threading.main_thread():  # signals reach the main thread only
            return self._answer(content)
        global _answer_awaited
        try:
            _answer_awaited = True
            if self.stop.is_set():  # set just before the flag was
                raise Stopped("stopped before a request to the node")
            return self._answer(content)
        finally:
            _answer_awaited = False

    def _answer(self, content: bytes) -> _Answer:
        """The answer to one request, within its deadline and the byte cap (_TooLarge past it:
        the rest is not read, the connection closed)."""
        deadline = self._backend.deadline
        deadline.at = time.monotonic() + self.timeout
        try:
            with self._http.stream("POST", self.url, content=content) as response:
                declared = response.headers.get("Content-Length", "")
                if declared.isdigit() and int(declared) > self.max_response_bytes:
                    raise _TooLarge(f"{declared} bytes declared")
                body = bytearray()
                for chunk in response.iter_bytes():
                    body += chunk
                    if len(body) > self.max_response_bytes:
                        raise _TooLarge(f"more than {self.max_response_bytes} bytes")
                return _Answer(response.status_code, response.headers, body)
        finally:
            deadline.at = None

    def _send(self, calls: Sequence[tuple[str, Sequence[Any]]]) -> list[Any]:
        """One request through the pacer, which learns from its outcome."""
        if self.stop.is_set():
            raise Stopped("stopped before a request to the node")
        ticket = self.pacer.acquire(len(calls), self.stop)
        try:
            results = self._exchange(calls)
        except TransientRpcError as exc:
            self._report(ticket, exc)
            raise
        except BaseException:
            self.pacer.failed(ticket)
            raise
        self.pacer.succeeded(ticket)
        return results

    def _too_large(self, calls: Sequence[tuple[str, Sequence[Any]]], read: str) -> NoReturn:
        """An answer past the byte cap: a getLogs range is refused as a node's "too many
        results" is (split, and the split remembered), anything else retried."""
        message = (f"the answer of the node at {self.node} is past BOUNTY_RPC_MAX_RESPONSE_BYTES "
                   f"({self.max_response_bytes}): {read}")
        span = _range_span(calls)
        if span is not None and span > 1:
            refused = RangeTooLarge(message, refusal=RefusalKind.TOO_MUCH, provider="BOUNTY_RPC_MAX_RESPONSE_BYTES")
            refused.kind = "too_large"
            raise refused
        raise TransientRpcError(message, kind="too_large")

    def _retry_after(self, value: str | None) -> float | None:
        """The seconds a Retry-After asks (None without one in seconds), at most max_retry_after:
        a node asking longer is waited that long and said so; an impatient client (the
        explorer's) gives up on it at once (WaitTooLong)."""
        if not value or not value.isdigit():
            return None
        asked = float(value)
        if asked <= self.max_retry_after:
            return asked
        shown = value if len(value) <= 24 else f"{value[:24]}..."
        if not self.patient:
            raise WaitTooLong(f"{self.node} asked to wait {shown} s (Retry-After), more than "
                              f"BOUNTY_RPC_MAX_RETRY_AFTER_SECONDS ({self.max_retry_after:g} s): not waited for")
        logger.warning("the node at %s asked to wait %s s (Retry-After); waiting %g s, "
                       "BOUNTY_RPC_MAX_RETRY_AFTER_SECONDS, at most", self.node, shown, self.max_retry_after)
        self.tally.wait_capped()
        return self.max_retry_after

    def _report(self, ticket: Ticket, exc: TransientRpcError) -> None:
        if exc.kind in ("rate_limited", "timeout", "server_error"):
            self.pacer.overloaded(ticket, exc.retry_after)
        else:
            self.pacer.failed(ticket)

    def _exchange(self, calls: Sequence[tuple[str, Sequence[Any]]]) -> list[Any]:
        self.tally.calls([method for method, _ in calls], self.phase)
        with self._ids_lock:
            first_id = next(self._ids)
            for _ in range(len(calls) - 1):
                next(self._ids)
        payload = [
            {"jsonrpc": "2.0", "id": first_id + i, "method": method, "params": list(params)}
            for i, (method, params) in enumerate(calls)
        ]
        body = payload[0] if len(payload) == 1 else payload
        method = calls[0][0] if all(name == calls[0][0] for name, _ in calls) else None  # for a whole-request error
        try:
            response = self._post(orjson.dumps(body))
        except httpx.TimeoutException as exc:
            raise TransientRpcError(f"timeout: {type(exc).__name__}: {exc} (BOUNTY_RPC_TIMEOUT_SECONDS, "
                                    f"{self.timeout:g} s for the whole request)", kind="timeout") from exc
        except httpx.TransportError as exc:
            raise TransientRpcError(f"connection failed: {type(exc).__name__}: {exc}") from exc
        except _TooLarge as exc:
            self._too_large(calls, str(exc))
        if response.status == 429 or response.status >= 500:
            error = _json_rpc_error(response.body)
            if error is not None and len(calls) > 1 and isinstance(refusal := classify_error(error, method),
                                                                   BatchTooLarge):
                raise refusal
            raise TransientRpcError(
                f"HTTP {response.status}",
                retry_after=self._retry_after(response.headers.get("Retry-After")),
                kind="rate_limited" if response.status == 429
                else "timeout" if response.status in _TIMEOUT_STATUSES else "server_error",
            )
        if response.status != 200:
            # Providers send JSON-RPC errors with 4xx statuses too (Alchemy's range refusals
            # with 400, QuickNode's with 413): an error in the body is classified as usual.
            error = _json_rpc_error(response.body)
            if error is not None:
                raise classify_error(error, method)
            if response.status == 413 and len(calls) > 1:
                raise BatchTooLarge(f"HTTP 413 for a batch of {len(calls)} calls", max_size=None)
            raise RpcError(f"HTTP {response.status} from the node at {self.node}: {response.text(200)}")
        answer = _loads(response.body)
        answers = answer if isinstance(answer, list) else [answer]
        by_id = {item.get("id"): item for item in answers if isinstance(item, dict)
                 and not isinstance(item.get("id"), list | dict)}  # a list or an object cannot be an id (unhashable)
        results = []
        for i in range(len(calls)):
            item = by_id.get(first_id + i)
            if item is None:
                if len(answers) == 1 and isinstance(answers[0], dict) and "error" in answers[0]:
                    raise classify_error(answers[0]["error"], method)
                raise TransientRpcError(f"the answer lacks call {i} of {len(calls)} ({calls[i][0]}): "
                                        f"{len(answers)} answers came", kind="malformed")
            if item.get("error") is not None:
                raise classify_error(item["error"], calls[i][0])
            if "result" not in item:
                raise TransientRpcError(f"answer to {calls[i][0]} has neither result nor error", kind="malformed")
            results.append(item["result"])
        return results
