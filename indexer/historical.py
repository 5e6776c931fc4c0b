"""The historical phase: the blocks below the realtime phase's (the head less BOUNTY_LIVE_BLOCKS,
which every backend of a load balancer has), read by ranges several at once (indexer.fetch), read
ahead of the commits (indexer.pipeline) and committed in block order (indexer.commit).

A bulk backfill (indexer.index_build decides) runs over three processes: a reader process reads
and decodes, a second one applies and renders, and this one writes.
"""

from __future__ import annotations

import gc
import multiprocessing
import os
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

from indexer.commit import Committer, Prepared
from indexer.config import IndexerConfig
from indexer.errors import ChainChanged
from indexer.fetch import BatchReader, batch_sizes
from indexer.models import SyncState
from indexer.pipeline import BatchWriter, ReadAhead, RecordMemory, collections_between_batches
from indexer.proof import COUNTERS
from indexer.startup import view_words
from records.dialect import dialect
from records.kinds import KINDS
from records.models import Deployment

GUIDANCE_MARGIN = 16  # ranges that guidance must save beyond what it adds (Historical.guided)
RECORD_MEMORY = 200_000  # records a catch-up keeps in memory between batches (about 2 KB each)
_RELEASED = 2**62  # `committed` once the writing process stops: past any block


