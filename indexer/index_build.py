"""The index builder: whether a sync is a bulk backfill, which defers the record tables'
secondary indexes (indexer.indexes) until it has caught up, and their build afterwards.

bench/indexer_backfill.py measured building them afterwards faster than keeping them on both
databases (SQLite, 50,041 events: 3.8 s end to end with the build against 4.3 s keeping them).
"""

from __future__ import annotations

import logging
import operator
import threading
import time
from collections.abc import Callable
from functools import reduce

from django.conf import settings
from django.db import DatabaseError, InterfaceError, OperationalError, connection, transaction
from django.db.models import F, Q, Sum
from eth_utils.crypto import keccak

from indexer import indexes
from indexer.errors import RpcError
from indexer.models import IndexStateChoice, SyncState
from indexer.rpc import RpcClient
from records.dialect import dialect
from records.kinds import KINDS
from records.models import Deployment

logger = logging.getLogger(__name__)

# The contract's record counters, read at the safe head to tell how many rows a backfill adds.
_COUNTERS = [("0x" + keccak(text=f"{kind.count_getter}()")[:4].hex()) for kind in KINDS]
_TOTALS = [kind.total_field for kind in KINDS]  # Deployment's count of each kind's records
BUILD_RETRY_SECONDS = 60  # after a failed index build


class IndexBuilder:
    def __init__(self, rpc: RpcClient, *, contract_address: str, start_block: int, stop: threading.Event) -> None:
        self.rpc = rpc
        self.contract_address = contract_address
        self.start_block = start_block
        self.stop = stop
        self.next_build = 0.0  # monotonic time from which a deferred index build may start

    def due(self, deployment: Deployment) -> bool:
        """Whether a build should start now (not after a failure's pause)."""
        return time.monotonic() >= self.next_build and self.indexes_to_build(deployment)

    def prepare(self, deployment: Deployment, safe_head: Callable[[], int]) -> None:
        """Before indexing: drops the indexes an interrupted build left invalid, and decides
        whether what lies ahead, up to `safe_head()`, is a bulk backfill (indexes deferred, no
        change-log entry per change)."""
        indexes.repair()
        state = SyncState.objects.get(deployment=deployment)
        if state.bulk_from_block is not None:
            logger.info("resuming the bulk backfill begun at block %d (%s)", state.bulk_from_block,
                        f"indexes {indexes.index_state()}")
            return
        safe = safe_head()
        last = state.indexed_to(self.start_block)
        if safe - last <= settings.BOUNTY_HEALTH_MAX_LAG_BLOCKS or not self._is_bulk(deployment, safe):
            return
        with transaction.atomic():  # the bulk backfill and its deferred indexes, or neither
            SyncState.objects.filter(pk=state.pk).update(bulk_from_block=last + 1)
            dropped = indexes.defer(deployment)
        logger.info("bulk backfill from block %d: %d secondary indexes deferred until it has caught up",
                    last + 1, dropped)

    def _is_bulk(self, deployment: Deployment, safe: int) -> bool:
        mode: str = settings.BOUNTY_DEFER_INDEXES
        if mode != "auto":
            return mode == "always"
        held = Deployment.objects.aggregate(n=Sum(reduce(operator.add, (F(total) for total in _TOTALS))))["n"]
        held = int(held or 0)
        adding = self._rows_to_add(deployment, safe)
        logger.info("the backfill adds %s rows to the %d the record tables hold",
                    "an unknown number of" if adding is None else f"{adding:,}", held)
        return held == 0 if adding is None else adding > held

    def _rows_to_add(self, deployment: Deployment, safe: int) -> int | None:
        """The contract's record counts at the safe head less what the deployment holds; None
        when the node cannot tell (no state kept for that block, another contract)."""
        try:
            counts = self.rpc.batch([("eth_call", [{"to": self.contract_address, "data": selector}, hex(safe)])
                                     for selector in _COUNTERS])
            total = sum(int(count, 16) for count in counts)
        except (RpcError, ValueError, TypeError):
            return None
        deployment.refresh_from_db(fields=_TOTALS)
        held: int = sum(getattr(deployment, field) for field in _TOTALS)
        return max(0, total - held)

    def indexes_to_build(self, deployment: Deployment) -> bool:
        """Whether the secondary indexes wait for this indexer to build them: deferred by its
        deployment's backfill (or by none still known), which has caught up."""
        if indexes.index_state() == IndexStateChoice.READY:
            return False
        owner = indexes.deferred_by()
        return owner is None or owner == deployment.pk

    def build(self, deployment: Deployment) -> float:
        """Builds the deferred secondary indexes; returns the seconds it took. When the record
        tables hold only this deployment's records (a first sync), nobody else writes to them:
        on PostgreSQL the indexes are then built side by side without CONCURRENTLY, a third
        faster, while this indexer's next commit waits for the build; otherwise CONCURRENTLY,
        which lets every deployment's indexer write meanwhile."""
        holding = reduce(operator.or_, (Q(**{f"{total}__gt": 0}) for total in _TOTALS))
        others = Deployment.objects.exclude(pk=deployment.pk).filter(holding).exists()
        return indexes.build(deployment, report=logger.info, stop=self.stop, concurrently=others)

    def start(self, deployment: Deployment) -> threading.Thread | None:
        """On PostgreSQL the build runs beside the indexing (readers are never blocked); SQLite
        builds here."""
        if not dialect().builds_beside_writes:
            self._build_and_report(deployment)
            return None

        def build() -> None:
            try:
                self._build_and_report(deployment)
            finally:
                connection.close()

        thread = threading.Thread(target=build, name="indexer-index-build", daemon=True)
        thread.start()
        return thread

    def _build_and_report(self, deployment: Deployment) -> None:
        try:
            self.build(deployment)
        except indexes.BuildStopped as stopped:
            logger.info("%s", stopped)
        except (OperationalError, InterfaceError) as gone:  # the database went away: no bug to trace
            logger.warning("the index build stopped: the database went away (%s); trying again in %d s",
                           str(gone).strip(), BUILD_RETRY_SECONDS)
            self.next_build = time.monotonic() + BUILD_RETRY_SECONDS
        except DatabaseError:
            logger.exception("the index build failed; trying again in %d s", BUILD_RETRY_SECONDS)
            self.next_build = time.monotonic() + BUILD_RETRY_SECONDS
