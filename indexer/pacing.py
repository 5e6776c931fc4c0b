"""When a request to the node may leave: the plan's budget of calls per second, a pause the node
asked for, and how many requests may be in flight at once.

- **The budget** (BOUNTY_RPC_MAX_REQUESTS_PER_SECOND, counting each call of a batch, as providers
  do): a request of n calls leaves once the calls sent in the second before it leave room for n
  more, so that no window of one second, wherever it starts, holds more than the budget (the
  strictest way a provider may count; a margin covers the jitter of the way there).
- **A pause** (a 429's Retry-After): no request leaves before it ends.
- **Concurrency** adapts to the node as TCP's congestion window does: it starts with a few
  requests in flight and doubles them each round of quick successes (slow start) until the node
  first shows load; from then on, one more request in flight for each round of quick successes
  (additive increase), half as many after a rate limit, a timeout or a server error
  (multiplicative decrease), never more than BOUNTY_RPC_MAX_CONCURRENCY.

The spacing and the pause are shared with the processes forked from this one (a bulk backfill's
reader), so that one budget holds for the indexer however many processes send; the concurrency
is each process's own.
"""

from __future__ import annotations

import copy
import multiprocessing
import threading
import time
from dataclasses import dataclass

from indexer.errors import Stopped

INITIAL_CONCURRENCY = 4
# A success counts as quick, and lets concurrency grow, while it takes less than this many times
# the quickest answer seen: a node that queues requests answers slower before it refuses them.
SLOW_FACTOR = 4.0
_WAIT_STEP = 0.1  # seconds between looks at `stop` while waiting for a slot
# Seconds added to the budget's window: a request reaches the node some time after it was let go
# (the thread's turn, the connection), and more so on a busy machine, so two requests let go a
# second apart may arrive closer than that.
BUDGET_MARGIN = 0.1


@dataclass(frozen=True)
class Ticket:
    """A request's slot: when it was sent, for the latency."""

    sent: float


class Pacer:
    def __init__(self, *, max_concurrency: int = 16, requests_per_second: float | None = None,
                 initial_concurrency: int = INITIAL_CONCURRENCY) -> None:
        self.max_concurrency = max(1, max_concurrency)
        self.requests_per_second = requests_per_second
        # Shared with forked processes, on the monotonic clock (system-wide): the send times of the
        # last `budget` calls (a ring, `_next` its oldest), and the end of a pause.
        context = multiprocessing.get_context("fork")
        self._budget = max(1, int(requests_per_second)) if requests_per_second is not None else 0
        self._lock = context.Lock()
        self._sent = context.Array("d", max(1, self._budget), lock=False)
        self._next = context.Value("i", 0, lock=False)
        self._pause_until = context.Value("d", 0.0, lock=False)
        self._condition = threading.Condition()
        self._limit = float(min(initial_concurrency, self.max_concurrency))
        self._in_flight = 0
        self._quickest: float | None = None
        self._last_decrease = 0.0
        self._slow_start = True  # until the node first shows load

    def for_another_process(self) -> Pacer:
        """The pacer for a process forked from this one: the same budget and pauses (they are
        shared), and concurrency of its own, starting where this one stands, with none of this
        process's requests in flight and locks of its own (a thread may have held these at the fork)."""
        other = copy.copy(self)
        other._condition = threading.Condition()
        other._in_flight = 0
        return other

    @property
    def limit(self) -> int:
        """How many requests may be in flight now."""
        return max(1, int(self._limit))

    def max_batch(self) -> int | None:
        """The most calls one request may carry under the budget (None: no budget)."""
        return self._budget or None

    def acquire(self, calls: int, stop: threading.Event) -> Ticket:
        """Waits for a slot for a request of `calls` calls; Stopped once `stop` is set."""
        with self._condition:
            while self._in_flight >= self.limit:
                if stop.is_set():
                    raise Stopped("stopped while waiting to send a request to the node")
                self._condition.wait(_WAIT_STEP)
            self._in_flight += 1
        try:
            send_at, slots = self._reserve(calls)
            self._wait(send_at, stop)
            self._sent_now(slots)
        except BaseException:
            self._leave()
            raise
        return Ticket(time.monotonic())

    def succeeded(self, ticket: Ticket) -> None:
        latency = time.monotonic() - ticket.sent
        with self._condition:
            self._quickest = latency if self._quickest is None else min(self._quickest, latency)
            if latency <= SLOW_FACTOR * self._quickest + 0.001:
                growth = 1.0 if self._slow_start else 1 / self.limit  # one a round of `limit`
                self._limit = min(float(self.max_concurrency), self._limit + growth)
        self._leave()

    def overloaded(self, ticket: Ticket, retry_after: float | None = None) -> None:
        """The node refused for load (429), timed out or failed (5xx): half as many in flight, at
        most once per round trip (the requests in flight with this one report the same load)."""
        now = time.monotonic()
        if retry_after is not None and retry_after > 0:
            with self._lock:
                self._pause_until.value = max(self._pause_until.value, now + retry_after)
        with self._condition:
            round_trip = self._quickest if self._quickest is not None else 0.0
            if now - self._last_decrease > max(round_trip, now - ticket.sent):
                self._limit = max(1.0, self._limit / 2)
                self._last_decrease = now
                self._slow_start = False
        self._leave()

    def failed(self, ticket: Ticket) -> None:
        """Neither a success nor a sign of load (a deterministic error): only the slot is freed."""
        self._leave()

    def _leave(self) -> None:
        with self._condition:
            self._in_flight -= 1
            self._condition.notify_all()

    def _reserve(self, calls: int) -> tuple[float, list[int]]:
        """The time the request may leave: after any pause, and once its calls fit the budget (a
        request of more calls than the budget waits as for the whole budget: callers split them)."""
        now = time.monotonic()
        with self._lock:
            earliest = max(now, float(self._pause_until.value))
            if not self._budget:
                return earliest, []
            calls = min(calls, self._budget)
            # The (budget - calls + 1)-th most recent call must be over a second old when this leaves.
            oldest = self._next.value
            send_at = max(earliest, float(self._sent[(oldest + calls - 1) % self._budget]) + 1 + BUDGET_MARGIN)
            slots = []
            for _ in range(calls):
                slots.append(self._next.value)
                self._sent[self._next.value] = send_at
                self._next.value = (self._next.value + 1) % self._budget
            return send_at, slots

    def _sent_now(self, slots: list[int]) -> None:
        """Records the time the request really leaves, if its wait ended late."""
        now = time.monotonic()
        with self._lock:
            for slot in slots:
                self._sent[slot] = max(float(self._sent[slot]), now)

    @staticmethod
    def _wait(until: float, stop: threading.Event) -> None:
        while (left := until - time.monotonic()) > 0:
            if stop.wait(min(left, _WAIT_STEP)):
                raise Stopped("stopped while waiting to send a request to the node")
