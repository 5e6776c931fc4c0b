"""The indexer: start-up checks (indexer.startup), then the phases it runs, as Ponder's
historical and realtime sync: the historical phase by ranges (indexer.historical) up to the head
less BOUNTY_LIVE_BLOCKS, the realtime phase block by block above (indexer.realtime), each block of
which is read a second time by range once deep enough (indexer.reread), and one committer both
phases use (indexer.commit). Reorganisations are undone by indexer.reorg; the index builder
(indexer.index_build) defers and builds the secondary indexes around a bulk backfill.

Each step starts with one poll of the head, made when indexer.clock says: when the next block is
due inside a rhythm the arrivals confirm, every BOUNTY_INDEXER_POLL_MS otherwise. Only
blocks at least `confirmations` deep are indexed. A head lower than the indexed tip, a `null`
header or a block the node does not know is a backend behind the others: the step ends and the
next poll asks again.
"""

from __future__ import annotations

import contextlib
import dataclasses
import itertools
import logging
import os
import socket
import threading
import time
from collections.abc import Callable
from datetime import datetime, timedelta
from typing import Any

import psycopg
from django.conf import settings
from django.db import DatabaseError, InterfaceError, OperationalError, connection, connections
from django.utils import timezone

from indexer.clock import BlockClock
from indexer.commit import Committer
from indexer.config import IndexerConfig
from indexer.errors import ChainChanged, InconsistentChain, IndexerError, NodeBehind, RetriesExhausted, Stopped
from indexer.explorer import ExplorerGuide
from indexer.fetch import BatchReader
from indexer.historical import Historical
from indexer.index_build import IndexBuilder
from indexer.locks import LockWaitInterrupted, deployment_lock
from indexer.metrics import IndexerMetrics
from indexer.models import IndexedBlock, IndexerProcess, IndexerRole, SyncState
from indexer.pacing import Pacer
from indexer.pipeline import database_connections_of_our_own
from indexer.proof import GuidedSyncProof
from indexer.realtime import Realtime
from indexer.reorg import Reorganisations
from indexer.reread import Rereads
from indexer.rpc import UNREACHABLE_AFTER, Backoff, RpcClient
from indexer.startup import check_node, find_start_block
from indexer.transitions import chain_time
from records.models import Deployment

logger = logging.getLogger(__name__)

# A database that cannot be reached (restarting, failing over): Django's errors, and psycopg's for the
# writer lock's own session.
DATABASE_GONE = (OperationalError, InterfaceError, psycopg.OperationalError, psycopg.InterfaceError)
UNREACHABLE_WAIT_CAP = 30.0  # seconds between two tries of a node that does not answer, at most
IDLE_CHECK_SECONDS = 5.0  # without a new head, how often the indexed tip is compared with the chain
ANNOUNCE_SECONDS = 5.0  # how often a process records itself in IndexerProcess (for /health)


