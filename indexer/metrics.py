"""The indexer's Prometheus metrics, served by `run_indexer` on BOUNTY_INDEXER_METRICS_PORT.

Every metric carries the deployment's `chain_id` and `contract` labels. The metrics live in a
registry of the indexer's own (with the process's CPU and memory), so that a test process may
hold several indexers. docs/operations.md (Metrics) lists them; deploy/ holds the scrape
configuration, the alert rules and a Grafana dashboard that use these names.
"""

from __future__ import annotations

import collections
import logging
import threading
import time
from collections.abc import Mapping
from datetime import datetime
from wsgiref.simple_server import WSGIServer

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, start_http_server
from prometheus_client.platform_collector import PlatformCollector
from prometheus_client.process_collector import ProcessCollector

from indexer.events import EVENT_TYPES
from indexer.rpc import ERROR_KINDS, PHASES, RpcCounts

logger = logging.getLogger(__name__)

_DEPLOYMENT = ("chain_id", "contract")
# Seconds to commit one batch: a live batch of a few events takes milliseconds, a backfill's
# batch of about 4,000 events up to a second or two.
_BATCH_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0)
_DEPTH_BUCKETS = (1, 2, 3, 4, 6, 8, 12, 16, 32, 64, 128, 256, 512, 1024)


class IndexerMetrics:
    """One deployment's indexer metrics."""

    def __init__(self, chain_id: int, contract: str) -> None:
        self.registry = CollectorRegistry()
        ProcessCollector(registry=self.registry)
        PlatformCollector(registry=self.registry)
        labels = (str(chain_id), contract.lower())
        registry = self.registry

        def gauge(name: str, documentation: str) -> Gauge:
            return Gauge(name, documentation, _DEPLOYMENT, registry=registry)

        # The position appears once this process has one (a standby has none: it indexes nothing).
        self._last_indexed_block = gauge("bounty_indexer_last_indexed_block",
                                         "The newest block whose record events are all applied.")
        self._head_block = gauge("bounty_indexer_head_block", "The chain head the indexer last saw.")
        self._lag_blocks = gauge("bounty_indexer_lag_blocks",
                                 "Blocks between the last indexed block and the safe head (the newest deep enough).")
        self._lag_seconds = gauge("bounty_indexer_lag_seconds",
                                  "Chain time between the head block and the last indexed block.")
        self.is_writer = gauge("bounty_indexer_is_writer",
                               "1 while this process holds the deployment's writer lock, 0 while it stands by.").labels(
            *labels)
        self.reorgs = Counter("bounty_indexer_reorgs", "Chain reorganisations undone.", _DEPLOYMENT,
                              registry=registry).labels(*labels)
        self.reorg_depth = Histogram("bounty_indexer_reorg_depth", "Blocks rolled back by each reorganisation.",
                                     _DEPLOYMENT, buckets=_DEPTH_BUCKETS, registry=registry).labels(*labels)
        self.reread_repairs = Counter(
            "bounty_indexer_reread_repairs", "Logs the first reading of a block near the head lost and its second "
            "reading by range found (each repaired by rolling back to the block before).", _DEPLOYMENT,
            registry=registry).labels(*labels)
        self.mirror_proofs = Counter(
            "bounty_indexer_mirror_proofs", "Proofs of the mirror against the contract's state after a sync an "
            "explorer guided, by outcome: equal, or differs (the guided blocks then read again by range).",
            (*_DEPLOYMENT, "outcome"), registry=registry)
        self.node_unreachable_seconds = gauge(
            "bounty_indexer_node_unreachable_seconds",
            "Seconds since the node stopped answering (connection refused, timeouts, 5xx); 0 while it answers. "
            "The indexer keeps asking.").labels(*labels)
        # Set by the indexer to a function read at each scrape, so that an indexer that does not ask shows it.
        self.seconds_since_node_asked = gauge(
            "bounty_indexer_seconds_since_node_asked",
            "Seconds since this process (or a reader process of its) last sent the node a request; 0 before the "
            "first. The writer asks at least every bounty_indexer_max_wait_seconds.").labels(*labels)
        self.max_wait_seconds = gauge(
            "bounty_indexer_max_wait_seconds",
            "The longest the indexer waits between two asks of the node (BOUNTY_INDEXER_MAX_WAIT_MS).").labels(*labels)
        self.block_rhythm_seconds = gauge(
            "bounty_indexer_block_rhythm_seconds",
            "The block time the poll schedule trusts (a poll when the next block is due); 0 while it trusts none "
            "and polls every BOUNTY_INDEXER_POLL_MS.").labels(*labels)
        self.block_rhythm_since = gauge(
            "bounty_indexer_block_rhythm_trusted_since_seconds",
            "Since when (Unix time) the poll schedule trusts that rhythm; 0 while it trusts none.").labels(*labels)
        self.rpc_calls_per_block = gauge("bounty_indexer_rpc_calls_per_block",
                                         "JSON-RPC calls per new block while following the head, over the last "
                                         "minutes.").labels(*labels)
        self.rpc_calls_per_day = gauge("bounty_indexer_rpc_calls_per_day",
                                       "JSON-RPC calls a day at the rate of the last minutes.").labels(*labels)
        self.batch_seconds = Histogram("bounty_indexer_batch_seconds",
                                       "Seconds to write and commit one batch of record events.",
                                       _DEPLOYMENT, buckets=_BATCH_BUCKETS, registry=registry).labels(*labels)
        events = Counter("bounty_indexer_events_applied", "Record events applied, by event type.",
                         (*_DEPLOYMENT, "type"), registry=registry)
        self._events = {kind: events.labels(*labels, kind) for kind in EVENT_TYPES}
        self._requests = Counter("bounty_indexer_rpc_requests", "JSON-RPC calls to the node, by method.",
                                 (*_DEPLOYMENT, "method"), registry=registry)
        phases = Counter("bounty_indexer_rpc_phase_calls", "JSON-RPC calls to the node (and to the explorer), by the "
                         "indexer's phase that made them: startup, historical, explorer (the explorer's own), realtime "
                         "(following the head), reread (the second reading), proof (against the contract's state).",
                         (*_DEPLOYMENT, "phase"), registry=registry)
        self._phases = {phase: phases.labels(*labels, phase) for phase in PHASES}
        errors = Counter("bounty_indexer_rpc_errors", "Failed JSON-RPC requests, by kind of failure.",
                         (*_DEPLOYMENT, "kind"), registry=registry)
        self._errors = {kind: errors.labels(*labels, kind) for kind in ERROR_KINDS}
        self._waits_capped = Counter(
            "bounty_indexer_rpc_retry_after_capped", "Retry-After waits the node asked for past "
            "BOUNTY_RPC_MAX_RETRY_AFTER_SECONDS: each waited only that long.", _DEPLOYMENT,
            registry=registry).labels(*labels)
        self._labels = labels
        for outcome in ("equal", "differs"):
            self.mirror_proofs.labels(*labels, outcome)
        self._lock = threading.Lock()  # the position is set from the writer thread too

    def events_applied(self, counts: Mapping[str, int]) -> None:
        for kind, n in counts.items():
            self._events[kind].inc(n)

    def mirror_proven(self, outcome: str) -> None:
        self.mirror_proofs.labels(*self._labels, outcome).inc()

    def rpc(self, counts: RpcCounts) -> None:
        """Adds the calls and failures of a client's tally (this process's, or a reader process's)."""
        for method, n in counts.calls.items():
            self._requests.labels(*self._labels, method).inc(n)
        for phase, n in counts.phases.items():
            self._phases[phase].inc(n)
        for kind, n in counts.errors.items():
            self._errors[kind if kind in self._errors else "other"].inc(n)
        if counts.waits_capped:
            self._waits_capped.inc(counts.waits_capped)

    def reorganised(self, depth: int) -> None:
        self.reorgs.inc()
        self.reorg_depth.observe(depth)

    def position(self, *, last: int | None, head: int, safe: int,
                 last_time: datetime | None = None, head_time: datetime | None = None) -> None:
        """Where the indexer stands: the last indexed block and the head (with their times when known)."""
        with self._lock:
            self._head_block.labels(*self._labels).set(head)
            if last is not None:
                self._last_indexed_block.labels(*self._labels).set(last)
            behind = safe - (last if last is not None else -1)
            self._lag_blocks.labels(*self._labels).set(max(0, behind))
            if last_time is not None and head_time is not None:
                self._lag_seconds.labels(*self._labels).set(max(0.0, (head_time - last_time).total_seconds()))

    def serve(self, port: int, address: str) -> WSGIServer:
        """Serves the metrics over HTTP on a thread of their own (Prometheus's text format)."""
        server, _ = start_http_server(port, addr=address, registry=self.registry)
        logger.info("metrics on http://%s:%d/metrics", address if ":" not in address else f"[{address}]",
                    server.server_port)
        return server


