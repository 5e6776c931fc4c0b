"""indexer/pacing.py: the plan's budget is never exceeded in any second, a pause the node asks
for holds every request, and concurrency grows on quick successes and halves under load."""

from __future__ import annotations

import threading
import time

import pytest

from indexer.errors import Stopped
from indexer.pacing import Pacer


def _most_in_one_second(sends: list[tuple[float, int]]) -> int:
    """The most calls sent within any window of one second."""
    sends.sort()
    most = 0
    for i, (start, _) in enumerate(sends):
        most = max(most, sum(calls for at, calls in sends[i:] if at < start + 1.0))
    return most


@pytest.mark.parametrize("sizes", [[1], [1, 4], [5]], ids=["single calls", "mixed batches", "batches of 5"])
def test_no_second_holds_more_calls_than_the_budget(sizes: list[int]) -> None:
    pacer = Pacer(max_concurrency=8, requests_per_second=20, initial_concurrency=8)
    stop = threading.Event()
    sends: list[tuple[float, int]] = []
    lock = threading.Lock()

    def send(n: int) -> None:
        calls = sizes[n % len(sizes)]
        ticket = pacer.acquire(calls, stop)
        with lock:
            sends.append((time.monotonic(), calls))
        pacer.succeeded(ticket)

    started = time.monotonic()
    threads = [threading.Thread(target=send, args=(n,)) for n in range(10)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert _most_in_one_second(sends) <= 20
    total = sum(calls for _, calls in sends)
    assert time.monotonic() - started >= (total - 20) / 20  # it did have to wait


def test_a_pause_the_node_asks_for_holds_every_request() -> None:
    pacer = Pacer(max_concurrency=4)
    stop = threading.Event()
    ticket = pacer.acquire(1, stop)
    pacer.overloaded(ticket, retry_after=0.4)
    started = time.monotonic()
    pacer.succeeded(pacer.acquire(1, stop))
    assert time.monotonic() - started >= 0.35


def test_concurrency_doubles_each_quick_round_until_the_node_shows_load_then_grows_by_one() -> None:
    pacer = Pacer(max_concurrency=64, initial_concurrency=2)
    stop = threading.Event()

    def round_of_successes() -> None:
        # Requests that each take about 50 ms, as a node's answers do: a success is quick within
        # 4 times the quickest, so a busy machine's pause of a few milliseconds between two of them
        # does not make one slow (answers of a few microseconds would).
        tickets = [pacer.acquire(1, stop) for _ in range(pacer.limit)]
        time.sleep(0.05)
        for ticket in tickets:
            pacer.succeeded(ticket)

    round_of_successes()
    assert pacer.limit == 4
    round_of_successes()
    assert pacer.limit == 8
    pacer.overloaded(pacer.acquire(1, stop))
    assert pacer.limit == 4
    round_of_successes()
    assert pacer.limit == 5


def test_load_reported_by_requests_in_flight_together_halves_once() -> None:
    pacer = Pacer(max_concurrency=16, initial_concurrency=8)
    stop = threading.Event()
    tickets = [pacer.acquire(1, stop) for _ in range(8)]
    for ticket in tickets:
        pacer.overloaded(ticket)
    assert pacer.limit == 4
    every_slot_free = threading.Event()
    every_slot_free.set()  # a wait for a slot would raise Stopped at once
    for _ in range(4):
        pacer.acquire(1, every_slot_free)


def test_concurrency_never_passes_the_operators_cap() -> None:
    pacer = Pacer(max_concurrency=3, initial_concurrency=3)
    stop = threading.Event()
    for _ in range(20):
        pacer.succeeded(pacer.acquire(1, stop))
    assert pacer.limit == 3


def test_a_stop_ends_a_wait_for_a_slot_at_once() -> None:
    pacer = Pacer(max_concurrency=1, requests_per_second=1)
    stop = threading.Event()
    pacer.acquire(1, stop)  # holds the only slot
    threading.Timer(0.2, stop.set).start()
    started = time.monotonic()
    with pytest.raises(Stopped):
        pacer.acquire(1, stop)
    assert time.monotonic() - started < 0.5


def test_a_forked_process_shares_the_budget_but_not_the_requests_in_flight() -> None:
    pacer = Pacer(max_concurrency=1, requests_per_second=2)
    stop = threading.Event()
    pacer.acquire(1, stop)  # in flight when the reader process is forked: holds the parent's only slot
    forked = pacer.for_another_process()
    started = time.monotonic()
    forked.succeeded(forked.acquire(1, stop))  # a slot of its own, the budget's second call
    assert time.monotonic() - started < 0.2
    forked.succeeded(forked.acquire(1, stop))  # the budget is spent for this second, in both
    assert time.monotonic() - started >= 0.9