class Indexer:
    """Mirrors one deployment's record events into the database."""

    def __init__(self, config: IndexerConfig, rpc: RpcClient | None = None,
                 stop: threading.Event | None = None) -> None:
        self.config = config
        self.stop = stop or threading.Event()
        self.rpc = rpc or RpcClient(config.rpc_url, timeout=config.rpc_timeout, stop=self.stop,
                                    backoff=Backoff(cap=min(Backoff.cap, config.max_wait)),  # no wait past the ceiling
                                    pacer=Pacer(max_concurrency=config.max_concurrency,
                                                requests_per_second=config.requests_per_second))
        # An explorer that guides the historical phase (indexer.explorer): a budget of its own, and
        # a few tries at most before it is set aside, where the node is waited for as long as it takes.
        self.explorer = RpcClient(config.explorer_url, timeout=config.rpc_timeout, stop=self.stop,
                                  backoff=Backoff(cap=min(Backoff.cap, config.max_wait), attempts=3),
                                  pacer=Pacer(max_concurrency=2,
                                              requests_per_second=config.explorer_requests_per_second),
                                  patient=False) if config.explorer_url else None
        self.metrics = IndexerMetrics(config.chain_id, config.contract_address)
        self.name = f"{socket.gethostname()}:{os.getpid()}"  # as /health lists the deployment's indexers
        self.committer = Committer(config, self.metrics)
        self._assemble()
        self.clock = BlockClock(config.poll_interval, config.max_wait)
        self.metrics.seconds_since_node_asked.set_function(self._seconds_since_node_asked)
        self.metrics.max_wait_seconds.set(config.max_wait)
        self.deployment: Deployment | None = None
        self._pid = os.getpid()
        self._latest: dict[str, Any] | None = None  # the head's header as last polled
        self._new_head_at = time.monotonic()  # when the head last moved
        self._tip_unchecked = True  # the indexed tip must be compared with the chain before reading on
        self._inconsistent_at: int | None = None  # the indexed tip when an event lacked its record
        self._unreachable_since: datetime | None = None  # when the node stopped answering
        self._unreachable_tries = 0
        self._role: IndexerRole | None = None  # as last announced
        self._next_announce = 0.0

    @property
    def start_block(self) -> int:
        if self.config.start_block is None:
            raise IndexerError("the start block is not known yet: Indexer.run finds it (BOUNTY_START_BLOCK unset)")
        return self.config.start_block

    def _assemble(self) -> None:
        """The parts that read from the start block. Until run() has found it (BOUNTY_START_BLOCK
        unset), they are built from block 0, which nothing reads: catch_up refuses to run."""
        config = self.config
        start = config.start_block if config.start_block is not None else 0
        self.committer.start_block = start
        self.reorganisations = Reorganisations(self.rpc, start_block=start, kept_blocks=config.kept_blocks,
                                               metrics=self.metrics)
        guide = ExplorerGuide(self.explorer, self.rpc, config.contract_address) if self.explorer else None
        self.reader = BatchReader(self.rpc, address=config.contract_address, start_block=start,
                                  span=config.initial_span, max_span=config.max_span, batch_logs=config.batch_logs,
                                  guide=guide)
        self.historical = Historical(config, self.reader, self.committer, self.stop,
                                     announce=lambda: self.announce(IndexerRole.WRITER),
                                     own_connections=self._own_connections)
        self.realtime = Realtime(self.rpc, self.reader, self.committer, config.contract_address)
        self.rereads = Rereads(self.reader.fetcher, self.reorganisations, self.metrics, start)
        self.guided_proof = GuidedSyncProof(self.rpc, self.metrics, self.committer)
        self.index_builder = IndexBuilder(self.rpc, contract_address=config.contract_address, start_block=start,
                                          stop=self.stop)

    # ------------------------------------------------------------------ lifecycle

    def check_node(self) -> None:
        """The start-up checks (indexer.startup): IndexerError saying what to change."""
        check_node(self.rpc, self.config, self._head)

    def find_start_block(self) -> None:
        """With BOUNTY_START_BLOCK unset: the contract's deployment block, found on the chain once
        (indexer.startup.find_start_block), then kept in the sync state and read from there."""
        if self.config.start_block is not None:
            return
        deployment = self.deployment or self.ensure_deployment()
        state = SyncState.objects.filter(deployment=deployment)
        found, indexed = state.values_list("found_start_block", "last_indexed_block").get()
        if found is not None:
            logger.info("indexing from block %d, the contract's deployment block found before (BOUNTY_START_BLOCK "
                        "unset)", found)
        else:
            if indexed is not None:  # indexed before unset meant block 0: from there still
                found = 0
                logger.info("BOUNTY_START_BLOCK is unset and this mirror was indexed from block 0 (what unset meant "
                            "before): going on from there")
            else:
                found = find_start_block(self.rpc, self.config.contract_address, self.reader.guide)
                logger.info("the contract was deployed in block %d: indexing from there (BOUNTY_START_BLOCK unset)",
                            found)
            state.update(found_start_block=found)
        self.config = dataclasses.replace(self.config, start_block=found)
        self._assemble()

    def ensure_deployment(self) -> Deployment:
        deployment, _ = Deployment.objects.get_or_create(
            chain_id=self.config.chain_id, contract_address=self.config.contract_address,
            defaults={"usdc_address": self.config.usdc_address, "bounty_in_chain_order": True,  # no records yet
                      "submission_in_chain_order": True, "dispute_in_chain_order": True},
        )
        if deployment.usdc_address != self.config.usdc_address:
            deployment.usdc_address = self.config.usdc_address
            deployment.save(update_fields=["usdc_address"])
        SyncState.objects.get_or_create(deployment=deployment)
        self.deployment = deployment
        return deployment

    def run(self) -> None:
        """Backfills, then follows the head until `stop` is set. Another process holding the
        deployment's writer lock makes this one stand by until the lock is free. A node that does
        not answer is waited for; a database that goes away (a restart, a failover) is reconnected
        to, and the lock taken again, or stood by for if another indexer took it meanwhile."""
        try:
            self._until_the_node_answers(self.check_node)
            while not self.stop.is_set():
                try:
                    self._write_or_stand_by()
                except DATABASE_GONE as gone:
                    self._until_the_database_answers(gone)
        except (Stopped, LockWaitInterrupted) as stopped:
            logger.info("%s", stopped)
        finally:
            if self.deployment is not None:
                with contextlib.suppress(DatabaseError):
                    IndexerProcess.objects.filter(deployment=self.deployment, name=self.name).delete()
        logger.info("indexer stopped")

    def _write_or_stand_by(self) -> None:
        self.rpc.phase = "startup"
        self.ensure_deployment()
        self.metrics.is_writer.set(0)
        self.announce(IndexerRole.STANDBY)
        with deployment_lock(self.config.chain_id, self.config.contract_address, self.stop,
                             poll=min(2.0, self.config.poll_interval),
                             on_wait=lambda: self.announce(IndexerRole.STANDBY)):
            self.metrics.is_writer.set(1)
            self.announce(IndexerRole.WRITER)
            self._until_the_node_answers(self.find_start_block)
            depth = self.config.confirmations
            logger.info("indexing chain %d contract %s from block %d up to %s",
                        self.config.chain_id, self.config.contract_address, self.config.start_block,
                        f"the node's {depth} block" if isinstance(depth, str) else f"{depth} confirmations")
            try:
                self._follow()
            finally:
                self.metrics.is_writer.set(0)

    def _until_the_database_answers(self, gone: Exception) -> None:
        """The database went away: every connection closed (the writer lock's session went with
        the server), then asked again with a capped backoff until it answers. What this process
        knew of the chain is checked again from the database."""
        logger.warning("the database went away (%s: %s); reconnecting", type(gone).__name__, str(gone).strip())
        self._tip_unchecked = True
        self.realtime.headers.clear()
        self._role = None  # announced again once it answers
        for tries in itertools.count():
            for alias in connections:
                with contextlib.suppress(Exception):
                    connections[alias].close()
            try:
                connection.ensure_connection()
            except DATABASE_GONE:
                if self.stop.wait(min(5.0, 0.25 * 2**tries)):
                    raise Stopped("stopped while the database did not answer") from None
                continue
            logger.warning("the database answers again; taking the writer lock again")
            return

    def _follow(self) -> None:
        self._until_the_node_answers(self.prepare)
        builder: threading.Thread | None = None
        try:
            while not self.stop.is_set():
                try:
                    more = self.catch_up()
                except RetriesExhausted as exc:
                    self._node_unreachable(exc)
                    continue
                self._node_answers()
                if more:
                    continue
                deployment = self.deployment or self.ensure_deployment()
                if (builder is None or not builder.is_alive()) and self.index_builder.due(deployment):
                    builder = self.index_builder.start(deployment)
                self.stop.wait(self.clock.wait())  # until the next poll (indexer.clock.BlockClock)
        finally:
            if builder is not None:
                builder.join()

    # ------------------------------------------------------------------ a node that does not answer

    def _until_the_node_answers(self, step: Callable[[], None]) -> None:
        """Runs `step` until the node has answered it: an unreachable node is never fatal."""
        while True:
            try:
                step()
            except RetriesExhausted as exc:
                self._node_unreachable(exc)
                continue
            self._node_answers()
            return

    def _node_unreachable(self, exc: RetriesExhausted) -> None:
        """The node has not answered (connection refused, DNS, timeouts, 5xx) after a request's
        retries: said in the log, /health (`indexer.node_unreachable_since`, with the heartbeat:
        the indexer runs) and the metrics, then asked again after a capped backoff, for as long as
        it runs. Stopped when asked to stop meanwhile."""
        now = timezone.now()
        if self._unreachable_since is None:
            self._unreachable_since = now
            logger.warning("%s; asking again for as long as it takes", exc)
        seconds = (now - self._unreachable_since).total_seconds()
        self.metrics.node_unreachable_seconds.set(seconds)
        self.committer.count_rpc(self.rpc.tally.take())
        if self.deployment is not None:
            with contextlib.suppress(DatabaseError):
                SyncState.objects.filter(deployment=self.deployment).update(
                    node_unreachable_since=self._unreachable_since, node_asked_at=self.committer.node_asked_at,
                    rpc_calls_by_phase=self.committer.phase_calls(), last_heartbeat=now)
        self._unreachable_tries += 1
        cap = min(UNREACHABLE_WAIT_CAP, self.config.max_wait)  # no wait past the ceiling (BOUNTY_INDEXER_MAX_WAIT_MS)
        if self.stop.wait(min(cap, 0.5 * 2 ** min(self._unreachable_tries, 8))):
            raise Stopped("stopped while the node did not answer")

    def _node_answers(self) -> None:
        if self._unreachable_since is None:
            return
        seconds = (timezone.now() - self._unreachable_since).total_seconds()
        logger.warning("the node at %s answers again after %.0f s", self.rpc.node, seconds)
        self._unreachable_since, self._unreachable_tries = None, 0
        self.metrics.node_unreachable_seconds.set(0)
        if self.deployment is not None:
            with contextlib.suppress(DatabaseError):
                SyncState.objects.filter(deployment=self.deployment).update(node_unreachable_since=None)

    def announce(self, role: IndexerRole) -> None:
        """Records this process and its role for /health: at once on a change of role, then
        every ANNOUNCE_SECONDS at most. A killed process leaves its row: the first announcement
        deletes rows not seen for longer than the health heartbeat, and taking the writer's role
        deletes the row of the writer before (the lock is free, so it is gone)."""
        now = time.monotonic()
        if role == self._role and now < self._next_announce:
            return
        deployment = self.deployment or self.ensure_deployment()
        seen = timezone.now()
        try:
            if self._role is None:
                stale = seen - timedelta(seconds=settings.BOUNTY_HEALTH_HEARTBEAT_SECONDS)
                IndexerProcess.objects.filter(deployment=deployment, last_seen__lt=stale).delete()
            if role == IndexerRole.WRITER and self._role != role:  # a writer before this one holds no lock: it died
                IndexerProcess.objects.filter(deployment=deployment, role=IndexerRole.WRITER).exclude(
                    name=self.name).delete()
            IndexerProcess.objects.update_or_create(
                deployment=deployment, name=self.name, defaults={"role": role, "last_seen": seen},
                create_defaults={"role": role, "last_seen": seen, "started_at": seen})
        except DatabaseError:  # only /health's list: the indexing goes on, and the next one tries again
            logger.warning("could not record this indexer as %s for /health", role, exc_info=True)
            return
        self._role, self._next_announce = role, now + ANNOUNCE_SECONDS

    # ------------------------------------------------------------------ bulk backfills (indexer.index_build)

    def prepare(self) -> None:
        """Before indexing: whether what lies ahead is a bulk backfill (indexer.index_build)."""
        self.index_builder.prepare(self.deployment or self.ensure_deployment(), lambda: self._head()[1])

    # ------------------------------------------------------------------ indexing

    def catch_up(self) -> bool:
        """One step of indexing, after one poll of the head (one call; two with a block tag): the
        historical phase by ranges up to the head less `live_blocks`, then the realtime phase block
        by block up to the safe head (indexer.realtime), with the second reading of the blocks
        that phase read once they are deep enough (indexer.reread). False once it has indexed
        what the poll showed, or when the node answered as a backend behind the others: then
        the next poll waits for the next block."""
        start = self.start_block  # known: run() found it first
        deployment = self.deployment or self.ensure_deployment()
        state = SyncState.objects.get(deployment=deployment)
        last = state.indexed_to(start)
        historical = True  # which phase an event of a record the mirror lacks came in
        self.rpc.phase = "realtime"  # following the head: its poll, the checks of the indexed tip
        try:
            if self._tip_unchecked:
                if self.reorganisations.undo(deployment):
                    self.realtime.headers.clear()
                    return True
                self._tip_unchecked = False
            head, safe = self._poll()
            if head < last:  # a backend behind the others: never a reorganisation, never progress
                return False
            tip = self._tip_hash(deployment, last)
            if self._reorganised_at_tip(tip, head, last):
                return True
            settled = min(safe, head - self.config.live_blocks)
            if pending := self.rereads.due(state, settled):
                self.rpc.phase = "reread"
                if self.rereads.reread(deployment, state, *pending):
                    self.realtime.headers.clear()
                    return True
                self.rpc.phase = "realtime"
            if last < settled:
                self.rpc.phase = "historical"
                self.historical.catch_up(deployment, state, tip, last, settled, head, safe)
                return True
            if last >= safe:
                if self.guided_proof.repairing(state):  # at once while a window is due, else at the next poll
                    return self.rereads.due(state, settled) is not None
                if state.guided_from_block is not None:
                    self.rpc.phase = "proof"
                    return self.guided_proof.settle(deployment, state, self.reader.guide)
                self._caught_up(state, head, safe)
                return False
            historical = False
            numbered = not isinstance(self.config.confirmations, str)
            self.realtime.follow(deployment, tip, last, head, safe, self._latest if numbered else None)
            self.announce(IndexerRole.WRITER)
            # What the poll showed is indexed: the next poll when the next block is due, or at once
            # when a sync an explorer guided is to be proven (above).
            return state.guided_from_block is not None
        except NodeBehind as behind:
            logger.info("%s; asking again", behind)
            self.clock.asked_again()
            return False
        except ChainChanged as changed:
            logger.warning("%s; checking the indexed blocks", changed)
            self._tip_unchecked = True
            self.realtime.headers.clear()
            return True
        except InconsistentChain as inconsistent:
            return self._wait_for_the_second_reading(deployment, inconsistent, historical)

    def _wait_for_the_second_reading(self, deployment: Deployment, inconsistent: InconsistentChain,
                                     historical: bool) -> bool:
        """An event of a record the mirror lacks. A block read one by one may have lost the
        record's creation (a node that omits a log): indexing waits (False) until the blocks
        read so are read a second time by range (indexer.reread, which repairs a lost log), the
        failing block's too: once it is deep enough, the historical phase reads it by range.
        An event read by range after blocks all read twice means the mirror really lacks the
        record (BOUNTY_START_BLOCK after the contract's deployment): the indexer stops, saying so."""
        state = SyncState.objects.get(deployment=deployment)
        guide = self.reader.guide
        unproven = state.guided_from_block is not None and self.guided_proof.repaired_from != state.guided_from_block
        if historical and ((guide is not None and guide.in_use) or unproven):  # a creation an explorer hid
            self.guided_proof.repair(state, guide, str(inconsistent))
            return True
        last, read_twice = state.indexed_to(self.start_block), state.read_twice_to(self.start_block)
        if read_twice >= last and historical:
            raise inconsistent
        if self._inconsistent_at != last:
            self._inconsistent_at = last
            logger.warning("%s; waiting for the second reading of the blocks after %d, which repairs a log the "
                           "node lost, before believing it", inconsistent, read_twice)
        return False

    def _poll(self) -> tuple[int, int]:
        """The head and safe head, teaching the block clock whether the head moved; a head that
        stays IDLE_CHECK_SECONDS asks for a check of the indexed tip (a reorganisation that kept
        the height)."""
        sent = time.time()
        head, safe = self._head()
        latest = self._latest
        if latest is not None and self.clock.polled(head, int(latest["timestamp"], 16), sent):
            self._new_head_at = time.monotonic()
        elif time.monotonic() - self._new_head_at >= IDLE_CHECK_SECONDS:
            self._new_head_at = time.monotonic()
            self._tip_unchecked = True
        return head, safe

    def _seconds_since_node_asked(self) -> float:
        """For the metrics, at each scrape: since this process, or a reader process of its, last
        sent the node a request (0 before the first)."""
        sent = [t for t in (self.committer.node_asked, self.rpc.tally.last_sent) if t is not None]
        return max(0.0, time.time() - max(sent)) if sent else 0.0

    def _reorganised_at_tip(self, tip: str | None, head: int, last: int) -> bool:
        """Whether the polled head is the indexed tip's height with another hash than `tip`: a
        check of the tip is due (without a call: the poll brought the header)."""
        latest = self._latest
        if head != last or latest is None or isinstance(self.config.confirmations, str) or self.config.confirmations:
            return False
        if latest["hash"] == tip:
            return False
        self._tip_unchecked = True
        return True

    def _own_connections(self) -> None:
        """In a reader process: connections of its own to the node and to the database (the
        ones it inherited are the parent's)."""
        if os.getpid() != self._pid:
            self.rpc = self.rpc.fresh()
            self.reader.use(self.rpc)
            database_connections_of_our_own()

    def _head(self) -> tuple[int, int]:
        """The chain head's number (its time kept for the metrics) and the safe head's: the newest
        block deep enough to index, by BOUNTY_CONFIRMATIONS' count or block tag. One request."""
        depth = self.config.confirmations
        calls = [("eth_getBlockByNumber", ["latest", False])]
        if isinstance(depth, str):
            calls.append(("eth_getBlockByNumber", [depth, False]))
        answers = self.rpc.batch(calls, failures=UNREACHABLE_AFTER)  # /health knows within seconds
        for tag, header in zip(("latest", depth), answers, strict=False):
            if not isinstance(header, dict) or "number" not in header:
                raise IndexerError(f"the node at {self.rpc.node} answered {header!r} for its {tag} block")
        head = int(answers[0]["number"], 16)
        self._latest = answers[0]
        self.committer.head_time = chain_time(int(answers[0]["timestamp"], 16))
        self.committer.count_rpc(self.rpc.tally.take())
        safe = int(answers[1]["number"], 16) if isinstance(depth, str) else head - depth
        return head, safe

    def _caught_up(self, state: SyncState, head: int, safe: int) -> None:
        self.committer.calls.blocks(state.last_indexed_block, self.metrics)
        SyncState.objects.filter(pk=state.pk).update(head_block=head, safe_block=max(0, safe),
                                                     rate_limited_at=self.committer.rate_limited_at,
                                                     node_asked_at=self.committer.node_asked_at,
                                                     rpc_calls_per_block=self.committer.calls.per_block,
                                                     rpc_calls_per_day=self.committer.calls.per_day,
                                                     rpc_calls_by_phase=self.committer.phase_calls(),
                                                     last_heartbeat=timezone.now())
        self.committer.progress = None
        self.announce(IndexerRole.WRITER)
        last = state.last_indexed_block
        last_time = IndexedBlock.objects.filter(deployment_id=state.deployment_id, number=last).values_list(
            "timestamp", flat=True).first() if last is not None else None
        self.metrics.position(last=last, head=head, safe=safe,
                              last_time=last_time, head_time=self.committer.head_time)
        self.committer.count_rpc(self.rpc.tally.take())

    def _tip_hash(self, deployment: Deployment, last: int) -> str | None:
        if last < self.start_block:
            return None
        return IndexedBlock.objects.filter(deployment=deployment, number=last).values_list("hash", flat=True).first()