class CallMeter:
    """What following the head costs: JSON-RPC calls per new block and per day, over the last
    WINDOW seconds of following (the historical phase resets it: a backfill's calls are no
    measure of that)."""

    WINDOW = 300.0

    def __init__(self) -> None:
        self.total = 0  # calls counted so far
        self.per_block: float | None = None
        self.per_day: float | None = None
        self._samples: collections.deque[tuple[float, int, int]] = collections.deque()  # time, calls, block

    def count(self, counts: RpcCounts) -> None:
        self.total += sum(counts.calls.values())

    def reset(self) -> None:
        self._samples.clear()

    def blocks(self, last_indexed: int | None, metrics: IndexerMetrics) -> None:
        """A sample at the indexed tip `last_indexed`; the rates over the window into `metrics`."""
        if last_indexed is None:
            return
        now = time.monotonic()
        samples = self._samples
        samples.append((now, self.total, last_indexed))
        while len(samples) > 2 and samples[1][0] <= now - self.WINDOW:
            samples.popleft()
        (then, calls_then, block_then), (_, calls_now, block_now) = samples[0], samples[-1]
        if block_now > block_then:
            self.per_block = round((calls_now - calls_then) / (block_now - block_then), 3)
            metrics.rpc_calls_per_block.set(self.per_block)
        if now - then >= 10:
            self.per_day = round((calls_now - calls_then) / (now - then) * 86_400)
            metrics.rpc_calls_per_day.set(self.per_day)
