"""The index builder (indexer.index_build, with indexer.indexes): the secondary indexes are dropped
for a backfill that adds more rows than the record tables hold and built once it has caught up;
nothing else changes for the mirror."""

from __future__ import annotations

import threading
from dataclasses import replace
from typing import Any

import pytest
from django.core.cache import cache
from django.db import IntegrityError, connection
from django.test import Client, override_settings

from contracts.demo import seed_demo_activity
from indexer import historical, indexes
from indexer.models import ChangeLogEntry, IndexState, IndexStateChoice, SyncState
from indexer.sync import Indexer
from records.dialect import dialect
from records.models import Bounty, Deployment, Dispute, Submission
from tests.chain import USDC, Chain
from tests.factories import make_deployment
from tests.indexer.conftest import config_for
from tests.indexer.mirror import assert_bodies_are_current, assert_mirror_equals_chain
from tests.indexer.test_reorg import _bounty, _fund, _revert, _snapshot

pytestmark = pytest.mark.django_db(transaction=True)

RECORD_TABLES = [str(model._meta.db_table) for model in (Bounty, Submission, Dispute)]


def secondary_indexes_in_the_database() -> set[str]:
    """Every index the migrations made on the record tables but the primary and unique keys."""
    names = set()
    with connection.cursor() as cursor:
        for table in RECORD_TABLES:
            for name, about in connection.introspection.get_constraints(cursor, table).items():
                if about["index"] and not about["unique"] and not about["primary_key"]:
                    names.add(name)
    return names


def index_identities() -> dict[str, Any]:
    """Each index on the record tables with what changes when it is dropped and created again."""
    with connection.cursor() as cursor:
        if dialect(connection).index_validity:  # the catalog is PostgreSQL's
            cursor.execute("SELECT c.relname, c.oid FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid "
                           "JOIN pg_class t ON t.oid = i.indrelid WHERE t.relname = ANY(%s)", [RECORD_TABLES])
        else:
            cursor.execute("SELECT name, rootpage FROM sqlite_master WHERE type = 'index' AND tbl_name IN "
                           "(%s, %s, %s)", RECORD_TABLES)
        return dict(cursor.fetchall())


def first_sync(chain: Chain) -> Indexer:
    seed_demo_activity(chain.w3, chain.deployment)
    indexer = Indexer(config_for(chain))
    indexer.ensure_deployment()
    return indexer


def catch_up(indexer: Indexer) -> None:
    for _ in range(1_000):
        if not indexer.catch_up():
            return
    raise AssertionError("the indexer did not catch up")


def test_the_deferred_list_is_exactly_the_secondary_indexes_the_migrations_make(db: None) -> None:
    listed = [index.name for index in indexes.secondary_indexes()]
    assert len(listed) == len(set(listed))
    assert set(listed) == secondary_indexes_in_the_database()
    if dialect(connection).trigram_search:
        assert {f"{table}_search_trgm" for table in RECORD_TABLES} <= set(listed)


def test_a_first_sync_writes_without_the_indexes_and_builds_them_once_caught_up(chain: Chain) -> None:
    indexer = first_sync(chain)
    indexer.prepare()
    assert indexes.index_state() == IndexStateChoice.DEFERRED
    assert {index.name for index in indexes.missing_indexes()} == {i.name for i in indexes.secondary_indexes()}
    assert SyncState.objects.get().bulk_from_block == chain.deployment.start_block

    catch_up(indexer)
    assert indexer.index_builder.indexes_to_build(indexer.ensure_deployment())
    assert_mirror_equals_chain(chain.board, Deployment.objects.get())  # correct while deferred
    indexer.index_builder.build(indexer.ensure_deployment())

    assert indexes.missing_indexes() == []
    assert indexes.index_state() == IndexStateChoice.READY
    assert not indexer.index_builder.indexes_to_build(indexer.ensure_deployment())
    assert_bodies_are_current(Deployment.objects.get())


@pytest.mark.parametrize("others_hold_records", [False, True], ids=["alone", "beside-another-deployment"])
def test_the_build_blocks_writes_only_when_no_other_deployment_writes(
        chain: Chain, monkeypatch: pytest.MonkeyPatch, others_hold_records: bool) -> None:
    # Alone in the tables (a first sync), the indexes are built side by side without
    # CONCURRENTLY; beside another deployment's records, CONCURRENTLY, so that its indexer writes on.
    make_deployment(chain_id=8453, contract_address="0x" + "42" * 20,
                    bounty_total=1 if others_hold_records else 0)
    builds: list[bool] = []
    real_build = indexes.build

    def build(*args: Any, concurrently: bool = True, **kwargs: Any) -> float:
        builds.append(concurrently)
        return real_build(*args, concurrently=concurrently, **kwargs)

    monkeypatch.setattr(indexes, "build", build)
    indexer = first_sync(chain)
    with override_settings(BOUNTY_DEFER_INDEXES="always"):
        indexer.prepare()
    catch_up(indexer)
    if dialect(connection).builds_beside_writes:  # the trigram indexes first, the most rows first
        plan = indexes._postgresql_jobs(indexes.missing_indexes(), concurrently=others_hold_records)
        by_rows = sorted((model.objects.count(), str(model._meta.db_table)) for model in (Bounty, Submission, Dispute))
        assert [job[0].split(" ON ")[1].split()[0] for job in plan[:3]] == [table for _, table in reversed(by_rows)]
        assert all("gin_trgm_ops" in job[0] and ("CONCURRENTLY" in job[0]) == others_hold_records for job in plan[:3])
        assert all(len(job) == 1 for job in plan) != others_hold_records  # one table's concurrent builds queue
    indexer.index_builder.build(indexer.ensure_deployment())

    assert builds == [others_hold_records]
    assert indexes.missing_indexes() == []
    assert all(indexes.existing_indexes().values())  # every one valid


