"""The poll schedule of a caught-up indexer: when to ask the node for the head next.

A chain's timestamps are what it says, not when its blocks arrive: a developer's chain moves its
clock on purpose (`evm_increaseTime`), an automine chain makes a block when a transaction comes, a
sequencer that recovers or a testnet that restarts jumps. So the rhythm is learnt from when blocks
are seen (this machine's clock), and the timestamps only place the poll inside a rhythm that the
arrivals confirm:

- every head poll bounds when the new blocks arrived: after the poll before (which lacked them),
  no later than the poll that found them;
- the block time the timestamps give (the median of their recent steps) is trusted once
  CONFIRM polls in a row, each precise enough to tell (its bounds no wider than one and a half
  times the time it measures), found the blocks when that block time said, and each block's own
  timestamp agreed with its arrival;
- a trusted rhythm is dropped as soon as one poll contradicts it: blocks that came sooner than it
  says (an automine chain), a timestamp that disagrees with the arrival (a clock moved, a jump),
  or a block overdue by more than SLOTS_LATE block times (a chain that halted);
- without a trusted rhythm the indexer asks every `poll_interval` (BOUNTY_INDEXER_POLL_MS), and
  a step after a poll whose block the node lacked (the block is there);
  with one, when the next block is due (`BlockClock.wait`). No wait is ever longer than
  `ceiling` (BOUNTY_INDEXER_MAX_WAIT_MS).
"""

from __future__ import annotations

import collections
import logging
import statistics
import time
from dataclasses import dataclass

logger = logging.getLogger(__name__)

CONFIRM = 6  # polls in a row that bear out the timestamps' block time before it is trusted
SLOTS_LATE = 2  # a trusted rhythm's block later than this many block times: the chain halted
TIMESTAMP_SLACK = 1.0  # seconds: timestamps are whole seconds
ARRIVAL_SLACK = 0.1  # seconds, plus a tenth of the time measured: how much later a node may show a block


@dataclass(frozen=True)
class Seen:
    number: int
    timestamp: int  # the chain's
    at: float  # when the poll that found it was sent (this machine's clock, seconds)
    after: float | None  # when the poll before it was sent, which lacked it


