"""Waiting out an outage (indexer.outage): how long the indexer waits before asking again a node
that does not answer, and a database that went away (the waits read from the stop event they
are waited on, which a stop request would end); and run_indexer through a node that goes away
for a while: /health says so within seconds, and the indexer catches up once it answers."""

from __future__ import annotations

import signal
import threading
import time
from collections.abc import Callable

import pytest

from indexer.commit import Committer
from indexer.config import IndexerConfig
from indexer.errors import RetriesExhausted, Stopped
from indexer.health import indexer_health
from indexer.metrics import IndexerMetrics
from indexer.models import SyncState
from indexer.outage import DATABASE_BACKOFF, NodeOutage
from indexer.rpc import RpcClient
from records.models import Bounty, Deployment
from tests.chain import Chain
from tests.indexer.conftest import post_bounty, process_env
from tests.indexer.mirror import assert_mirror_equals_chain
from tests.indexer.test_run_indexer_command import start, wait_until
from tests.node_proxy import NodeLimits, NodeProxy

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
                           batch_logs=10, read_ahead=1, rpc_timeout=1.0, rpc_max_response_bytes=65_536,
                           rpc_max_retry_after=1.0, max_concurrency=1, requests_per_second=None)
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


@pytest.mark.django_db(transaction=True)
def test_a_node_that_goes_away_for_a_while_is_waited_for_and_caught_up_with(chain: Chain) -> None:
    """Connection refused for 8 s, as a provider's maintenance: run_indexer keeps asking, /health
    says so within seconds (degraded, since when), and the indexer catches up once it answers."""
    with NodeProxy(chain.deployment.rpc_url, NodeLimits()) as node:
        process = start(process_env(chain, BOUNTY_RPC_URL=node.url))
        try:
            post_bounty(chain, "ipfs://before-the-outage")
            wait_until(lambda: Bounty.objects.filter(prompt="ipfs://before-the-outage").exists())
            node.go_down()
            went = time.monotonic()
            post_bounty(chain, "ipfs://during-the-outage")
            wait_until(lambda: SyncState.objects.get().node_unreachable_since is not None, timeout=10)
            noticed = time.monotonic() - went
            deployment = Deployment.objects.get()
            health = indexer_health(deployment)
            assert health["running"] and health["node_unreachable_since"] is not None
            time.sleep(max(0.0, 8 - (time.monotonic() - went)))
            assert process.poll() is None, "the indexer is still running"
            assert (indexer_health(deployment)["node_unreachable_seconds"] or 0) >= 5
            node.come_back()
            wait_until(lambda: Bounty.objects.filter(prompt="ipfs://during-the-outage").exists(), timeout=40)
            wait_until(lambda: SyncState.objects.get().node_unreachable_since is None, timeout=10)
        finally:
            process.send_signal(signal.SIGTERM)
            output, _ = process.communicate(timeout=30)
    assert process.returncode == 0, output
    assert noticed < 5, f"/health knew after {noticed:.1f} s"
    assert "asking again for as long as it takes" in output and "answers again after" in output
    assert "Traceback" not in output
    assert_mirror_equals_chain(chain.board, Deployment.objects.get())


@pytest.mark.django_db(transaction=True)
def test_a_node_that_went_away_is_asked_again_within_the_ceiling_of_its_return(chain: Chain) -> None:
    """The wait between two asks of a node that does not answer grows, but never past
    BOUNTY_INDEXER_MAX_WAIT_MS (here 1 s): after a 24 s outage (the backoff alone would next ask
    some 15 s after the node's return), the record waiting is indexed within seconds of it."""
    with NodeProxy(chain.deployment.rpc_url, NodeLimits()) as node:
        process = start(process_env(chain, BOUNTY_RPC_URL=node.url, BOUNTY_INDEXER_MAX_WAIT_MS="1000"))
        try:
            post_bounty(chain, "ipfs://before-the-long-outage")
            wait_until(lambda: Bounty.objects.filter(prompt="ipfs://before-the-long-outage").exists())
            node.go_down()
            went = time.monotonic()
            post_bounty(chain, "ipfs://during-the-long-outage")
            time.sleep(max(0.0, 24 - (time.monotonic() - went)))
            assert not Bounty.objects.filter(prompt="ipfs://during-the-long-outage").exists()
            node.come_back()
            back = time.monotonic()
            wait_until(lambda: Bounty.objects.filter(prompt="ipfs://during-the-long-outage").exists(), timeout=30)
            caught_up = time.monotonic() - back
        finally:
            process.send_signal(signal.SIGTERM)
            output, _ = process.communicate(timeout=30)
    assert process.returncode == 0, output
    assert caught_up <= 4, f"indexed {caught_up:.1f} s after the node came back"
