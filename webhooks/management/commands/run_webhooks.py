"""manage.py run_webhooks: the delivery worker (webhooks.worker), run like the indexer under systemd
(deploy/bounty-webhooks.service). SIGTERM or SIGINT stops it within a second, exit code 0."""

from __future__ import annotations

import asyncio
import gc
import logging
import signal
import threading
from typing import Any

from channels.layers import InMemoryChannelLayer, get_channel_layer
from django.conf import settings
from django.core.management.base import BaseCommand, CommandError, CommandParser

from bountysite.redis_reach import FAILURES, REDIS
from indexer.management.commands.run_indexer import require_migrated_database
from records.changes import CHANGES_GROUP
from webhooks.metrics import METRICS
from webhooks.moderation import watch_disputes
from webhooks.worker import Worker

logger = logging.getLogger(__name__)

LISTEN_RETRY_SECONDS = 2.0  # between attempts to reach Redis again


class Command(BaseCommand):
    help = ("Deliver the change log to the webhook endpoints registered in the admin, and tell the "
            "moderators' channels of disputes waiting for review (SIGTERM or SIGINT stops it within a second).")

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--metrics-port", type=int, default=None,
                            help="serve the Prometheus metrics on this port (overrides BOUNTY_WEBHOOKS_METRICS_PORT)")

    def handle(self, *args: Any, **options: Any) -> None:
        port: int | None = options["metrics_port"] or settings.BOUNTY_WEBHOOKS_METRICS_PORT
        if port is not None:
            address: str = settings.BOUNTY_WEBHOOKS_METRICS_ADDRESS
            try:
                METRICS.serve(port, address)
            except OSError as exc:
                raise CommandError(f"cannot serve the metrics on {address} port {port}: {exc}") from exc
        require_migrated_database(threading.Event())
        asyncio.run(_run())
        logger.info("webhook worker stopped")
        gc.freeze()  # the process exits now: no last collection of the whole heap


async def _run() -> None:
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(signum, stop.set)
    worker = Worker()
    logger.info("webhook worker %s started", worker.ledger.owner)
    helpers = [asyncio.create_task(_listen(worker)), asyncio.create_task(watch_disputes(stop))]
    try:
        await worker.run(stop)
    finally:
        for task in helpers:
            task.cancel()
        await asyncio.gather(*helpers, return_exceptions=True)


async def _listen(worker: Worker) -> None:
    """Wakes the worker on each commit the indexer announces through Redis; without Redis the
    worker polls (BOUNTY_WEBHOOKS_POLL_MS)."""
    layer = get_channel_layer()
    if layer is None or isinstance(layer, InMemoryChannelLayer):
        return
    channel = await layer.new_channel()
    while True:
        try:
            await layer.group_add(CHANGES_GROUP, channel)  # again each round: group membership expires
            REDIS.answered()
            for _ in range(60):
                try:
                    async with asyncio.timeout(60):
                        await layer.receive(channel)
                    worker.wake()
                except TimeoutError:
                    pass
        except FAILURES as error:
            REDIS.record(error)
            await asyncio.sleep(LISTEN_RETRY_SECONDS)
        except Exception:
            logger.exception("lost the channel layer; polling meanwhile")
            await asyncio.sleep(LISTEN_RETRY_SECONDS)
