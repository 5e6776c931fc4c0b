"""The head poll: where the chain is, asked of the node in one request.

`HeadPoll.head` asks for the chain head's header and, with BOUNTY_CONFIRMATIONS a block tag
(safe, finalized), the tagged block's: the safe head is the newest block deep enough to index.
`HeadPoll.poll`, which each step of the indexer starts with, also teaches the block clock
(indexer.clock) whether the head moved (the rhythm it then trusts goes to /health and the
metrics through the committer), and says when it has stayed IDLE_CHECK_SECONDS: the
indexed tip is then compared with the chain (a reorganisation that kept the height). The header
kept from the poll (`latest`) lets the realtime phase and the tip's check go without asking again.
"""

from __future__ import annotations

import logging
import time
from typing import Any, NamedTuple

from indexer.clock import BlockClock
from indexer.commit import Committer
from indexer.errors import IndexerError
from indexer.rpc import UNREACHABLE_AFTER, RpcClient
from indexer.transitions import chain_time

logger = logging.getLogger(__name__)

IDLE_CHECK_SECONDS = 5.0  # without a new head, how often the indexed tip is compared with the chain


class Polled(NamedTuple):
    """What a poll found."""

    head: int
    safe: int
    idle: bool  # the head has not moved for IDLE_CHECK_SECONDS: the indexed tip is to be checked


class HeadPoll:
    """The indexer's polls of the head, and the header the last one brought."""

    def __init__(self, rpc: RpcClient, confirmations: int | str, clock: BlockClock, committer: Committer) -> None:
        self.rpc = rpc
        self.confirmations = confirmations
        self.clock = clock
        self.committer = committer
        self.latest: dict[str, Any] | None = None  # the head's header as last polled
        self._new_head_at = time.monotonic()  # when the head last moved

    def head(self) -> tuple[int, int]:
        """The chain head's number (its time kept for the metrics) and the safe head's: the newest
        block deep enough to index, by BOUNTY_CONFIRMATIONS' count or block tag. One request."""
        depth = self.confirmations
        calls = [("eth_getBlockByNumber", ["latest", False])]
        if isinstance(depth, str):
            calls.append(("eth_getBlockByNumber", [depth, False]))
        answers = self.rpc.batch(calls, failures=UNREACHABLE_AFTER)  # /health knows within seconds
        for tag, header in zip(("latest", depth), answers, strict=False):
            if not isinstance(header, dict) or "number" not in header:
                raise IndexerError(f"the node at {self.rpc.node} answered {header!r} for its {tag} block")
        head = int(answers[0]["number"], 16)
        self.latest = answers[0]
        self.committer.head_time = chain_time(int(answers[0]["timestamp"], 16))
        self.committer.count_rpc(self.rpc.tally.take())
        safe = int(answers[1]["number"], 16) if isinstance(depth, str) else head - depth
        return head, safe

    def poll(self) -> Polled:
        """The head and safe head, the block clock taught whether the head moved."""
        sent = time.time()
        head, safe = self.head()
        latest, idle = self.latest, False
        assert latest is not None  # head() keeps the header it was answered
        new = self.clock.polled(head, int(latest["timestamp"], 16), sent)
        if new:
            self._new_head_at = time.monotonic()
        elif time.monotonic() - self._new_head_at >= IDLE_CHECK_SECONDS:
            self._new_head_at = time.monotonic()
            idle = True
        self.committer.rhythm_kept(self.clock.rhythm, self.clock.trusted_since)
        if logger.isEnabledFor(logging.DEBUG):  # LOG_LEVEL=DEBUG: each poll, to see the schedule at work
            logger.debug("head %d%s stamped %s, answered %.3f s after the poll was sent; rhythm %s; next poll in "
                         "%.3f s", head, " (new)" if new else "", int(latest["timestamp"], 16),
                         time.time() - sent, self.clock.rhythm, self.clock.wait())
        return Polled(head, safe, idle)

    def replaced(self, head: int, last: int, tip: str | None) -> bool:
        """Whether the polled `head` is the indexed tip's height (`last`) with another hash than
        `tip`: a check of the tip is due. Told from the header the poll brought, without a call;
        only when blocks are indexed at the head (no confirmations)."""
        latest = self.latest
        if head != last or latest is None or isinstance(self.confirmations, str) or self.confirmations:
            return False
        return bool(latest["hash"] != tip)
