"""Reorganisations during follow: the mirror and a live consumer of the change log end on the new chain."""

from __future__ import annotations

from dataclasses import replace

import pytest

from indexer.errors import ReorgTooDeep
from indexer.models import AppliedLog, ChangeLogEntry, IndexedBlock, SyncState
from indexer.sync import Indexer
from records.models import Bounty, Dispute, Submission
from tests.chain import USDC, Chain
from tests.indexer.conftest import catch_up_to_head, config_for
from tests.indexer.mirror import assert_live_consumer_is_current, assert_mirror_equals_chain

HASH = b"\x11" * 32


def _snapshot(chain: Chain) -> str:
    return str(chain.w3.provider.make_request("evm_snapshot", [])["result"])  # type: ignore[arg-type]


def _revert(chain: Chain, snapshot: str) -> None:
    assert chain.w3.provider.make_request("evm_revert", [snapshot])["result"] is True  # type: ignore[arg-type]


def _fund(chain: Chain) -> None:
    for index in (1, 2, 3):
        chain.send(chain.usdc.functions.approve(chain.board.address, 2**256 - 1), chain.account(index))


def _bounty(chain: Chain, uri: str = "ipfs://bounty", reward: int = 100 * USDC) -> None:
    chain.send(chain.board.functions.createBounty(uri, HASH, reward, 86_400), chain.account(1))


def assert_consistent(chain: Chain, indexer: Indexer) -> None:
    assert_mirror_equals_chain(chain.board, indexer.deployment)
    assert_live_consumer_is_current(indexer.deployment)


@pytest.mark.parametrize("depth", [1, 2, 3, 5, 10])
def test_a_reorg_of_depth_n_leaves_the_mirror_equal_to_the_new_chain(chain: Chain, indexer: Indexer,
                                                                      depth: int) -> None:
    _fund(chain)
    _bounty(chain, "ipfs://kept")
    catch_up_to_head(indexer)
    fork = _snapshot(chain)
    for n in range(depth):
        _bounty(chain, f"ipfs://orphaned-{n}")
    catch_up_to_head(indexer)
    assert Bounty.objects.count() == 1 + depth

    _revert(chain, fork)
    for n in range(depth + 1):
        _bounty(chain, f"ipfs://new-branch-{n}", reward=(n + 7) * USDC)
    catch_up_to_head(indexer)

    assert_consistent(chain, indexer)
    assert sorted(Bounty.objects.values_list("prompt", flat=True)) == sorted(
        ["ipfs://kept", *(f"ipfs://new-branch-{n}" for n in range(depth + 1))]
    )


def test_a_reorg_removes_a_bounty_with_its_submissions_and_disputes(chain: Chain, indexer: Indexer) -> None:
    _fund(chain)
    fork = _snapshot(chain)
    _bounty(chain, "ipfs://doomed")
    chain.send(chain.board.functions.submit(1, "ipfs://work", HASH), chain.account(2))
    chain.send(chain.board.functions.dispute(1, "ipfs://objection", HASH), chain.account(3))
    catch_up_to_head(indexer)
    assert (Bounty.objects.count(), Submission.objects.count(), Dispute.objects.count()) == (1, 1, 1)

    _revert(chain, fork)
    _bounty(chain, "ipfs://replacement")
    chain.mine()
    chain.mine()
    chain.mine()
    catch_up_to_head(indexer)

    assert_consistent(chain, indexer)
    assert list(Bounty.objects.values_list("prompt", "submission_count")) == [("ipfs://replacement", 0)]
    assert not Submission.objects.exists() and not Dispute.objects.exists()
    removed = list(ChangeLogEntry.objects.filter(type__endswith=".removed").values_list("type", flat=True))
    assert sorted(removed) == ["bounty.removed", "dispute.removed", "submission.removed"]


def test_a_reorg_undoes_state_changes_of_orphaned_blocks(chain: Chain, indexer: Indexer) -> None:
    _fund(chain)
    _bounty(chain)
    chain.send(chain.board.functions.submit(1, "ipfs://work", HASH), chain.account(2))
    chain.send(chain.board.functions.dispute(1, "ipfs://objection", HASH), chain.account(3))
    catch_up_to_head(indexer)
    fork = _snapshot(chain)
    chain.send(chain.board.functions.resolveDispute(1, True), chain.account(0))
    catch_up_to_head(indexer)
    assert Dispute.objects.get().status == "upheld"
    assert Submission.objects.get().status == "rejected"

    _revert(chain, fork)
    chain.send(chain.board.functions.resolveDispute(1, False), chain.account(0))
    chain.mine()
    catch_up_to_head(indexer)

    assert_consistent(chain, indexer)
    assert Dispute.objects.get().status == "rejected"
    assert Submission.objects.get().status == "submitted"


def test_a_reorg_back_to_before_anything_was_indexed_empties_the_mirror(chain: Chain, indexer: Indexer) -> None:
    fork = _snapshot(chain)
    _fund(chain)
    _bounty(chain)
    catch_up_to_head(indexer)
    _revert(chain, fork)
    for _ in range(6):
        chain.mine()
    catch_up_to_head(indexer)
    assert_consistent(chain, indexer)
    assert not Bounty.objects.exists()


