"""The live feed's memory of the changes it read last, so that a client resuming inside it costs
the database nothing.

After a restart or a network blip, thousands of clients come back at once, each with the position
of the last change it applied (`?since=`), and nearly all of them need the same few changes. The
feed (records.ws.feed) keeps the messages it fanned out, with their positions (records.history)
and their frames, newest last, bounded by BOUNTY_WS_RECENT_MESSAGES and BOUNTY_WS_RECENT_BYTES; a
process that starts fills it with the newest entries of the change log in one read, shared by every
client. A position it remembers is one the feed read from the change log it follows, so it vouches
for it as the change log would (the same digest at the same seq), and the client is sent the
messages after it from memory. Anything else (older than the memory, newer than the feed, another
history) is asked of the database as before.

Like centrifugo's history streams (an offset and an epoch, recovery from memory), with the
position's digest as the epoch.
"""

from __future__ import annotations

from collections import deque
from typing import NamedTuple

from records.history import Position


class Remembered(NamedTuple):
    """One message the feed fanned out."""

    seq: int
    digest: str  # of the change `seq` (records.history): with the seq, the position after it
    text: bytes
    frame: bytes
    resync: bool


class RecentChanges:
    """The newest messages of the history the feed follows, consecutive by seq, ending at the
    feed's cursor; `base` is the position just before the first of them, when known."""

    def __init__(self) -> None:
        self._entries: deque[Remembered] = deque()
        self._bytes = 0
        self.base: Position | None = None
        self.max_messages = 0
        self.max_bytes = 0

    def reset(self, at: Position | None, *, max_messages: int, max_bytes: int) -> None:
        """Forgets everything: the feed goes on from `at` (None: from a position not known)."""
        self._entries.clear()
        self._bytes = 0
        self.base = at
        self.max_messages, self.max_bytes = max_messages, max_bytes

    def extend(self, entries: list[Remembered]) -> None:
        """Remembers the messages that follow the newest one (older ones are forgotten to stay
        within the bounds)."""
        for entry in entries:
            if self._entries and entry.seq != self._entries[-1].seq + 1:
                self.reset(None, max_messages=self.max_messages, max_bytes=self.max_bytes)
            self._entries.append(entry)
            self._bytes += len(entry.text) + len(entry.frame)
        while self._entries and (len(self._entries) > self.max_messages or self._bytes > self.max_bytes):
            first = self._entries.popleft()
            self._bytes -= len(first.text) + len(first.frame)
            self.base = Position(first.seq, first.digest)

    def vouches(self, position: Position) -> bool:
        """Whether `position` is one of this history that the memory reaches: its base, or a
        remembered message's seq with the same digest."""
        if position == self.base:
            return True
        index = self._index(position.seq)
        return index is not None and self._entries[index].digest == position.digest

    def from_seq(self, seq: int) -> list[Remembered] | None:
        """The remembered messages from `seq` on, through the first `resync` among them; None when
        the memory does not reach back to `seq` (an empty list when `seq` is past the newest)."""
        if not self._entries:
            return [] if self.base is not None and seq == self.base.seq + 1 else None
        if seq == self._entries[-1].seq + 1:
            return []
        index = self._index(seq)
        if index is None:
            return None
        found: list[Remembered] = []
        for position in range(index, len(self._entries)):
            found.append(self._entries[position])
            if self._entries[position].resync:
                break
        return found

    def _index(self, seq: int) -> int | None:
        if not self._entries or not self._entries[0].seq <= seq <= self._entries[-1].seq:
            return None
        return seq - self._entries[0].seq

    def __len__(self) -> int:
        return len(self._entries)

    @property
    def size(self) -> int:
        """The bytes of the remembered texts and frames."""
        return self._bytes
