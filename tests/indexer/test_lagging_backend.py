"""The mirror holds through the nodes operators really use: a load balancer with a backend a few
blocks behind (tests/node_proxy.py answers a share of the calls as such a backend does: a lower
head, `null` headers, ranges silent about the blocks it lacks, "unknown block" by hash), a node
that omits a block's logs once, and each provider's wording of a range refusal."""

from __future__ import annotations

import logging
import signal
import time
from collections.abc import Callable

import pytest
from django.conf import settings

from contracts.demo import _Demo, seed_demo_activity
from indexer.health import indexer_health
from indexer.models import AppliedLog, ChangeLogEntry, SyncState
from indexer.reread import REREAD_EVERY
from indexer.sync import Indexer
from records.models import Bounty, Deployment, Dispute
from tests.chain import USDC, Chain
from tests.indexer.conftest import catch_up_to_head, config_for, process_env
from tests.indexer.mirror import assert_live_consumer_is_current, assert_mirror_equals_chain, record_log_count
from tests.indexer.test_run_indexer_command import start, wait_until
from tests.node_proxy import WORDINGS, NodeLimits, NodeProxy

pytestmark = pytest.mark.django_db(transaction=True)


def _mine(chain: Chain, blocks: int) -> None:
    chain.w3.provider.make_request("anvil_mine", [hex(blocks)])  # type: ignore[arg-type]


def _bounty(chain: Chain, prompt: str) -> int:
    """Posts a bounty; its block."""
    chain.send(chain.usdc.functions.approve(chain.board.address, 2**256 - 1), chain.account(1))
    receipt = chain.send(chain.board.functions.createBounty(prompt, b"\x05" * 32, 7 * USDC, 3600), chain.account(1))
    return int(receipt["blockNumber"])


def _mirrors(chain: Chain) -> Callable[[], bool]:
    def equal() -> bool:
        deployment = Deployment.objects.filter(chain_id=chain.deployment.chain_id).first()
        if deployment is None:
            return False
        try:
            assert_mirror_equals_chain(chain.board, deployment)
        except AssertionError:
            return False
        return True
    return equal


@pytest.mark.parametrize("seed", [1, 2])
def test_following_through_a_lagging_backend_loses_no_record(chain: Chain, seed: int) -> None:
    """The scenario that lost a record in four runs of five: run_indexer follows the chain while
    it happens, through a load balancer whose backend three blocks behind answers 40% of the calls."""
    limits = NodeLimits(behind_share=0.4, behind_blocks=3, seed=seed)
    with NodeProxy(chain.deployment.rpc_url, limits) as node:
        process = start(process_env(chain, BOUNTY_RPC_URL=node.url))
        failure: AssertionError | None = None
        try:
            wait_until(lambda: SyncState.objects.filter(last_indexed_block__isnull=False).exists())
            seed_demo_activity(chain.w3, chain.deployment)  # a block a transaction, while it follows
            for n in range(6):
                _bounty(chain, f"ipfs://while-following-{n}")
            wait_until(_mirrors(chain), timeout=60)
            _mine(chain, settings.BOUNTY_LIVE_BLOCKS + REREAD_EVERY)  # every block read twice
            wait_until(lambda: (SyncState.objects.get().reread_block or 0) >= chain.w3.eth.block_number
                       - settings.BOUNTY_LIVE_BLOCKS - REREAD_EVERY, timeout=30)
        except AssertionError as exc:
            failure = exc
        finally:
            process.send_signal(signal.SIGTERM)
            output, _ = process.communicate(timeout=30)
        if failure is not None:
            state = SyncState.objects.values().first()
            raise AssertionError(f"{failure}; head {chain.w3.eth.block_number}, {state}; the indexer said:\n"
                                 f"{output[-6000:]}")
        behind = node.stats.behind
    assert process.returncode == 0, output
    assert behind > 20, "the lagging backend answered"
    assert "reorganisation" not in output, output  # a backend behind is never taken for one
    assert "Traceback" not in output, output
    deployment = Deployment.objects.get()
    assert_mirror_equals_chain(chain.board, deployment)
    assert_live_consumer_is_current(deployment)
    assert AppliedLog.objects.count() == record_log_count(chain.board), "every log applied once"
    assert SyncState.objects.get().rpc_calls_per_block is not None  # what following costs, for /health


