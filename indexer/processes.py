"""The list of a deployment's indexer processes that /health shows (IndexerProcess rows).

Each `run_indexer` process records itself, by host and process id, and its role: the writer,
which holds the deployment's writer lock (indexer.locks), or a standby waiting for it. It does so
at once on a change of role, then every ANNOUNCE_SECONDS at most, and deletes its row when it
stops. A killed process leaves its row: a process's first announcement deletes the rows not seen
for longer than the health heartbeat, and taking the writer's role deletes the row of the writer
before (the lock is free, so it is gone).
"""

from __future__ import annotations

import contextlib
import logging
import os
import socket
import time
from datetime import timedelta

from django.conf import settings
from django.db import DatabaseError
from django.utils import timezone

from indexer.models import IndexerProcess, IndexerRole
from records.models import Deployment

logger = logging.getLogger(__name__)

ANNOUNCE_SECONDS = 5.0  # how often a process records itself in IndexerProcess, at most


class ProcessRegistry:
    """This process's row in the list."""

    def __init__(self) -> None:
        self.name = f"{socket.gethostname()}:{os.getpid()}"
        self._role: IndexerRole | None = None  # as last announced
        self._next_announce = 0.0

    def announce(self, deployment: Deployment, role: IndexerRole) -> None:
        """Records this process in `role`, unless it did so in the same role less than
        ANNOUNCE_SECONDS ago."""
        now = time.monotonic()
        if role == self._role and now < self._next_announce:
            return
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

    def forget_role(self) -> None:
        """The database went away: the next announcement is as a first one (the stale rows deleted,
        this one recorded whatever the role)."""
        self._role = None

    def leave(self, deployment: Deployment) -> None:
        """This process stops: its row goes (if the database answers; else the next process's
        first announcement deletes it once stale)."""
        with contextlib.suppress(DatabaseError):
            IndexerProcess.objects.filter(deployment=deployment, name=self.name).delete()
