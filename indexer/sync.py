"""The indexer: start-up checks (indexer.startup), then the phases it runs, as Ponder's
historical and realtime sync: the historical phase by ranges (indexer.historical) up to the head
less BOUNTY_LIVE_BLOCKS, the realtime phase block by block above (indexer.realtime), each block of
which is read a second time by range once deep enough (indexer.reread), and one committer both
phases use (indexer.commit). Reorganisations are undone by indexer.reorg; the index builder
(indexer.index_build) defers and builds the secondary indexes around a bulk backfill.

Each step starts with one poll of the head (indexer.head), made when indexer.clock says: when the
next block is due inside a rhythm the arrivals confirm, every BOUNTY_INDEXER_POLL_MS otherwise.
Only blocks at least `confirmations` deep are indexed. A head lower than the indexed tip, a `null`
header or a block the node does not know is a backend behind the others: the step ends and the
next poll asks again.

`Indexer` conducts: it takes the deployment's writer lock or stands by for it (indexer.locks),
waits out a node or a database that does not answer (indexer.outage), keeps its row in the list of
processes /health shows (indexer.processes), and runs the steps.
"""

from __future__ import annotations

import dataclasses
import logging
import os
import threading
import time

from django.utils import timezone

from indexer.clock import BlockClock
from indexer.commit import Committer
from indexer.config import IndexerConfig
from indexer.errors import ChainChanged, InconsistentChain, IndexerError, NodeBehind, RetriesExhausted, Stopped
from indexer.explorer import ExplorerGuide
from indexer.fetch import BatchReader
from indexer.head import HeadPoll
from indexer.historical import Historical
from indexer.index_build import IndexBuilder
from indexer.locks import LockWaitInterrupted, deployment_lock
from indexer.metrics import IndexerMetrics
from indexer.models import IndexedBlock, IndexerRole, SyncState
from indexer.outage import DATABASE_GONE, NodeOutage, reconnect_database
from indexer.pacing import Pacer
from indexer.pipeline import database_connections_of_our_own
from indexer.processes import ProcessRegistry
from indexer.proof import GuidedSyncProof
from indexer.realtime import Realtime
from indexer.reorg import Reorganisations
from indexer.reread import Rereads
from indexer.rpc import Backoff, RpcClient
from indexer.sessions import join_or_let_go
from indexer.startup import check_node, find_start_block
from records.models import Deployment

logger = logging.getLogger(__name__)