class BlockClock:
    """When the next block is due.

    Inside a trusted rhythm of `block_time` seconds, a block can be seen some time after its
    timestamp (`delay`, which also holds how far this machine's clock is off the chain's): set by
    a poll that found a block a step after one that came too early, then drawn earlier by a
    twentieth of a step each block found at the first poll, so that a poll too early (asked again
    a `step` later) is rare. After three polls that find nothing (a slot without a block) the polls
    space out, doubling up to a quarter of the block time, until the block is SLOTS_LATE block
    times overdue: then every `poll_interval`."""

    DRAW_IN = 1 / 20  # of a step, by which each block found at the first poll moves the next poll earlier

    def __init__(self, poll_interval: float, ceiling: float) -> None:
        self.poll_interval = min(poll_interval, ceiling)
        self.ceiling = ceiling
        self.block_time: float | None = None  # the timestamps' median step, trusted or not
        self.trusted = False  # the arrivals bear the block time out
        self.delay = 0.0  # seconds after its timestamp a block is seen
        self._steps: collections.deque[float] = collections.deque(maxlen=32)
        self._last: Seen | None = None  # the newest block seen
        self._polled: float | None = None  # when the newest poll that saw the head, or lacked a newer one, was sent
        self._agreed = 0  # precise polls in a row that bore the block time out
        self._missed = 0  # polls since the last block that found nothing new
        self._missed_at = 0.0  # when the last of them was sent (wall-clock seconds)
        self._lacked = False  # the node lacked a block its head named: asked again a step later

    @property
    def step(self) -> float:
        """Between polls while a due block has not come."""
        if self.block_time is None:
            return self.poll_interval
        return min(self.poll_interval, max(0.02, self.block_time / 8))

    def polled(self, number: int, timestamp: int, sent: float) -> bool:
        """A poll sent at `sent` (wall-clock seconds) answered head `number` with `timestamp`;
        whether that head is new. A head lower than the newest seen is a backend behind the
        others: it teaches nothing."""
        self._lacked = False
        last = self._last
        if last is not None and number < last.number:
            return False
        if last is not None and number == last.number:
            self._missed += 1
            self._missed_at = self._polled = max(sent, self._polled or sent)
            return False
        self._seen(number, timestamp, sent)
        return True

    def asked_again(self) -> None:
        """The node lacked a block the head's poll named (a backend behind): the next poll a step
        later, trusted rhythm or not (the block is there)."""
        self._missed += 1
        self._missed_at = time.time()
        self._lacked = True

    def _seen(self, number: int, timestamp: int, sent: float) -> None:
        last, seen = self._last, Seen(number, timestamp, sent, self._polled)
        self._last, self._polled = seen, sent
        if last is None:
            return
        blocks = number - last.number
        self._steps.append((timestamp - last.timestamp) / blocks)
        median = statistics.median(self._steps) if len(self._steps) >= 3 else None
        self.block_time = median or None
        self._judge(last, seen, blocks)
        if self.block_time is not None:
            self._place(last, seen, blocks)
        self._missed = 0

    def _judge(self, last: Seen, seen: Seen, blocks: int) -> None:
        """Whether this poll bears the block time out, breaks a trusted rhythm, or tells nothing."""
        earliest = (seen.after - last.at) if seen.after is not None else 0.0  # between the two arrivals
        latest = (seen.at - last.after) if last.after is not None else float("inf")
        elapsed = seen.timestamp - last.timestamp
        timestamps_agree = earliest - TIMESTAMP_SLACK - 0.1 * elapsed <= elapsed <= \
            latest + TIMESTAMP_SLACK + 0.1 * elapsed
        if self.block_time is None or not timestamps_agree:
            self._distrust(f"block {seen.number}'s timestamp is {elapsed} s after block {last.number}'s, and it came "
                           f"{earliest:.2f}-{latest:.2f} s after it")
            return
        expected = self.block_time * blocks
        slack = ARRIVAL_SLACK + 0.1 * expected
        # Sooner than the rhythm says, by their arrival or (timestamps that agree with arrivals
        # being when blocks are made) by their timestamps: an automine chain's transaction.
        early = expected > latest + slack or elapsed + TIMESTAMP_SLACK < expected - slack
        late = expected < earliest - slack or elapsed - TIMESTAMP_SLACK > expected + slack
        if self.trusted:
            if early or earliest > expected + SLOTS_LATE * self.block_time + slack:
                self._distrust(f"block {seen.number} came {earliest:.2f}-{latest:.2f} s after block {last.number} "
                               f"(timestamps {elapsed} s apart), not about {expected:.2f} s")
            return
        if early or late:
            self._agreed = 0
        elif latest - earliest <= 1.5 * expected:  # precise enough to tell
            self._agreed += 1
            if self._agreed >= CONFIRM:
                self.trusted = True
                logger.debug("a block every %.2f s, as the timestamps say and the arrivals bear out: polling when "
                             "the next is due", self.block_time)

    def _distrust(self, why: str) -> None:
        if self.trusted:
            logger.debug("%s: polling every %.2f s until the rhythm is borne out again", why, self.poll_interval)
        self.trusted = False
        self._agreed = 0

    def _place(self, last: Seen, seen: Seen, blocks: int) -> None:
        """Where inside the block time a block is seen, relative to its timestamp."""
        assert self.block_time is not None
        if self._missed:  # found after a poll too early: it came between that poll and this one
            # (a local clock ahead of the chain's adds to it: no cap)
            earliest, latest = self._missed_at - seen.timestamp, seen.at - seen.timestamp
            if latest - earliest <= 2 * self.step:  # asked a step apart: it was seen about then
                self.delay = latest
            else:  # asked long apart (a slot without a block before it): as known, within the bounds
                self.delay = min(latest, max(earliest, self.delay))
        else:  # found at the first poll: earlier next time, by more if blocks came between; and
            # never later than it was seen (a timestamp that jumped ahead shows it came early)
            self.delay = min(self.delay - self.DRAW_IN * self.step - (blocks - 1) * self.block_time,
                             seen.at - seen.timestamp)

    def wait(self, now: float | None = None) -> float:
        """Seconds until the next poll: never more than the ceiling."""
        return min(self.ceiling, self._wait(time.time() if now is None else now))

    def _wait(self, now: float) -> float:
        last, block_time = self._last, self.block_time
        if self._lacked:
            return self.step
        if not self.trusted or block_time is None or last is None:
            return self.poll_interval
        if now - last.at > (1 + SLOTS_LATE) * block_time:  # overdue: a chain that halted, or a rhythm ended
            return self.poll_interval
        if self._missed > 3:  # a slot without a block: ask less and less often
            return max(self.step, min(self.step * 2.0 ** min(self._missed - 3, 16), block_time / 4))
        due = last.timestamp + block_time + self.delay
        if self._missed or due <= now:
            return self.step
        return min(due - now, block_time + self.step)