def test_a_bulk_backfill_reads_back_the_records_its_reader_forgot_once_they_are_written(
        chain: Chain, monkeypatch: pytest.MonkeyPatch) -> None:
    # The reader process keeps at most RECORD_MEMORY records; beyond, it waits until the writer
    # has committed every batch it sent, forgets them, and reads them back as they are changed.
    monkeypatch.setattr(historical, "RECORD_MEMORY", 2)
    seed_demo_activity(chain.w3, chain.deployment)
    indexer = Indexer(replace(config_for(chain, BOUNTY_GETLOGS_MAX_BLOCKS=2), batch_logs=2, initial_span=1))
    indexer.ensure_deployment()
    indexer.prepare()
    assert SyncState.objects.get().bulk_from_block is not None

    catch_up(indexer)

    deployment = Deployment.objects.get()
    assert_mirror_equals_chain(chain.board, deployment)
    assert_bodies_are_current(deployment)  # statuses changed in later batches render as a new record would


def test_a_bulk_backfill_logs_one_resync_instead_of_an_entry_per_change(chain: Chain) -> None:
    indexer = first_sync(chain)
    indexer.prepare()
    catch_up(indexer)
    state = SyncState.objects.get()
    entries = list(ChangeLogEntry.objects.values_list("seq", "type", "payload", "block_number"))
    head = chain.w3.eth.block_number
    assert entries == [(1, "resync", {"from_block": chain.deployment.start_block, "to_block": head}, head)]
    assert (state.last_seq, state.bulk_from_block, state.backfill_from_block) == (1, None, None)

    _fund(chain)
    _bounty(chain, "ipfs://after-the-backfill")
    catch_up(indexer)  # following the head: an entry per change again
    assert list(ChangeLogEntry.objects.filter(seq__gt=1).values_list("type", flat=True)) == ["bounty.created"]


def test_a_caught_up_restart_keeps_every_index(chain: Chain) -> None:
    indexer = first_sync(chain)
    indexer.prepare()
    catch_up(indexer)
    indexer.index_builder.build(indexer.ensure_deployment())
    before = index_identities()
    _fund(chain)
    for n in range(3):
        _bounty(chain, f"ipfs://while-stopped-{n}")

    restarted = Indexer(config_for(chain))
    restarted.ensure_deployment()
    restarted.prepare()
    catch_up(restarted)

    assert index_identities() == before  # not one dropped and made again
    assert SyncState.objects.get().bulk_from_block is None
    assert not restarted.index_builder.indexes_to_build(restarted.ensure_deployment())


def test_indexes_serving_a_deployment_larger_than_the_backfill_stay(chain: Chain) -> None:
    make_deployment(chain_id=8453, contract_address="0x" + "42" * 20, bounty_total=1_000)
    before = index_identities()
    indexer = first_sync(chain)  # 16 records to add against 1,000 held
    indexer.prepare()
    catch_up(indexer)
    assert index_identities() == before
    assert indexes.index_state() == IndexStateChoice.READY
    assert ChangeLogEntry.objects.filter(type="bounty.created").count() == Bounty.objects.count()  # one per change


@override_settings(BOUNTY_DEFER_INDEXES="never")
def test_never_keeps_the_indexes_and_the_change_log_for_a_first_sync(chain: Chain) -> None:
    before = index_identities()
    indexer = first_sync(chain)
    indexer.prepare()
    catch_up(indexer)
    assert index_identities() == before
    assert not ChangeLogEntry.objects.filter(type="resync").exists()


@override_settings(BOUNTY_DEFER_INDEXES="always")
def test_always_defers_even_beside_a_larger_deployment(chain: Chain) -> None:
    make_deployment(chain_id=8453, contract_address="0x" + "42" * 20, bounty_total=1_000)
    indexer = first_sync(chain)
    indexer.prepare()
    assert indexes.index_state() == IndexStateChoice.DEFERRED
    assert indexes.deferred_by() == Deployment.objects.get(chain_id=chain.deployment.chain_id).pk


