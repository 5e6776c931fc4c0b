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
- a chain whose timestamps step evenly but at another pace than its blocks arrive (a developer's
  chain mined with a timestamp interval: `anvil_mine` one block a second with a one-second step
  stamps two seconds a block) has its rhythm learnt from the arrivals alone (ArrivalRhythm): the
  longest run of recent blocks whose arrival bounds fit one period, trusted once RUN blocks fit it
  closely; the next poll is placed by where the last block was seen, not by its timestamp;
- what broke a rhythm (a burst, a clock moved, a halt) is forgotten within about ten blocks: the
  block time is the median of the last STEPS steps only, and the arrivals' run starts again at
  the first block that does not fit;
- a backend behind the others (a lower head, or a block its head named that it lacks) teaches
  nothing and drops nothing: the block is asked for again a step later (after a lower head, up
  to BEHIND_AGAIN times in a row: a node that fell back for good is asked as before);
- without a trusted rhythm the indexer asks every `poll_interval` (BOUNTY_INDEXER_POLL_MS), and
  a step after a poll whose block the node lacked (the block is there);
  with one, when the next block is due (`BlockClock.wait`). No wait is ever longer than
  `ceiling` (BOUNTY_INDEXER_MAX_WAIT_MS).
"""

from __future__ import annotations

import collections
import logging
import math
import statistics
import time
from dataclasses import dataclass
from datetime import UTC, datetime

logger = logging.getLogger(__name__)

CONFIRM = 6  # polls in a row that bear out the timestamps' block time before it is trusted
STEPS = 7  # the block time is the median of this many recent timestamp steps: a burst or a move forgotten soon
RUN = 8  # blocks in a row whose arrivals fit one period before that period is trusted (ArrivalRhythm)
SLOTS_LATE = 2  # a trusted rhythm's block later than this many block times: the chain halted
TIMESTAMP_SLACK = 1.0  # seconds: timestamps are whole seconds
BEHIND_AGAIN = 3  # lower heads in a row asked again a step later (the next request likely meets another backend)
ARRIVAL_SLACK = 0.1  # seconds, plus a tenth of the time measured: how much later a node may show a block


@dataclass(frozen=True)
class Arrival:
    """A block found by a poll: when it became visible lies between the poll before, which lacked it,
    and the poll that found it (this machine's clock, seconds)."""

    number: int
    timestamp: int  # the chain's
    earliest: float  # -inf when no poll lacked it
    latest: float


class ArrivalRhythm:
    """The period at which blocks arrive, by this machine's clock, whatever their timestamps say.

    Each block's arrival is bounded by two polls; the run holds the newest blocks whose bounds all
    fit one period P (a block n arrives at φ + n·P, give or take `slack`) and whose timestamps
    step evenly. For every pair of blocks m < n that bounds P from both sides:
    (earliest_n - slack - latest_m) / (n - m) <= P <= (latest_n - earliest_m + slack) / (n - m),
    and the pairs together are exact: P fits them all if and only if it lies in every pair's
    interval. A block that no period fits with the run starts the run again (the rhythm broke:
    a burst, a pause, a clock moved); so does one whose timestamp breaks the even steps."""

    WINDOW = 48  # blocks kept: the longer the run, the closer the period

    def __init__(self, slack: float) -> None:
        self.slack = slack  # seconds: how much later than its rhythm a block may be seen
        self.run: collections.deque[Arrival] = collections.deque(maxlen=self.WINDOW)
        self.low, self.high = 0.0, math.inf  # the periods that fit the run

    @property
    def period(self) -> float | None:
        return (self.low + self.high) / 2 if len(self.run) >= 2 and self.high < math.inf else None

    def add(self, arrival: Arrival) -> bool:
        """Adds the newest block; False when it broke the run (the run then starts again from the
        blocks it fits)."""
        kept = list(self.run)
        while kept:
            bounds = self._fit([*kept, arrival])
            if bounds is not None:
                break
            kept.pop(0)
        else:
            bounds = (0.0, math.inf)
        broke = len(kept) < len(self.run)
        self.run = collections.deque([*kept, arrival], maxlen=self.WINDOW)
        self.low, self.high = bounds
        return not broke

    def _fit(self, run: list[Arrival]) -> tuple[float, float] | None:
        first, last = run[0], run[-1]
        step = (last.timestamp - first.timestamp) / (last.number - first.number)
        if any(abs(a.timestamp - first.timestamp - step * (a.number - first.number)) > TIMESTAMP_SLACK for a in run):
            return None  # timestamps that do not step evenly: a clock moved, an automine chain
        low, high = 0.0, math.inf
        for i, m in enumerate(run):
            for n in run[i + 1:]:
                blocks = n.number - m.number
                low = max(low, (n.earliest - self.slack - m.latest) / blocks)
                high = min(high, (n.latest - m.earliest + self.slack) / blocks)
        return (low, high) if low <= high else None


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
    a `step` later) is rare. A rhythm of the arrivals alone (`paced`) keeps, the same way, when the
    newest block was seen (`_mark`), and the next is due a period after it. After three polls that
    find nothing (a slot without a block) the polls space out, doubling up to a quarter of the
    block time, until the block is SLOTS_LATE block times overdue: then every `poll_interval`."""

    DRAW_IN = 1 / 20  # of a step, by which each block found at the first poll moves the next poll earlier

    def __init__(self, poll_interval: float, ceiling: float) -> None:
        self.poll_interval = min(poll_interval, ceiling)
        self.ceiling = ceiling
        self.block_time: float | None = None  # the timestamps' median step, trusted or not
        self.stamped = False  # the arrivals bear the timestamps' block time out
        self.paced = False  # the arrivals alone keep a period the timestamps do not (ArrivalRhythm)
        self.trusted_since: datetime | None = None  # when the rhythm trusted now was trusted
        self.delay = 0.0  # seconds after its timestamp a block is seen
        self.arrivals = ArrivalRhythm(ARRIVAL_SLACK)
        self._mark = 0.0  # paced: about when the newest block was seen (wall-clock seconds)
        self._steps: collections.deque[float] = collections.deque(maxlen=STEPS)
        self._last: Seen | None = None  # the newest block seen
        self._polled: float | None = None  # when the newest poll that saw the head, or lacked a newer one, was sent
        self._agreed = 0  # precise polls in a row that bore the block time out
        self._missed = 0  # polls since the last block that found nothing new
        self._missed_at = 0.0  # when the last of them was sent (wall-clock seconds)
        self._lacked = False  # the node lacked a block its head named: asked again a step later
        self._behind = 0  # polls in a row answered with a lower head (a backend behind): asked again a step later

    @property
    def trusted(self) -> bool:
        """A rhythm is trusted: the next poll goes when the next block is due."""
        return self.stamped or self.paced

    @property
    def rhythm(self) -> float | None:
        """The trusted rhythm's block time in seconds (this machine's), or None."""
        if self.paced:
            return self.arrivals.period
        return self.block_time if self.stamped else None

    @property
    def step(self) -> float:
        """Between polls while a due block has not come."""
        period = self.arrivals.period if self.paced else self.block_time
        if period is None:
            return self.poll_interval
        return min(self.poll_interval, max(0.02, period / 8))

    def polled(self, number: int, timestamp: int, sent: float) -> bool:
        """A poll sent at `sent` (wall-clock seconds) answered head `number` with `timestamp`;
        whether that head is new. A head lower than the newest seen is a backend behind the
        others: it teaches nothing and drops nothing (a block the node lacked is still asked for
        a step later)."""
        last = self._last
        if last is not None and number < last.number:
            self._behind += 1
            return False
        self._behind = 0
        lacked, self._lacked = self._lacked, False
        if last is not None and number == last.number:
            self._polled = max(sent, self._polled or sent)
            if not lacked:  # a poll for the next block that came too early; a retry of a lacked one is not
                self._missed += 1
                self._missed_at = self._polled
            return False
        self._seen(number, timestamp, sent)
        return True

    def asked_again(self) -> None:
        """The node lacked a block the head's poll named (a backend behind): the next poll a step
        later, trusted rhythm or not (the block is there). The rhythm stands: the block came when due."""
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
        was = self.rhythm is not None
        self._judge(last, seen, blocks)
        if self.block_time is not None:
            self._place(last, seen, blocks)
        self._pace(seen, blocks)
        self._missed = 0
        if self.trusted and not was:
            self.trusted_since = datetime.fromtimestamp(sent, UTC)
        elif not self.trusted:
            self.trusted_since = None

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
        if self.stamped:
            if early or earliest > expected + SLOTS_LATE * self.block_time + slack:
                self._distrust(f"block {seen.number} came {earliest:.2f}-{latest:.2f} s after block {last.number} "
                               f"(timestamps {elapsed} s apart), not about {expected:.2f} s")
            return
        if early or late:
            self._agreed = 0
        elif latest - earliest <= 1.5 * expected:  # precise enough to tell
            self._agreed += 1
            if self._agreed >= CONFIRM:
                self.stamped = True
                logger.debug("a block every %.2f s, as the timestamps say and the arrivals bear out: polling when "
                             "the next is due", self.block_time)

    def _distrust(self, why: str) -> None:
        if self.stamped:
            logger.debug("%s: polling every %.2f s until the rhythm is borne out again", why, self.poll_interval)
        self.stamped = False
        self._agreed = 0

    def _pace(self, seen: Seen, blocks: int) -> None:
        """The arrivals' own rhythm (ArrivalRhythm): trusted once RUN blocks in a row fit a period
        within a tenth that the timestamps do not keep (they then cannot be trusted either, however
        loosely they seem to agree), and longer than the poll interval (faster blocks cost less
        than a call each anyway)."""
        fits = self.arrivals.add(Arrival(seen.number, seen.timestamp,
                                         seen.after if seen.after is not None else -math.inf, seen.at))
        period, arrivals = self.arrivals.period, self.arrivals
        if period is None or len(arrivals.run) < RUN or arrivals.high - arrivals.low > 0.1 * period or (
                self.block_time is not None and abs(self.block_time - period) <= max(TIMESTAMP_SLACK / 2,
                                                                                      0.1 * period)):
            paced = False  # no period close enough yet, or the timestamps keep it
        else:
            self._distrust(f"blocks arrive every {period:.2f} s, though their timestamps step {self.block_time} s")
            paced = fits and period > self.poll_interval
        if paced and period is not None:
            if not self.paced:  # where the newest block was seen at the latest, by the last blocks' bounds
                self._mark = min(a.latest + (seen.number - a.number) * period for a in list(arrivals.run)[-4:])
                logger.debug("blocks arrive every %.2f s, though their timestamps step %s s: polling when the next "
                             "is due", period, self.block_time)
            elif self._missed:  # found after a poll too early: it came between that poll and this one
                self._mark = seen.at if seen.at - self._missed_at <= 2 * self.step else \
                    min(seen.at, max(self._missed_at, self._mark + blocks * period))
            else:  # found at the first poll: the next one earlier, by more if blocks came between
                self._mark = min(self._mark + period - self.DRAW_IN * self.step, seen.at)
        elif self.paced:
            logger.debug("block %d came off the arrivals' rhythm of %.2f s: polling every %.2f s until it is "
                         "borne out again", seen.number, period or 0.0, self.poll_interval)
        self.paced = paced

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
        last, block_time = self._last, self.rhythm
        if self._lacked or 0 < self._behind <= BEHIND_AGAIN:
            return self.step
        if block_time is None or last is None:
            return self.poll_interval
        if now - last.at > (1 + SLOTS_LATE) * block_time:  # overdue: a chain that halted, or a rhythm ended
            return self.poll_interval
        if self._missed > 3:  # a slot without a block: ask less and less often
            return max(self.step, min(self.step * 2.0 ** min(self._missed - 3, 16), block_time / 4))
        due = self._mark + block_time if self.paced else last.timestamp + block_time + self.delay
        if self._missed or due <= now:
            return self.step
        return min(due - now, block_time + self.step)