def test_a_log_the_first_reading_lost_is_repaired_by_the_second(chain: Chain) -> None:
    """A node that omits a block's logs once (its bloom, its getLogs and its receipts): the block
    read live misses the bounty; read again by range once deep enough, the bounty is there, and
    websocket clients are told as for a reorganisation."""
    live = 4
    lost = chain.w3.eth.block_number + 4  # each bounty: an approval, then the bounty, a block each
    with NodeProxy(chain.deployment.rpc_url, NodeLimits(blank_bloom_once=frozenset({lost}))) as node:
        indexer = Indexer(config_for(chain, BOUNTY_RPC_URL=node.url, BOUNTY_LIVE_BLOCKS=live))
        indexer.check_node()
        indexer.ensure_deployment()
        catch_up_to_head(indexer)
        _bounty(chain, "ipfs://before")
        assert _bounty(chain, "ipfs://lost-once") == lost
        catch_up_to_head(indexer)
        assert list(Bounty.objects.values_list("prompt", flat=True)) == ["ipfs://before"]  # the first reading
        assert node.stats.blanked >= 1

        _mine(chain, live + REREAD_EVERY)
        catch_up_to_head(indexer)
    assert sorted(Bounty.objects.values_list("prompt", flat=True)) == ["ipfs://before", "ipfs://lost-once"]
    assert indexer.metrics.reread_repairs._value.get() == 1
    phases = indexer.committer.phase_calls()  # the second reading's calls counted for it
    assert phases["startup"] >= 1 and phases["realtime"] >= 1 and phases["reread"] >= 1
    assert indexer.deployment is not None
    assert_mirror_equals_chain(chain.board, indexer.deployment)
    assert_live_consumer_is_current(indexer.deployment)
    created = ChangeLogEntry.objects.filter(type="bounty.created").values_list("payload", flat=True)
    assert [payload["prompt"] for payload in created] == ["ipfs://before", "ipfs://before", "ipfs://lost-once"][
        -len(created):]  # the rollback undid "before" only if it lay above the lost block
    state = SyncState.objects.get()
    assert state.reread_block is not None and state.reread_block >= lost


@pytest.mark.parametrize("wording", list(WORDINGS))
def test_a_first_sync_through_each_providers_wording_is_exact_and_learns_the_cap(chain: Chain, wording: str) -> None:
    """Ranges capped at 40 blocks, refused in one provider's words: synced, exact, and refused at
    most 20 + 5% of the ranges (the ranges in flight when the first refusal comes, and rare probes)."""
    seed_demo_activity(chain.w3, chain.deployment)
    cap, gap = 40, 4_000
    limits = NodeLimits(latency=0.002, max_log_blocks=cap, wording=wording, gap=gap,
                        gap_after=chain.w3.eth.block_number)  # empty blocks after the records: their numbers hold
    _mine(chain, 1)
    with NodeProxy(chain.deployment.rpc_url, limits) as node:
        indexer = Indexer(config_for(chain, BOUNTY_RPC_URL=node.url))
        indexer.check_node()
        indexer.ensure_deployment()
        catch_up_to_head(indexer)
        refused, ranges = node.stats.refused["range"], node.stats.calls["eth_getLogs"]
    print(f"{wording}: {refused} refused of {ranges} getLogs")
    assert refused >= 1
    assert refused <= 20 + 0.05 * (gap / cap), (refused, ranges)
    assert indexer.deployment is not None
    assert_mirror_equals_chain(chain.board, indexer.deployment)
    assert AppliedLog.objects.count() == record_log_count(chain.board)


