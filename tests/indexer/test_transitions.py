"""The state transitions (indexer.transitions): a scripted scenario through every contract call and
status leaves the mirror, its side effects and its change log equal to the chain."""

from __future__ import annotations

from itertools import pairwise
from typing import Any

import pytest

from contracts.demo import seed_demo_activity
from indexer.models import ChangeLogEntry, SyncState
from indexer.sync import Indexer
from records.models import Bounty
from tests.chain import Chain
from tests.indexer.conftest import catch_up_to_head
from tests.indexer.mirror import assert_live_consumer_is_current, assert_mirror_equals_chain


def test_backfill_of_every_call_and_status_mirrors_the_chain(chain: Chain, indexer: Indexer) -> None:
    seed_demo_activity(chain.w3, chain.deployment)
    catch_up_to_head(indexer)
    assert_mirror_equals_chain(chain.board, indexer.deployment)
    assert set(Bounty.objects.values_list("status", flat=True)) == {"open", "resolved", "refunded"}
    state = SyncState.objects.get(deployment=indexer.deployment)
    assert state.last_indexed_block == state.head_block == chain.w3.eth.block_number


def test_following_block_by_block_gives_the_same_mirror_and_change_log(
    chain: Chain, indexer: Indexer, monkeypatch: pytest.MonkeyPatch
) -> None:
    original = chain.w3.eth.wait_for_transaction_receipt

    def index_after_each(tx_hash: Any, *args: Any, **kwargs: Any) -> Any:
        receipt = original(tx_hash, *args, **kwargs)
        catch_up_to_head(indexer)
        return receipt

    monkeypatch.setattr(chain.w3.eth, "wait_for_transaction_receipt", index_after_each)
    seed_demo_activity(chain.w3, chain.deployment)
    monkeypatch.undo()
    catch_up_to_head(indexer)
    assert_mirror_equals_chain(chain.board, indexer.deployment)
    types = list(ChangeLogEntry.objects.order_by("seq").values_list("type", flat=True))
    assert types[:3] == ["bounty.created", "bounty.created", "submission.created"]
    assert set(types) == {"bounty.created", "submission.created", "dispute.created", "dispute.resolved",
                          "dispute.cancelled", "bounty.finalized", "bounty.refunded", "submission.refunded",
                          "submission.updated"}
    assert_live_consumer_is_current(indexer.deployment)


def test_side_effects_on_submissions_follow_their_event(chain: Chain, indexer: Indexer) -> None:
    seed_demo_activity(chain.w3, chain.deployment)
    catch_up_to_head(indexer)
    entries = list(ChangeLogEntry.objects.order_by("seq").values_list("type", "payload"))
    for (kind, payload), (next_kind, next_payload) in pairwise(entries):
        if kind in {"dispute.created", "dispute.resolved"}:
            assert next_kind == "submission.updated"
            assert next_payload["id"] == payload["submission_id"]
        if kind == "bounty.finalized":
            assert next_kind == "submission.updated"
            assert next_payload["status"] == "accepted" and next_payload["bounty_id"] == payload["id"]


def test_change_log_payloads_are_the_records_as_serialized_after_each_change(chain: Chain, indexer: Indexer) -> None:
    seed_demo_activity(chain.w3, chain.deployment)
    catch_up_to_head(indexer)
    finalized = ChangeLogEntry.objects.get(type="bounty.finalized").payload
    assert finalized["status"] == "resolved"
    assert finalized["contract_address"] == chain.deployment.contract_address
    first = ChangeLogEntry.objects.get(seq=1).payload
    assert first["id"] == 1 and first["status"] == "open"
    assert isinstance(first["bounty_amount"], str) and first["created_at"].endswith("Z")