class Historical:
    def __init__(self, config: IndexerConfig, reader: BatchReader, committer: Committer, stop: threading.Event, *,
                 announce: Callable[[], None], own_connections: Callable[[], None]) -> None:
        self.config = config
        self.reader = reader
        self.committer = committer
        self.stop = stop
        self.announce = announce  # this process is the writer, still (for /health)
        self.own_connections = own_connections  # in a forked process: connections of its own
        self.pid = os.getpid()
        self.safe = 0  # the safe head of the catch-up under way

    def catch_up(self, deployment: Deployment, state: SyncState, parent: str | None, last: int, settled: int,
                 head: int, safe: int) -> None:
        """Blocks last+1..settled by ranges, read ahead while it writes; `parent` the hash of
        block `last` as indexed. ChainChanged when a batch does not follow the one before."""
        self.committer.calls.reset()  # what following costs is measured while following
        # As the database has them: a batch clears them on this object before it commits.
        deployment.refresh_from_db(fields=[kind.in_chain_order_field for kind in KINDS])
        self.reader.sizes = batch_sizes(self.config.batch_logs)
        self.safe = safe  # the batches' safe head: a bulk backfill ends with the realtime phase's first batch
        if state.bulk_from_block is not None:
            self._bulk(deployment, state, parent, last + 1, settled, head, self.guided(deployment, last + 1, settled))
            return
        memory = RecordMemory()
        guided = self.guided(deployment, last + 1, settled)
        with ReadAhead(lambda start: self.reader.read(start, settled, head, self.safe, guided=guided), last + 1,
                       settled,
                       self.config.read_ahead, self.stop) as batches, collections_between_batches():
            for n, batch in enumerate(batches, start=1):
                if batch.parent_hash != parent:
                    raise ChainChanged(f"block {batch.start - 1} changed while blocks after it were read")
                self.committer.commit(deployment, batch, memory)
                parent = batch.headers[batch.to]["hash"]
                self.announce()
                if memory.size() > RECORD_MEMORY:
                    memory.clear()
                if n % 64 == 0:
                    gc.collect(1)

    def guided(self, deployment: Deployment, first: int, last: int) -> bool:
        """Whether an explorer's guidance pays for blocks first..last (indexer.explorer): the ranges
        they take through the node outnumber, by GUIDANCE_MARGIN, what guidance costs the node for
        a contract of that many records: about two calls an event block (a record's events mostly
        in blocks of their own: up to three a record), and the proof of the mirror (three calls and
        one a record). The contract's record counters are read for it (one request) once the ranges
        are enough to pay for anything. So a first sync on a plan with a short cap is guided; a
        catch-up of minutes after a restart, or a paid plan's wide ranges (BOUNTY_GETLOGS_MAX_BLOCKS
        given, or learnt from a refusal), are read by range."""
        guide = self.reader.guide
        if guide is None or not guide.in_use:
            return False
        # A cap not known yet is taken to be as short as the first ranges: guidance is what a
        # node of a short cap needs most, and it costs a few calls a record where it is not.
        ranges = (last - first + 1) / (self.reader.fetcher.cap() or self.config.initial_span)
        if ranges <= 3 + GUIDANCE_MARGIN:
            return False
        counts = view_words(self.reader.rpc, [(self.config.contract_address, f"{name}()") for name in COUNTERS])
        if any(count is None for count in counts):  # the counters do not answer: as many records as the mirror's
            totals = [kind.total_field for kind in KINDS]
            deployment.refresh_from_db(fields=totals)
            records: int = sum(getattr(deployment, total) for total in totals)
        else:
            records = sum(int(count, 16) for count in counts if count is not None)
        return ranges > 3 + 3 * records + GUIDANCE_MARGIN

    def _bulk(self, deployment: Deployment, state: SyncState, parent: str | None,
                       first: int, safe: int, head: int, guided: bool) -> None:
        """A bulk backfill's catch-up over three processes: a reader process reads and decodes,
        a second one applies and renders (`_prepare_ahead`, which forks the reader), and this
        one writes (`Committer.commit_prepared`), on PostgreSQL from a thread of its own (BatchWriter) so
        that receiving the next batch overlaps the server's work on this one. `committed` tells
        the preparing process the last block written."""
        committed = multiprocessing.get_context("fork").Value("q", first - 1, lock=False)
        memory = RecordMemory()  # the preparing process's

        def commit(prepared: Prepared) -> None:
            self.committer.commit_prepared(deployment, prepared)
            committed.value = prepared.batch.to

        writer: BatchWriter[Prepared] | None = None
        try:
            with ReadAhead(lambda start: self._prepare_ahead(deployment, state, memory, committed, start, safe, head,
                                                             guided),
                           first, safe, self.config.read_ahead, self.stop, in_process=True,
                           on_start=self.own_connections) as prepared_batches, collections_between_batches():
                try:
                    if dialect().writes_in_the_background:  # after the fork: no thread of ours in the reader
                        writer = BatchWriter(commit)
                    for n, prepared in enumerate(prepared_batches, start=1):
                        batch = prepared.batch
                        if self.reader.guide is not None:
                            self.reader.guide.set_aside_in_reader(batch.explorer_set_aside)
                        if batch.parent_hash != parent:
                            raise ChainChanged(f"block {batch.start - 1} changed while blocks after it were read")
                        if writer is None:
                            commit(prepared)
                        else:
                            writer.submit(prepared)
                        parent = batch.headers[batch.to]["hash"]
                        self.announce()
                        if n % 64 == 0:
                            gc.collect(1)
                finally:
                    committed.value = _RELEASED  # a reader waiting for a commit goes on, to find it closed
        finally:
            if writer is not None:
                writer.close()

    def _prepare_ahead(self, deployment: Deployment, state: SyncState, memory: RecordMemory, committed: Any,
                       start: int, safe: int, head: int, guided: bool) -> Iterator[Prepared]:
        """(In a bulk backfill's preparing process.) Every batch from `start` to `safe`, read
        ahead by a reader process of its own, applied to the records in `memory` and rendered,
        with its rows converted for the database. Before the memory forgets its
        records, the batches that wrote them must be committed: the records are read back from
        the database after that."""
        with ReadAhead(lambda first: self.reader.read(first, safe, head, self.safe, guided=guided), start, safe,
                       self.config.read_ahead,
                       self.stop, in_process=True, on_start=self.own_connections) as batches, \
                collections_between_batches(collect_at_end=False):  # this process exits after
            for batch in batches:
                if memory.size() > RECORD_MEMORY:
                    while committed.value < batch.start - 1:
                        if os.getppid() != self.pid:  # the indexer died
                            return
                        time.sleep(0.005)
                    memory.clear()
                yield self.committer.prepare(deployment, batch, memory, state).shipped()
