"""A node that sends what no client should have to take (tests/node_proxy.py in front of anvil):
an answer dripped a few bytes at a time, one past the byte cap, a body too deep for any JSON parser, a
Retry-After of years. The indexer, run as `run_indexer` runs it (Indexer.run), keeps running, the
mirror ends equal to the chain, and the log and the metrics say what happened."""

from __future__ import annotations

import logging
import signal
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest
from django.test import override_settings

from contracts.demo import seed_demo_activity
from contracts.devchain import free_port
from indexer.models import AppliedLog
from indexer.sync import Indexer
from records.models import Deployment
from tests.chain import Chain
from tests.indexer.conftest import config_for, mine, post_bounty, process_env
from tests.indexer.mirror import assert_mirror_equals_chain, record_log_count
from tests.indexer.test_metrics import _reachable, scrape
from tests.indexer.test_run_indexer_command import start, wait_until
from tests.metrics import value
from tests.node_proxy import NodeLimits, NodeProxy

pytestmark = pytest.mark.django_db(transaction=True)

WITHIN = 60.0  # seconds the indexer may take to catch up here before it is stopped (a wait that never ends)


@pytest.fixture
def history(chain: Chain) -> Chain:
    """Demo activity, a quiet stretch, a bounty after it: records at both ends of many ranges."""
    seed_demo_activity(chain.w3, chain.deployment)
    mine(chain, 100)
    post_bounty(chain, "ipfs://after-the-quiet")
    return chain


@contextmanager
def through(chain: Chain, limits: NodeLimits, **settings: Any) -> Iterator[tuple[Indexer, NodeProxy]]:
    """An indexer whose node is the proxy with these faults."""
    with NodeProxy(chain.deployment.rpc_url, limits) as node:
        yield Indexer(config_for(chain, BOUNTY_RPC_URL=node.url, **settings)), node


def metric(indexer: Indexer, name: str, **labels: str) -> float:
    value = indexer.metrics.registry.get_sample_value(name, {"chain_id": str(indexer.config.chain_id),
                                                             "contract": indexer.config.contract_address, **labels})
    return value or 0.0


def assert_exact(chain: Chain, indexer: Indexer) -> None:
    """The mirror equals the chain, every log applied once (a first sync is a bulk backfill: one
    resync in the change log, not an entry a change)."""
    assert_mirror_equals_chain(chain.board, indexer.deployment)
    assert AppliedLog.objects.count() == record_log_count(chain.board), "every log applied once"


def run_until_caught_up(indexer: Indexer, chain: Chain) -> None:
    """Indexer.run on this thread, as run_indexer runs it, until it has indexed the chain's head;
    then stopped as SIGTERM stops it (and past WITHIN seconds all the same: the test fails then)."""
    head = chain.w3.eth.block_number

    def watch() -> None:
        deadline = time.monotonic() + WITHIN
        while metric(indexer, "bounty_indexer_last_indexed_block") < head and time.monotonic() < deadline:
            if indexer.stop.wait(0.05):
                return
        indexer.stop.set()

    watcher = threading.Thread(target=watch, name="caught-up watcher", daemon=True)
    watcher.start()
    indexer.run()
    watcher.join()
    assert metric(indexer, "bounty_indexer_last_indexed_block") >= head, "the indexer did not catch up"


def test_an_answer_dripped_slowly_times_out_at_the_whole_requests_deadline(
        history: Chain, caplog: pytest.LogCaptureFixture) -> None:
    """Each piece comes well within the timeout, so only a deadline on the whole request ends it."""
    with through(history, NodeLimits(drip_next=2, drip_seconds=5), BOUNTY_RPC_TIMEOUT_SECONDS=1) \
            as (indexer, node):
        run_until_caught_up(indexer, history)
        assert node.stats.faults["drip"] == 2
        assert node.stats.cut_short == 2  # the indexer hung up on both, at their deadline
    assert_exact(history, indexer)
    assert metric(indexer, "bounty_indexer_rpc_errors_total", kind="timeout") == 2
    assert sum("whole request" in record.getMessage() for record in caplog.records) == 2