def test_another_deployments_deferral_is_left_to_its_own_indexer(chain: Chain) -> None:
    other = make_deployment(chain_id=8453, contract_address="0x" + "42" * 20)
    indexes.defer(other)
    indexer = first_sync(chain)
    indexer.prepare()
    catch_up(indexer)
    assert not indexer.index_builder.indexes_to_build(indexer.ensure_deployment())
    other.delete()  # gone: nobody else will build them
    assert indexer.index_builder.indexes_to_build(indexer.ensure_deployment())


@override_settings(BOUNTY_DEFER_INDEXES="always")
def test_a_reorg_while_the_indexes_are_deferred_leaves_the_mirror_equal_to_the_new_chain(chain: Chain) -> None:
    _fund(chain)
    _bounty(chain, "ipfs://kept")
    indexer = Indexer(config_for(chain))
    indexer.ensure_deployment()
    indexer.prepare()
    catch_up(indexer)
    fork = _snapshot(chain)
    for n in range(3):
        _bounty(chain, f"ipfs://orphaned-{n}")
    SyncState.objects.update(bulk_from_block=chain.w3.eth.block_number - 2)  # still backfilling
    catch_up(indexer)
    assert indexes.index_state() == IndexStateChoice.DEFERRED
    _revert(chain, fork)
    for n in range(4):
        _bounty(chain, f"ipfs://new-branch-{n}", reward=(n + 7) * USDC)
    catch_up(indexer)
    deployment = Deployment.objects.get()
    assert_mirror_equals_chain(chain.board, deployment)
    assert sorted(Bounty.objects.values_list("prompt", flat=True)) == [
        "ipfs://kept", *(f"ipfs://new-branch-{n}" for n in range(4))]
    indexer.index_builder.build(indexer.ensure_deployment())
    assert indexes.missing_indexes() == []


def test_an_index_left_by_an_interrupted_build_is_built_again_at_the_next_start(chain: Chain) -> None:
    indexer = first_sync(chain)
    indexer.prepare()
    catch_up(indexer)
    IndexState.objects.filter(pk=IndexState.SINGLETON).update(state=IndexStateChoice.BUILDING)
    if dialect(connection).index_validity:
        # What a concurrent build cut short leaves: the index in the catalog, INVALID. A unique
        # build over duplicate values fails the same way, for real. (SQLite's build is one
        # transaction: cut short, it leaves no index at all.)
        with connection.cursor() as cursor, pytest.raises(IntegrityError):
            cursor.execute("CREATE UNIQUE INDEX CONCURRENTLY bounty_status_idx ON records_bounty (status)")
        assert indexes.existing_indexes()["bounty_status_idx"] is False

    restarted = Indexer(config_for(chain))
    restarted.ensure_deployment()
    restarted.prepare()

    assert "bounty_status_idx" not in indexes.existing_indexes()
    assert indexes.index_state() == IndexStateChoice.DEFERRED
    assert restarted.index_builder.indexes_to_build(restarted.ensure_deployment())
    restarted.index_builder.build(restarted.ensure_deployment())
    assert indexes.existing_indexes()["bounty_status_idx"] is True
    assert indexes.missing_indexes() == []


def test_a_stop_cancels_the_build_keeping_no_index_and_the_next_build_makes_them_all(chain: Chain) -> None:
    indexer = first_sync(chain)
    indexer.prepare()
    catch_up(indexer)
    deferred = {index.name for index in indexes.missing_indexes()}
    assert deferred
    stop = threading.Event()
    stop.set()
    with pytest.raises(indexes.BuildStopped):
        indexes.build(indexer.deployment, stop=stop)
    assert {index.name for index in indexes.missing_indexes()} == deferred
    assert indexes.index_state() == IndexStateChoice.DEFERRED
    indexer.index_builder.build(indexer.ensure_deployment())
    assert indexes.missing_indexes() == []


LIST_QUERIES = ["/bounties?limit=3&sort=created_at&dir=desc", "/bounties?q=ipfs&sort=reward",
                "/submissions?limit=2&cursor=2", "/submissions?sort=status&dir=desc", "/disputes?q=0x&sort=bond",
                "/disputes?sort=created_at&limit=2",
                "/bounties/1/overview?chain_id={chain_id}&contract_address={address}"]


def test_the_api_answers_the_same_while_the_indexes_are_deferred(chain: Chain, client: Client) -> None:
    indexer = first_sync(chain)
    indexer.prepare()
    catch_up(indexer)
    assert indexes.index_state() == IndexStateChoice.DEFERRED
    paths = [path.format(chain_id=chain.deployment.chain_id, address=chain.deployment.contract_address)
             for path in LIST_QUERIES]
    deferred = [client.get(path) for path in paths]
    indexer.index_builder.build(indexer.ensure_deployment())
    cache.clear()  # the same data version: without this, the second answers would come from the cache
    built = [client.get(path) for path in paths]
    assert [r.status_code for r in deferred] == [200] * len(LIST_QUERIES)
    assert [body(r) for r in deferred] == [body(r) for r in built]


def body(response: Any) -> bytes:
    return b"".join(response.streaming_content) if response.streaming else bytes(response.content)
