"""Waiting out an outage of what the indexer needs: the node, the database.

Neither is ever fatal. A node that does not answer (connection refused, DNS, timeouts, 5xx, after
a request's retries: RetriesExhausted) is watched by `NodeOutage`: said in the log, /health
(`indexer.node_unreachable_since`, with the heartbeat: the indexer runs) and the metrics
(bounty_indexer_node_unreachable_seconds), then asked again after a capped backoff for as long as
the indexer runs. A database that goes away (a restart, a failover) is connected to again by
`reconnect_database`, with a capped backoff too. Both backoffs are the client's formula
(indexer.rpc.Backoff), waited whole; a stop request ends either wait at once (Stopped), and a
connection attempt under way too (indexer.sessions.connecting).
"""

from __future__ import annotations

import contextlib
import itertools
import logging
import threading
from collections.abc import Callable
from datetime import datetime

import psycopg
from django.db import DatabaseError, InterfaceError, OperationalError, connection, connections
from django.utils import timezone

from indexer.commit import Committer
from indexer.errors import RetriesExhausted, Stopped
from indexer.metrics import IndexerMetrics
from indexer.models import SyncState
from indexer.rpc import Backoff, RpcClient
from indexer.sessions import connecting
from records.models import Deployment

logger = logging.getLogger(__name__)

# A database that cannot be reached (restarting, failing over): Django's errors, and psycopg's for the
# writer lock's own session.
DATABASE_GONE = (OperationalError, InterfaceError, psycopg.OperationalError, psycopg.InterfaceError)
DATABASE_BACKOFF = Backoff(base=0.25, cap=5.0)  # 0.25 s, 0.5 s, 1 s ... 5 s between two tries of the database
UNREACHABLE_WAIT_CAP = 30.0  # seconds between two tries of a node that does not answer, at most


def reconnect_database(stop: threading.Event) -> None:
    """Returns once the database answers: every connection closed (the writer lock's session went
    with the server), then one opened again, after DATABASE_BACKOFF while it fails."""
    for tries in itertools.count():
        for alias in connections:
            with contextlib.suppress(Exception):
                connections[alias].close()
        try:
            with connecting(stop):
                connection.ensure_connection()
        except DATABASE_GONE:
            if stop.wait(DATABASE_BACKOFF.ceiling(tries)):
                raise Stopped("stopped while the database did not answer") from None
            continue
        return


class NodeOutage:
    """Since when the node has not answered, if it has not, and how long to wait before asking
    again: 1 s, 2 s, 4 s ... up to UNREACHABLE_WAIT_CAP or BOUNTY_INDEXER_MAX_WAIT_MS, the lower."""

    def __init__(self, rpc: RpcClient, committer: Committer, metrics: IndexerMetrics, stop: threading.Event,
                 max_wait: float) -> None:
        self.rpc = rpc
        self.committer = committer
        self.metrics = metrics
        self.stop = stop
        self.backoff = Backoff(base=0.5, cap=min(UNREACHABLE_WAIT_CAP, max_wait))  # no wait past the ceiling
        self.since: datetime | None = None  # when the node stopped answering
        self._tries = 0

    def until_it_answers(self, step: Callable[[], None], deployment: Deployment | None) -> None:
        """Runs `step` until the node has answered it. `deployment`: whose sync state /health reads
        the outage from (None before it is known: the log and the metrics only)."""
        while True:
            try:
                step()
            except RetriesExhausted as exc:
                self.unreachable(exc, deployment)
                continue
            self.answers(deployment)
            return

    def unreachable(self, exc: RetriesExhausted, deployment: Deployment | None) -> None:
        """The node has not answered a request after its retries: said, then waited for."""
        now = timezone.now()
        if self.since is None:
            self.since = now
            logger.warning("%s; asking again for as long as it takes", exc)
        self.metrics.node_unreachable_seconds.set((now - self.since).total_seconds())
        self.committer.count_rpc(self.rpc.tally.take())
        if deployment is not None:
            with contextlib.suppress(DatabaseError):
                SyncState.objects.filter(deployment=deployment).update(
                    node_unreachable_since=self.since, node_asked_at=self.committer.node_asked_at,
                    rpc_calls_by_phase=self.committer.phase_calls(), last_heartbeat=now)
        self._tries += 1
        if self.stop.wait(self.backoff.ceiling(self._tries)):
            raise Stopped("stopped while the node did not answer")

    def answers(self, deployment: Deployment | None) -> None:
        """The node answered: an outage, if there was one, is over."""
        if self.since is None:
            return
        seconds = (timezone.now() - self.since).total_seconds()
        logger.warning("the node at %s answers again after %.0f s", self.rpc.node, seconds)
        self.since, self._tries = None, 0
        self.metrics.node_unreachable_seconds.set(0)
        if deployment is not None:
            with contextlib.suppress(DatabaseError):
                SyncState.objects.filter(deployment=deployment).update(node_unreachable_since=None)
