"""Bulk inserts of the indexer's batches: RowStream sends them in order and fails the batch."""

from __future__ import annotations

import pytest
from django.db import IntegrityError, transaction
from django.utils import timezone

from indexer.bulk import RowStream
from indexer.models import AppliedLog, IndexedBlock
from records.models import Deployment

COLUMNS = ("deployment_id", "number", "hash", "timestamp")


def _block(deployment: Deployment, number: int) -> tuple[object, ...]:
    return (deployment.pk, number, "0x" + f"{number:064x}", timezone.now())


@pytest.fixture
def deployment(db: None) -> Deployment:
    return Deployment.objects.create(chain_id=1, contract_address="0x" + "1" * 40, usdc_address="0x" + "2" * 40)


def test_it_inserts_every_table_in_order_within_the_transaction(deployment: Deployment) -> None:
    with transaction.atomic(), RowStream() as stream:
        stream.insert(IndexedBlock, COLUMNS, [_block(deployment, n) for n in range(1, 1001)])
        stream.insert(AppliedLog, ("deployment_id", "block_number", "block_hash", "tx_hash", "log_index", "event",
                                   "undo"),
                      [(deployment.pk, 1, "0x" + "a" * 64, "0x" + "b" * 64, 0, "BountyCreated",
                        [{"kind": "bounty", "id": 1, "before": None}])])
    assert IndexedBlock.objects.count() == 1000
    assert AppliedLog.objects.get().undo == [{"kind": "bounty", "id": 1, "before": None}]


def _batch_with_a_duplicate(deployment: Deployment) -> None:
    with transaction.atomic(), RowStream() as stream:
        stream.insert(IndexedBlock, COLUMNS, [_block(deployment, 1)])
        stream.insert(IndexedBlock, COLUMNS, [_block(deployment, 2), _block(deployment, 2)])  # not unique
        stream.insert(IndexedBlock, COLUMNS, [_block(deployment, 3)])


def _batch_that_fails_while_building(deployment: Deployment) -> None:
    with transaction.atomic(), RowStream() as stream:
        stream.insert(IndexedBlock, COLUMNS, [_block(deployment, n) for n in range(1, 101)])
        raise RuntimeError("while building rows")


def test_a_failed_insert_fails_the_batch_and_nothing_of_it_stays(deployment: Deployment) -> None:
    with pytest.raises(IntegrityError):
        _batch_with_a_duplicate(deployment)
    assert not IndexedBlock.objects.exists()
    assert Deployment.objects.filter(pk=deployment.pk).exists(), "the connection is usable afterwards"


def test_an_error_in_the_batch_drops_the_inserts_not_yet_sent(deployment: Deployment) -> None:
    with pytest.raises(RuntimeError, match="while building rows"):
        _batch_that_fails_while_building(deployment)
    assert not IndexedBlock.objects.exists()
