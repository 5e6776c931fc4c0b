"""One client's bounded queue of live messages, and how a client's messages reach its socket."""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import Awaitable, Callable

from records.limits import ws_backlog
from records.metrics import WS_MESSAGES
from records.ws.messages import MessageBatch

Send = Callable[[MessageBatch], Awaitable[None]]  # sends a client the batch's messages, waiting for the socket
# Writes frames at once if the socket can take them now (open, not held back); False otherwise.
WriteNow = Callable[[bytes], bool]


class TooSlow(Exception):
    """The client reads its messages slower than they come (close with 1008)."""


class Outbox:
    """One client's bounded queue of live messages; `next_seq` is the first it has not been given.

    It takes the batches the feed puts (shared with every other client). With `write_now` (the
    server's frame extension, bountysite/daphne_ws.py) a batch goes straight to the socket when
    nothing is queued before it and the socket takes it, with no task switch to the client's sender;
    otherwise it is queued and the sender gets everything pending at once."""

    def __init__(self, next_seq: int, on_overflow: Callable[[], None], write_now: WriteNow | None = None) -> None:
        self.next_seq = next_seq
        self.write_now = write_now
        self.bound = ws_backlog()
        self.on_overflow = on_overflow
        self.overflowed = False
        self.failure: Exception | None = None
        self._batches: deque[MessageBatch] = deque()
        self._count = 0  # messages in _batches
        self._ready = asyncio.Event()

    def put(self, first_seq: int, batch: MessageBatch) -> None:
        """Gives the client the messages of seqs first_seq, first_seq + 1, ... past `next_seq`."""
        skip = self.next_seq - first_seq
        if skip >= len(batch) or self.overflowed:
            return
        if skip > 0:
            batch = batch.after(skip)
        # Straight to the socket only with nothing queued: the sender writes what it takes from
        # the queue without waiting in between, so it never holds older frames unwritten.
        if self._batches or self.write_now is None or not self.write_now(batch.frames):
            if self._count + len(batch) > self.bound:
                # The client's sender is stuck waiting for the socket: tell the consumer right away.
                self.overflowed = True
                self._batches.clear()
                self.on_overflow()
            else:
                self._batches.append(batch)
                self._count += len(batch)
            self._ready.set()
        self.next_seq = first_seq + max(skip, 0) + len(batch)
        if not self.overflowed:
            WS_MESSAGES.inc(len(batch))

    @property
    def queued(self) -> int:
        """Messages waiting for the client's sender."""
        return self._count

    def fail(self, error: Exception) -> None:
        """Ends the client's stream: `get` raises `error` from now on."""
        self.failure = error
        self._ready.set()

    async def get(self) -> MessageBatch:
        """Every message pending, waiting for one if there is none."""
        while not self._batches and not self.overflowed and self.failure is None:
            self._ready.clear()
            await self._ready.wait()
        if self.overflowed:
            raise TooSlow
        if not self._batches and self.failure is not None:  # what was put before the failure goes first
            raise self.failure
        batch = self._batches.popleft() if len(self._batches) == 1 else MessageBatch.joined(self._batches)
        self._batches.clear()
        self._count = 0
        return batch
