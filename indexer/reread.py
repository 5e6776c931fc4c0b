"""Every block read twice before it is final: the blocks the realtime phase read one by one are
read once more by range when they have become deep enough that every backend has them (the
head less BOUNTY_LIVE_BLOCKS), one getLogs for many blocks.

The second reading is compared with the applied-log ledger. A log the ledger lacks, of a block
whose hash the mirror holds, is a log the first reading lost (a node that omitted it, a bloom
computed wrong): the mirror is rolled back to the block before it through the reorganisation
path, which tells websocket clients what it undoes, and the blocks are read again by range. A
log of another hash, or a ledger log the second reading lacks, means the chain changed: the
reorganisation check decides. Every repair is logged with the node's answers and counted
(bounty_indexer_reread_repairs_total, with an alert).

`SyncState.reread_block` is the newest block read by range: the historical phase moves it with
its batches, this module over the blocks the realtime phase read.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field

from indexer.errors import ChainChanged, NodeBehind
from indexer.events import UndecodableLog, decode_log
from indexer.fetch import LogFetcher, OrderedRanges
from indexer.metrics import IndexerMetrics
from indexer.models import AppliedLog, IndexedBlock, SyncState
from indexer.reorg import Reorganisations
from records.models import Deployment

logger = logging.getLogger(__name__)

REREAD_EVERY = 16  # blocks gathered for one second reading while following the head
# Ranges read at most by one second reading: a repair of the blocks an explorer guided (indexer.proof)
# goes window by window, each one that matches kept read twice, the head followed in between.
REREAD_WINDOW = 256
GONE_TRIES = 3  # second readings that lack a log the first reading holds, before the first is believed

LogKey = tuple[int, int, str, str]  # block number, log index, block hash, transaction hash


@dataclass
class Rereads:
    fetcher: LogFetcher
    reorganisations: Reorganisations
    metrics: IndexerMetrics
    start_block: int
    _gone: dict[tuple[int, int], int] = field(default_factory=dict)  # range -> readings that lacked logs

    def pending(self, state: SyncState, settled: int) -> tuple[int, int] | None:
        """The blocks indexed but not read by range yet that are deep enough now."""
        indexed = state.last_indexed_block
        if indexed is None:
            return None
        first = state.read_twice_to(self.start_block) + 1
        window = REREAD_WINDOW * (self.fetcher.cap() or self.fetcher.span)  # a repair's span, a window at a time
        last = min(indexed, settled, first + window - 1)
        return (first, last) if first <= last else None

    def due(self, state: SyncState, settled: int) -> tuple[int, int] | None:
        """The blocks whose second reading is due: enough blocks gathered, or every block indexed
        deep enough (the historical phase goes on from the indexed tip: after a restart, or after
        falling behind); None when none is."""
        pending = self.pending(state, settled)
        if pending is None:
            return None
        first, last = pending
        return pending if last - first + 1 >= REREAD_EVERY or last == state.last_indexed_block else None

    def reread(self, deployment: Deployment, state: SyncState, first: int, last: int) -> bool:
        """Reads blocks first..last again by range and compares; True when it changed the mirror
        (a repair), or found that the chain changed (ChainChanged: the caller checks the tip)."""
        logs: list[dict[str, object]] = []
        for _, _, part, _ in OrderedRanges(self.fetcher, first, last):  # several ranges at once: a repair's are many
            logs.extend(part)
        read = self._keyed(logs)
        chain = set(read)
        ledger = {(number, index, block_hash, tx_hash) for number, index, block_hash, tx_hash in
                  AppliedLog.objects.filter(deployment=deployment, block_number__range=(first, last))
                  .values_list("block_number", "log_index", "block_hash", "tx_hash")}
        lost, gone = sorted(chain - ledger), sorted(ledger - chain)
        if not lost and not gone:
            self._read_twice(state, last)
            return False
        hashes = dict(IndexedBlock.objects.filter(deployment=deployment, number__range=(first, last))
                      .values_list("number", "hash"))
        if any(hashes.get(key[0]) not in (None, key[2]) for key in lost + gone):
            raise ChainChanged(f"the second reading of blocks {first}-{last} found logs of other block hashes")
        if gone:  # the ledger holds logs the range lacks, of the blocks as indexed: the range's answer
            tries = self._gone[(first, last)] = self._gone.get((first, last), 0) + 1
            if tries < GONE_TRIES:
                raise NodeBehind(f"the second reading of blocks {first}-{last} lacks {len(gone)} logs the mirror "
                                 f"holds of the same blocks ({gone[:3]}): a node behind, asked again later")
            logger.warning("the second reading of blocks %d-%d lacked %d logs the first reading took from the "
                           "block itself %d times: the node's range index omits them (%s); the mirror keeps them",
                           first, last, len(gone), tries, gone)
            if not lost:
                del self._gone[(first, last)]
                self._read_twice(state, last)
                return False
        self._gone.pop((first, last), None)
        block = lost[0][0]
        logger.warning("the second reading of blocks %d-%d holds %d logs the first reading lost: %s; the mirror "
                       "held %s. Rolling back to block %d to read them again", first, last, len(lost),
                       [read[key] for key in lost],
                       sorted(ledger), block - 1)
        self.metrics.reread_repairs.inc()
        self._read_twice(state, block - 1)  # the blocks before the first lost log are read twice and equal
        self.reorganisations.roll_back_to(deployment, block - 1)
        return True

    @staticmethod
    def _read_twice(state: SyncState, last: int) -> None:
        SyncState.objects.filter(pk=state.pk, reread_block=state.reread_block).update(reread_block=last)
        state.reread_block = last

    @staticmethod
    def _keyed(logs: list[dict[str, object]]) -> dict[LogKey, dict[str, object]]:
        """The logs by what the ledger keeps of them; those that do not decode left out (the first
        reading skipped them too, and said so)."""
        keyed = {}
        for raw in logs:
            if raw.get("removed"):
                continue
            try:
                log = decode_log(raw).log
            except (UndecodableLog, KeyError, ValueError, TypeError):
                continue
            keyed[(log.block_number, log.log_index, log.block_hash, log.tx_hash)] = raw
        return keyed