def test_an_event_of_a_record_the_node_lost_waits_for_the_second_reading_instead_of_stopping(
        chain: Chain, caplog: pytest.LogCaptureFixture) -> None:
    """The run that stopped for ever: a SubmissionCreated lost, then a dispute of that submission.
    Indexing waits at the dispute (the blocks read one by one are committed together, so neither
    is) until the blocks are read again by range, which holds the submission."""
    demo = _Demo(chain.w3, chain.deployment)
    live = 4
    with NodeProxy(chain.deployment.rpc_url, NodeLimits()) as node:
        indexer = Indexer(config_for(chain, BOUNTY_RPC_URL=node.url, BOUNTY_LIVE_BLOCKS=live))
        indexer.check_node()
        indexer.ensure_deployment()
        bounty = demo.create_bounty(demo.actors.poster, "lost and found", 10, 3600)
        catch_up_to_head(indexer)
        node.limits.blank_bloom_once = frozenset({chain.w3.eth.block_number + 2})  # the approval, then submit
        submission = demo.submit(bounty, demo.actors.claimants[0], "a submission the node loses once")
        demo.dispute(submission, demo.actors.grouts[0], "disputed before it is found")
        with caplog.at_level(logging.WARNING, logger="indexer.sync"):
            catch_up_to_head(indexer)  # waits at the dispute: no exception
        assert "waiting for the second reading" in caplog.text
        assert not Dispute.objects.exists()

        _mine(chain, live + REREAD_EVERY)
        catch_up_to_head(indexer)
    assert indexer.deployment is not None
    assert_mirror_equals_chain(chain.board, indexer.deployment)
    assert_live_consumer_is_current(indexer.deployment)


def test_a_matching_bloom_with_an_empty_answer_is_confirmed_by_the_receipts(
        chain: Chain, caplog: pytest.LogCaptureFixture) -> None:
    """getLogs by hash answers nothing once for a block whose bloom holds the contract's record:
    the block's receipts hold the log, and the first reading takes it from them."""
    with NodeProxy(chain.deployment.rpc_url, NodeLimits()) as node:
        indexer = Indexer(config_for(chain, BOUNTY_RPC_URL=node.url, BOUNTY_LIVE_BLOCKS=8))
        indexer.check_node()
        indexer.ensure_deployment()
        catch_up_to_head(indexer)
        node.limits.empty_logs_once = frozenset({chain.w3.eth.block_number + 2})
        _bounty(chain, "ipfs://in-the-receipts")
        with caplog.at_level(logging.WARNING, logger="indexer.realtime"):
            catch_up_to_head(indexer)
        assert node.stats.blanked == 1 and node.stats.calls["eth_getBlockReceipts"] == 1
    assert list(Bounty.objects.values_list("prompt", flat=True)) == ["ipfs://in-the-receipts"]
    assert "answered eth_getLogs for block" in caplog.text and "but its receipts hold 1 record logs" in caplog.text
    assert indexer.metrics.reread_repairs._value.get() == 0


def test_a_node_that_goes_away_for_a_while_is_waited_for_and_caught_up_with(chain: Chain) -> None:
    """Connection refused for 8 s, as a provider's maintenance: run_indexer keeps asking, /health
    says so within seconds (degraded, since when), and the indexer catches up once it answers."""
    with NodeProxy(chain.deployment.rpc_url, NodeLimits()) as node:
        process = start(process_env(chain, BOUNTY_RPC_URL=node.url))
        try:
            _bounty(chain, "ipfs://before-the-outage")
            wait_until(lambda: Bounty.objects.filter(prompt="ipfs://before-the-outage").exists())
            node.go_down()
            went = time.monotonic()
            _bounty(chain, "ipfs://during-the-outage")
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


def test_a_node_that_went_away_is_asked_again_within_the_ceiling_of_its_return(chain: Chain) -> None:
    """The wait between two asks of a node that does not answer grows, but never past
    BOUNTY_INDEXER_MAX_WAIT_MS (here 1 s): after a 24 s outage (the backoff alone would next ask
    some 15 s after the node's return), the record waiting is indexed within seconds of it."""
    with NodeProxy(chain.deployment.rpc_url, NodeLimits()) as node:
        process = start(process_env(chain, BOUNTY_RPC_URL=node.url, BOUNTY_INDEXER_MAX_WAIT_MS="1000"))
        try:
            _bounty(chain, "ipfs://before-the-long-outage")
            wait_until(lambda: Bounty.objects.filter(prompt="ipfs://before-the-long-outage").exists())
            node.go_down()
            went = time.monotonic()
            _bounty(chain, "ipfs://during-the-long-outage")
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

