"""The mirror holds through the nodes operators really use, end to end: a load balancer with a
backend a few blocks behind (tests/node_proxy.py answers a share of the calls as such a backend
does: a lower head, `null` headers, ranges silent about the blocks it lacks, "unknown block" by
hash), and each provider's wording of a range refusal. What one module does about them is
tested beside it: the second reading in test_reread.py, the receipts in test_realtime.py, a node
that does not answer in test_outage.py."""

from __future__ import annotations

import signal
from collections.abc import Callable

import pytest
from django.conf import settings

from contracts.demo import seed_demo_activity
from indexer.models import AppliedLog, SyncState
from indexer.reread import REREAD_EVERY
from indexer.sync import Indexer
from records.models import Deployment
from tests.chain import Chain
from tests.indexer.conftest import catch_up_to_head, config_for, mine, post_bounty, process_env
from tests.indexer.mirror import assert_live_consumer_is_current, assert_mirror_equals_chain, record_log_count
from tests.indexer.test_run_indexer_command import start, wait_until
from tests.node_proxy import WORDINGS, NodeLimits, NodeProxy

pytestmark = pytest.mark.django_db(transaction=True)


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
                post_bounty(chain, f"ipfs://while-following-{n}")
            wait_until(_mirrors(chain), timeout=60)
            mine(chain, settings.BOUNTY_LIVE_BLOCKS + REREAD_EVERY)  # every block read twice
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


@pytest.mark.parametrize("wording", list(WORDINGS))
def test_a_first_sync_through_each_providers_wording_is_exact_and_learns_the_cap(chain: Chain, wording: str) -> None:
    """Ranges capped at 40 blocks, refused in one provider's words: synced, exact, and refused at
    most 20 + 5% of the ranges (the ranges in flight when the first refusal comes, and rare probes)."""
    seed_demo_activity(chain.w3, chain.deployment)
    cap, gap = 40, 4_000
    limits = NodeLimits(latency=0.002, max_log_blocks=cap, wording=wording, gap=gap,
                        gap_after=chain.w3.eth.block_number)  # empty blocks after the records: their numbers hold
    mine(chain, 1)
    with NodeProxy(chain.deployment.rpc_url, limits) as node:
        indexer = Indexer(config_for(chain, BOUNTY_RPC_URL=node.url))
        indexer.check_node()
        indexer.ensure_deployment()
        catch_up_to_head(indexer)
        refused, ranges = node.stats.refused["range"], node.stats.calls["eth_getLogs"]
    print(f"{wording}: {refused} refused of {ranges} getLogs")
    assert refused >= 1
    assert refused <= 20 + 0.05 * (gap / cap), (refused, ranges)
    assert_mirror_equals_chain(chain.board, indexer.deployment)
    assert AppliedLog.objects.count() == record_log_count(chain.board)