def test_a_reorg_deeper_than_the_kept_hashes_stops_the_indexer(chain: Chain, db: None) -> None:
    indexer = Indexer(replace(config_for(chain), kept_blocks=2))
    indexer.check_node()
    indexer.ensure_deployment()
    _fund(chain)
    fork = _snapshot(chain)
    for n in range(6):
        _bounty(chain, f"ipfs://{n}")
        catch_up_to_head(indexer)
    _revert(chain, fork)
    for _ in range(8):
        chain.mine()
    with pytest.raises(ReorgTooDeep, match="re-index this deployment"):
        catch_up_to_head(indexer)
    assert Bounty.objects.count() == 6, "nothing is half rolled back"


@pytest.mark.parametrize("confirmations", [1, 2])
def test_a_reorg_among_the_headers_waiting_for_their_confirmations_indexes_only_the_new_branch(
        chain: Chain, db: None, confirmations: int) -> None:
    """Headers polled while their blocks were too shallow to index are kept; a reorganisation that
    replaces them must not let a kept one be indexed."""
    indexer = Indexer(config_for(chain, BOUNTY_CONFIRMATIONS=confirmations))
    indexer.ensure_deployment()
    _fund(chain)
    catch_up_to_head(indexer)
    fork = _snapshot(chain)
    _bounty(chain, "ipfs://orphaned")  # polled as the head, kept, not yet deep enough
    catch_up_to_head(indexer)
    assert not Bounty.objects.exists()
    _revert(chain, fork)
    _bounty(chain, "ipfs://new-branch", reward=9 * USDC)
    for _ in range(confirmations):
        chain.mine()
    catch_up_to_head(indexer)
    assert list(Bounty.objects.values_list("prompt", flat=True)) == ["ipfs://new-branch"]
    assert not ChangeLogEntry.objects.filter(type="bounty.removed").exists(), "the orphan was never indexed"
    assert_consistent(chain, indexer)


def test_only_blocks_past_the_confirmations_are_indexed(chain: Chain, db: None) -> None:
    indexer = Indexer(config_for(chain, BOUNTY_CONFIRMATIONS=3))
    indexer.ensure_deployment()
    _fund(chain)
    _bounty(chain)
    catch_up_to_head(indexer)
    assert not Bounty.objects.exists()
    for _ in range(3):
        chain.mine()
    catch_up_to_head(indexer)
    assert Bounty.objects.count() == 1
    assert IndexedBlock.objects.order_by("-number").first().number == chain.w3.eth.block_number - 3  # type: ignore[union-attr]


@pytest.mark.parametrize(("tag", "depth"), [("safe", 32), ("finalized", 64)])  # anvil's tags
def test_with_a_block_tag_blocks_up_to_the_nodes_tagged_block_are_indexed(chain: Chain, db: None, tag: str,
                                                                          depth: int) -> None:
    indexer = Indexer(config_for(chain, BOUNTY_CONFIRMATIONS=tag))
    indexer.check_node()
    indexer.ensure_deployment()
    _fund(chain)
    _bounty(chain)
    catch_up_to_head(indexer)
    assert not Bounty.objects.exists()
    chain.w3.provider.make_request("anvil_mine", [hex(depth)])  # type: ignore[arg-type]
    catch_up_to_head(indexer)
    assert Bounty.objects.count() == 1
    tagged = chain.w3.eth.get_block(tag)["number"]  # type: ignore[arg-type]
    state = SyncState.objects.get()
    assert (state.last_indexed_block, state.safe_block) == (tagged, tagged)


def test_undo_entries_are_kept_only_for_blocks_a_reorg_can_still_reach(chain: Chain, db: None) -> None:
    indexer = Indexer(replace(config_for(chain, BOUNTY_LIVE_BLOCKS=0), kept_blocks=3))  # every block by range
    indexer.check_node()
    indexer.ensure_deployment()
    _fund(chain)
    for n in range(6):
        _bounty(chain, f"ipfs://{n}")
    catch_up_to_head(indexer)  # one batch: its oldest blocks are out of reach at once
    tip = chain.w3.eth.block_number
    undo = dict(AppliedLog.objects.values_list("block_number", "undo"))
    assert len(undo) == 6
    assert all(entries == [] for number, entries in undo.items() if number <= tip - 3)
    assert all(entries != [] for number, entries in undo.items() if number > tip - 3)
    assert any(number <= tip - 3 for number in undo)

    fork = _snapshot(chain)
    chain.send(chain.board.functions.submit(6, "ipfs://work", HASH), chain.account(2))
    catch_up_to_head(indexer)
    _revert(chain, fork)
    _bounty(chain, "ipfs://new-branch")
    chain.mine()
    catch_up_to_head(indexer)  # rolls back within the window: the submission and bounty 6's count
    assert_consistent(chain, indexer)
    assert not Submission.objects.exists()
    assert Bounty.objects.get(bounty_id=6).submission_count == 0
