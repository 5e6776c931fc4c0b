"""The second reading (indexer.reread): every block the realtime phase read one by one is read
again by range once it is deep enough, and a log the first reading lost (a node that omitted it
once) is found there and applied, websocket clients told as for a reorganisation; an event of a
record the mirror lacks waits for that second reading instead of stopping the indexer."""

from __future__ import annotations

import logging

import pytest

from contracts.demo import _Demo
from indexer.models import ChangeLogEntry, SyncState
from indexer.reread import REREAD_EVERY
from indexer.sync import Indexer
from records.models import Bounty, Dispute
from tests.chain import Chain
from tests.indexer.conftest import catch_up_to_head, config_for, mine, post_bounty
from tests.indexer.mirror import assert_live_consumer_is_current, assert_mirror_equals_chain
from tests.node_proxy import NodeLimits, NodeProxy

pytestmark = pytest.mark.django_db(transaction=True)


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
        post_bounty(chain, "ipfs://before")
        assert post_bounty(chain, "ipfs://lost-once") == lost
        catch_up_to_head(indexer)
        assert list(Bounty.objects.values_list("prompt", flat=True)) == ["ipfs://before"]  # the first reading
        assert node.stats.blanked >= 1

        mine(chain, live + REREAD_EVERY)
        catch_up_to_head(indexer)
    assert sorted(Bounty.objects.values_list("prompt", flat=True)) == ["ipfs://before", "ipfs://lost-once"]
    assert indexer.metrics.reread_repairs._value.get() == 1
    phases = indexer.committer.phase_calls()  # the second reading's calls counted for it
    assert phases["startup"] >= 1 and phases["realtime"] >= 1 and phases["reread"] >= 1
    assert_mirror_equals_chain(chain.board, indexer.deployment)
    assert_live_consumer_is_current(indexer.deployment)
    created = ChangeLogEntry.objects.filter(type="bounty.created").values_list("payload", flat=True)
    assert [payload["prompt"] for payload in created] == ["ipfs://before", "ipfs://before", "ipfs://lost-once"][
        -len(created):]  # the rollback undid "before" only if it lay above the lost block
    state = SyncState.objects.get()
    assert state.reread_block is not None and state.reread_block >= lost


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

        mine(chain, live + REREAD_EVERY)
        catch_up_to_head(indexer)
    assert_mirror_equals_chain(chain.board, indexer.deployment)
    assert_live_consumer_is_current(indexer.deployment)
