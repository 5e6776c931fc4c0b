"""Waiting out an outage (indexer.outage): how long the indexer waits before asking again a node
that does not answer, and a database that went away. The waits are read from the stop event
they are waited on, which a stop request would end."""

from __future__ import annotations

import threading
from collections.abc import Callable

import pytest

from indexer.commit import Committer
from indexer.config import IndexerConfig
from indexer.errors import RetriesExhausted, Stopped
from indexer.metrics import IndexerMetrics
from indexer.outage import DATABASE_BACKOFF, NodeOutage
from indexer.rpc import RpcClient

ADDRESS = "0x" + "ab" * 20


class RecordedWaits(threading.Event):
    """A stop event that notes each wait on it, ends it at once, and is set after `waits` of them."""

    def __init__(self, waits: int = 1_000) -> None:
        super().__init__()
        self.seconds: list[float | None] = []
        self._left = waits

    def wait(self, timeout: float | None = None) -> bool:
        self.seconds.append(timeout)
        self._left -= 1
        return self._left <= 0


def outage(stop: threading.Event, max_wait: float) -> NodeOutage:
    config = IndexerConfig(rpc_url="http://127.0.0.1:9", chain_id=31337, contract_address=ADDRESS,
                           usdc_address=ADDRESS, start_block=0, confirmations=0, poll_interval=1.0,
                           max_wait=max_wait, live_blocks=0, initial_span=10, max_span=10, kept_blocks=10,
                           batch_logs=10, read_ahead=1, rpc_timeout=1.0, max_concurrency=1, requests_per_second=None)
    metrics = IndexerMetrics(config.chain_id, config.contract_address)
    return NodeOutage(RpcClient(config.rpc_url, stop=stop), Committer(config, metrics), metrics, stop, max_wait)


def failing(times: int) -> tuple[list[int], Callable[[], None]]:
    """A step the node fails `times` times, then answers; how often it was run."""
    asked = [0]

    def step() -> None:
        asked[0] += 1
        if asked[0] <= times:
            raise RetriesExhausted("the node at http://127.0.0.1:9/: connection refused (gave up after 3 attempts)")

    return asked, step


@pytest.mark.parametrize(("max_wait", "waits"), [
    (15.0, [1.0, 2.0, 4.0, 8.0, 15.0, 15.0, 15.0]),  # BOUNTY_INDEXER_MAX_WAIT_MS' default
    (60.0, [1.0, 2.0, 4.0, 8.0, 16.0, 30.0, 30.0]),  # never more than UNREACHABLE_WAIT_CAP
    (3.0, [1.0, 2.0, 3.0, 3.0, 3.0, 3.0, 3.0]),
])
def test_a_node_that_does_not_answer_is_asked_again_after_a_doubling_wait_up_to_the_ceiling(
        max_wait: float, waits: list[float]) -> None:
    stop = RecordedWaits()
    watcher = outage(stop, max_wait)
    asked, step = failing(len(waits))
    watcher.until_it_answers(step, None)
    assert asked == [len(waits) + 1]
    assert stop.seconds == waits
    assert watcher.since is None  # it answers again


def test_the_wait_starts_again_from_one_second_after_the_node_answered() -> None:
    stop = RecordedWaits()
    watcher = outage(stop, 15.0)
    for _ in range(2):
        _, step = failing(3)
        watcher.until_it_answers(step, None)
    assert stop.seconds == [1.0, 2.0, 4.0] * 2


def test_a_stop_request_ends_the_wait_for_the_node() -> None:
    stop = RecordedWaits(waits=2)
    _, step = failing(10)
    with pytest.raises(Stopped, match="while the node did not answer"):
        outage(stop, 15.0).until_it_answers(step, None)
    assert stop.seconds == [1.0, 2.0]


def test_a_database_that_went_away_is_asked_again_after_a_doubling_wait_up_to_5_seconds() -> None:
    assert [DATABASE_BACKOFF.ceiling(tries) for tries in range(7)] == [0.25, 0.5, 1.0, 2.0, 4.0, 5.0, 5.0]