class Indexer:
    """Mirrors one deployment's record events into the database."""

    def __init__(self, config: IndexerConfig, rpc: RpcClient | None = None,
                 stop: threading.Event | None = None) -> None:
        self.config = config
        self.stop = stop or threading.Event()
        self.rpc = rpc or RpcClient(config.rpc_url, timeout=config.rpc_timeout, stop=self.stop,
                                    backoff=Backoff(cap=min(Backoff.cap, config.max_wait)),  # no wait past the ceiling
                                    pacer=Pacer(max_concurrency=config.max_concurrency,
                                                requests_per_second=config.requests_per_second),
                                    max_response_bytes=config.rpc_max_response_bytes,
                                    max_retry_after=config.rpc_max_retry_after, proxy=config.rpc_proxy)
        # An explorer that guides the historical phase (indexer.explorer): a budget of its own, and
        # a few tries at most before it is set aside, where the node is waited for as long as it takes.
        self.explorer = RpcClient(config.explorer_url, timeout=config.rpc_timeout, stop=self.stop,
                                  backoff=Backoff(cap=min(Backoff.cap, config.max_wait), attempts=3),
                                  pacer=Pacer(max_concurrency=2,
                                              requests_per_second=config.explorer_requests_per_second),
                                  patient=False, max_response_bytes=config.rpc_max_response_bytes,
                                  max_retry_after=config.rpc_max_retry_after,
                                  proxy=config.explorer_proxy) if config.explorer_url else None
        self.metrics = IndexerMetrics(config.chain_id, config.contract_address)
        self._deployment: Deployment | None = None
        self.processes = ProcessRegistry()  # this process in /health's list
        self.committer = Committer(config, self.metrics)
        self._assemble()
        self.clock = BlockClock(config.poll_interval, config.max_wait)
        self.heads = HeadPoll(self.rpc, config.confirmations, self.clock, self.committer)
        self.outage = NodeOutage(self.rpc, self.committer, self.metrics, self.stop, config.max_wait)
        self.metrics.seconds_since_node_asked.set_function(self._seconds_since_node_asked)
        self.metrics.max_wait_seconds.set(config.max_wait)
        self._pid = os.getpid()
        self._tip_unchecked = True  # the indexed tip must be compared with the chain before reading on
        self._inconsistent_at: int | None = None  # the indexed tip when an event lacked its record
        self._database_gone = False  # between the database's going away and its answering again

    @property
    def start_block(self) -> int:
        if self.config.start_block is None:
            raise IndexerError("the start block is not known yet: Indexer.run finds it (BOUNTY_START_BLOCK unset)")
        return self.config.start_block

    @property
    def deployment(self) -> Deployment:
        """The deployment indexed, made or read once (ensure_deployment): by run() as it starts
        writing, or at the first read by a caller that steps the indexer itself (catch_up, prepare,
        find_start_block)."""
        return self._deployment if self._deployment is not None else self.ensure_deployment()

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
                                     announce=lambda: self._announce(IndexerRole.WRITER),
                                     own_connections=self._own_connections)
        self.realtime = Realtime(self.rpc, self.reader, self.committer, config.contract_address)
        self.rereads = Rereads(self.reader.fetcher, self.reorganisations, self.metrics, start)
        self.guided_proof = GuidedSyncProof(self.rpc, self.metrics, self.committer)
        self.index_builder = IndexBuilder(self.rpc, contract_address=config.contract_address, start_block=start,
                                          stop=self.stop)

    # ------------------------------------------------------------------ lifecycle

    def check_node(self) -> None:
        """The start-up checks (indexer.startup): IndexerError saying what to change."""
        check_node(self.rpc, self.config, self.heads.head)

    def find_start_block(self) -> None:
        """With BOUNTY_START_BLOCK unset: the contract's deployment block, found on the chain once
        (indexer.startup.find_start_block), then kept in the sync state and read from there."""
        if self.config.start_block is not None:
            return
        state = SyncState.objects.filter(deployment=self.deployment)
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
        """The deployment's row and its sync state, made if new, its USDC address kept current."""
        deployment, _ = Deployment.objects.get_or_create(
            chain_id=self.config.chain_id, contract_address=self.config.contract_address,
            defaults={"usdc_address": self.config.usdc_address, "bounty_in_chain_order": True,  # no records yet
                      "submission_in_chain_order": True, "dispute_in_chain_order": True},
        )
        if deployment.usdc_address != self.config.usdc_address:
            deployment.usdc_address = self.config.usdc_address
            deployment.save(update_fields=["usdc_address"])
        SyncState.objects.get_or_create(deployment=deployment)
        self._deployment = deployment
        return deployment

    def run(self) -> None:
        """Backfills, then follows the head until `stop` is set. Another process holding the
        deployment's writer lock makes this one stand by until the lock is free. A node that does
        not answer is waited for; a database that goes away (a restart, a failover) is reconnected
        to, and the lock taken again, or stood by for if another indexer took it meanwhile."""
        try:
            self.outage.until_it_answers(self.check_node, self._deployment)
            while not self.stop.is_set():
                try:
                    self._write_or_stand_by()
                except DATABASE_GONE as gone:
                    self._until_the_database_answers(gone)
        except (Stopped, LockWaitInterrupted) as stopped:
            logger.info("%s", stopped)
        finally:
            # Not asked of a database that went away: the next process's first announcement
            # deletes the row once stale.
            if self._deployment is not None and not self._database_gone:
                self.processes.leave(self._deployment)
        logger.info("indexer stopped")

    def _write_or_stand_by(self) -> None:
        self.rpc.phase = "startup"
        self.ensure_deployment()
        self.metrics.is_writer.set(0)
        self._announce(IndexerRole.STANDBY)
        with deployment_lock(self.config.chain_id, self.config.contract_address, self.stop,
                             poll=min(2.0, self.config.poll_interval),
                             on_wait=lambda: self._announce(IndexerRole.STANDBY)):
            self.metrics.is_writer.set(1)
            self._announce(IndexerRole.WRITER)
            self.outage.until_it_answers(self.find_start_block, self.deployment)
            depth = self.config.confirmations
            logger.info("indexing chain %d contract %s from block %d up to %s",
                        self.config.chain_id, self.config.contract_address, self.config.start_block,
                        f"the node's {depth} block" if isinstance(depth, str) else f"{depth} confirmations")
            try:
                self._follow()
            finally:
                self.metrics.is_writer.set(0)

    def _until_the_database_answers(self, gone: Exception) -> None:
        """The database went away: connected to again (indexer.outage.reconnect_database). What
        this process knew of the chain is checked again from the database, and it is announced
        again for /health."""
        logger.warning("the database went away (%s: %s); reconnecting", type(gone).__name__, str(gone).strip())
        self._tip_unchecked = True
        self.realtime.headers.clear()
        self.processes.forget_role()
        self._database_gone = True
        reconnect_database(self.stop)
        self._database_gone = False
        logger.warning("the database answers again; taking the writer lock again")

    def _follow(self) -> None:
        self.outage.until_it_answers(self.prepare, self.deployment)
        builder: threading.Thread | None = None
        try:
            while not self.stop.is_set():
                try:
                    more = self.catch_up()
                except RetriesExhausted as exc:
                    self.outage.unreachable(exc, self.deployment)
                    continue
                self.outage.answers(self.deployment)
                if more:
                    continue
                if (builder is None or not builder.is_alive()) and self.index_builder.due(self.deployment):
                    builder = self.index_builder.start(self.deployment)
                self.stop.wait(self.clock.wait())  # until the next poll (indexer.clock.BlockClock)
        finally:
            # A stop cancels the build (indexer.indexes); a build still waiting for a database that
            # does not answer once the stop lets go of it ends with the process (the next start
            # builds the rest).
            if builder is not None:
                join_or_let_go(builder)

    def _announce(self, role: IndexerRole) -> None:
        self.processes.announce(self.deployment, role)

    # ------------------------------------------------------------------ bulk backfills (indexer.index_build)

    def prepare(self) -> None:
        """Before indexing: whether what lies ahead is a bulk backfill (indexer.index_build)."""
        self.index_builder.prepare(self.deployment, lambda: self.heads.head()[1])

    # ------------------------------------------------------------------ indexing

    def catch_up(self) -> bool:
        """One step of indexing, after one poll of the head (one call; two with a block tag): the
        historical phase by ranges up to the head less `live_blocks`, then the realtime phase block
        by block up to the safe head (indexer.realtime), with the second reading of the blocks
        that phase read once they are deep enough (indexer.reread). False once it has indexed
        what the poll showed, or when the node answered as a backend behind the others: then
        the next poll waits for the next block."""
        start = self.start_block  # known: run() found it first
        deployment = self.deployment
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
            head, safe, idle = self.heads.poll()
            if idle:  # checked at the next step
                self._tip_unchecked = True
            if head < last:  # a backend behind the others: never a reorganisation, never progress
                return False
            tip = self._tip_hash(deployment, last)
            if self.heads.replaced(head, last, tip):
                self._tip_unchecked = True
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
                return self._at_the_safe_head(deployment, state, head, safe, settled)
            historical = False
            numbered = not isinstance(self.config.confirmations, str)
            self.realtime.follow(deployment, tip, last, head, safe, self.heads.latest if numbered else None)
            self._announce(IndexerRole.WRITER)
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

    def _at_the_safe_head(self, deployment: Deployment, state: SyncState, head: int, safe: int,
                          settled: int) -> bool:
        """Every block deep enough is indexed: a sync an explorer guided is repaired or proven
        (indexer.proof), else the bookkeeping of an indexer caught up. True: a step at once."""
        if self.guided_proof.repairing(state):  # at once while a window is due, else at the next poll
            return self.rereads.due(state, settled) is not None
        if state.guided_from_block is not None:
            self.rpc.phase = "proof"
            return self.guided_proof.settle(deployment, state, self.reader.guide)
        self._caught_up(state, head, safe)
        return False

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

    def _seconds_since_node_asked(self) -> float:
        """For the metrics, at each scrape: since this process, or a reader process of its, last
        sent the node a request (0 before the first)."""
        sent = [t for t in (self.committer.node_asked, self.rpc.tally.last_sent) if t is not None]
        return max(0.0, time.time() - max(sent)) if sent else 0.0

    def _own_connections(self) -> None:
        """In a reader process: connections of its own to the node and to the database (the
        ones it inherited are the parent's)."""
        if os.getpid() != self._pid:
            self.rpc = self.rpc.fresh()
            self.reader.use(self.rpc)
            database_connections_of_our_own()

    def _caught_up(self, state: SyncState, head: int, safe: int) -> None:
        """What /health and the metrics show of an indexer caught up: the head, the safe head, the
        call rates and the heartbeat (SyncState), its row (indexer.processes), its position."""
        self.committer.calls.blocks(state.last_indexed_block, self.metrics)
        SyncState.objects.filter(pk=state.pk).update(head_block=head, safe_block=max(0, safe),
                                                     rate_limited_at=self.committer.rate_limited_at,
                                                     node_asked_at=self.committer.node_asked_at,
                                                     rpc_calls_per_block=self.committer.calls.per_block,
                                                     rpc_calls_per_day=self.committer.calls.per_day,
                                                     block_rhythm_seconds=self.committer.rhythm,
                                                     block_rhythm_since=self.committer.rhythm_since,
                                                     rpc_calls_by_phase=self.committer.phase_calls(),
                                                     last_heartbeat=timezone.now())
        self.committer.progress = None
        self._announce(IndexerRole.WRITER)
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