def test_a_range_whose_answer_is_past_the_byte_cap_is_split_as_a_too_many_results_refusal(
        history: Chain, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger="indexer.fetch")
    # padded past what loopback's socket buffers can take in (Linux grows a receive buffer up to
    # tcp_rmem's 32 MiB): a 4 MiB answer could be written whole before the indexer hung up on it
    limits = NodeLimits(oversized_over=4, oversized_bytes=64 * 1024 * 1024)
    with through(history, limits, BOUNTY_RPC_MAX_RESPONSE_BYTES=256 * 1024, BOUNTY_LIVE_BLOCKS=0) \
            as (indexer, node), override_settings(BOUNTY_DEFER_INDEXES="never"):  # the ranges read in this process
        run_until_caught_up(indexer, history)
        assert node.stats.faults["oversized"] >= 1
        assert node.stats.cut_short == node.stats.faults["oversized"]  # none read to its end
        assert indexer.reader.fetcher.cap() == 4  # what the node can answer within the cap, learnt
    assert_exact(history, indexer)
    assert metric(indexer, "bounty_indexer_rpc_errors_total", kind="too_large") == node.stats.faults["oversized"]
    assert any("(BOUNTY_RPC_MAX_RESPONSE_BYTES: too_much)" in record.getMessage() for record in caplog.records)


def test_a_body_too_deep_for_any_json_parser_is_a_malformed_answer_asked_again(history: Chain) -> None:
    """run_indexer itself, whose interpreter keeps Python's recursion limit (this test process
    runs with py_ecc's 100,000, where 4 KB of `[` does not reach it): the standard parser raised
    RecursionError there, which ended the process, and its service restarted it into the same."""
    port = free_port()
    with NodeProxy(history.deployment.rpc_url, NodeLimits(deep_next=3)) as node:
        process = start(process_env(history, BOUNTY_RPC_URL=node.url, BOUNTY_INDEXER_METRICS_PORT=str(port)))
        try:
            head = history.w3.eth.block_number
            wait_until(lambda: process.poll() is not None or (
                _reachable(port) and value(scrape(port), "bounty_indexer_last_indexed_block") >= head), timeout=60)
            assert process.poll() is None, "the indexer stopped"
            samples = scrape(port)
        finally:
            process.send_signal(signal.SIGTERM)
            output, _ = process.communicate(timeout=30)
        assert node.stats.faults["deep"] == 3
    assert process.returncode == 0 and "Traceback" not in output, output
    assert value(samples, "bounty_indexer_rpc_errors_total", kind="malformed") == 3, output
    assert output.count("the answer is nested deeper than 254 levels (4096 bytes)") == 3, output
    assert_mirror_equals_chain(history.board, Deployment.objects.get())
    assert AppliedLog.objects.count() == record_log_count(history.board), "every log applied once"


def test_a_retry_after_of_years_is_waited_at_most_the_ceiling_and_said(
        history: Chain, caplog: pytest.LogCaptureFixture) -> None:
    with through(history, NodeLimits(limited_next=2, retry_after="999999999"), BOUNTY_RPC_MAX_RETRY_AFTER_SECONDS=1) \
            as (indexer, node):
        run_until_caught_up(indexer, history)
        assert node.stats.faults["limited"] == 2
    assert_exact(history, indexer)
    assert metric(indexer, "bounty_indexer_rpc_retry_after_capped_total") == 2
    assert metric(indexer, "bounty_indexer_rpc_errors_total", kind="rate_limited") == 2
    warnings = [record.getMessage() for record in caplog.records if record.levelno == logging.WARNING
                and "Retry-After" in record.getMessage()]
    assert len(warnings) == 2 and all("999999999 s" in warning and "waiting 1 s, BOUNTY_RPC_MAX_RETRY_AFTER_SECONDS"
                                      in warning for warning in warnings), warnings
