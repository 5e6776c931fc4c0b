"""The list selectors' fast paths give exactly the rows of the plain ordered list at every offset:
the ID-range page over one or several deployments, and the deferred (keys first) deep page."""

from __future__ import annotations

import re
import threading
import time
from datetime import timedelta
from typing import Any

import pytest
from django.db import connection, connections
from django.db.models import F
from django.test.utils import CaptureQueriesContext

from records import merged_order, selectors
from records.kinds import BOUNTY
from records.models import Bounty, Deployment
from records.selectors import DeploymentFilter, ListQuery, PageRow, record_list, record_page
from tests.factories import T0, make_bounty, make_deployment

pytestmark = pytest.mark.django_db

ALL = DeploymentFilter()


def _bounties(deployment: Deployment, ids: range) -> None:
    for n in ids:  # created_at and amounts against the ID order, so other sorts differ from it
        make_bounty(deployment, bounty_id=n, created_at=T0 + timedelta(seconds=(n * 7) % 11),
                    bounty_amount=(n * 5) % 9)


@pytest.fixture
def dense() -> list[Deployment]:
    """Three deployments whose IDs run without gaps but over different ranges."""
    deployments = [make_deployment(chain_id=chain) for chain in (1, 2, 3)]
    _bounties(deployments[0], range(1, 24))
    _bounties(deployments[1], range(1, 6))
    _bounties(deployments[2], range(10, 19))
    return deployments


def _expected(query: ListQuery, offset: int, limit: int) -> list[PageRow]:
    return [PageRow(r.body, r.submission_count) for r in record_list(query)[offset:offset + limit]]


def _got(query: ListQuery, offset: int, limit: int) -> list[PageRow]:
    return record_page(query, offset, limit)


@pytest.mark.parametrize("descending", [True, False], ids=["desc", "asc"])
@pytest.mark.parametrize("limit", [1, 3, 8])
def test_an_id_range_page_across_deployments_equals_the_plain_list_at_every_offset(
        dense: list[Deployment], descending: bool, limit: int) -> None:
    query = ListQuery(BOUNTY, ALL, descending=descending)
    for offset in range(40):
        assert _got(query, offset, limit) == _expected(query, offset, limit), offset


@pytest.mark.parametrize("descending", [True, False], ids=["desc", "asc"])
def test_an_id_range_page_of_one_deployment_equals_the_plain_list(dense: list[Deployment], descending: bool) -> None:
    query = ListQuery(BOUNTY, DeploymentFilter(chain_id=3), descending=descending)
    for offset in range(12):
        assert _got(query, offset, 2) == _expected(query, offset, 2), offset


def test_an_id_range_page_reads_the_rows_at_its_offset_without_skipping_them(dense: list[Deployment]) -> None:
    """The page query starts at the ID the offset lands on, so SQL skips fewer rows than there are
    deployments (those sharing that ID that come first)."""
    query = ListQuery(BOUNTY, ALL)
    ranges = selectors._dense_id_ranges(BOUNTY, [d.pk for d in dense]) or []
    assert [(r.low, r.high) for r in ranges] == [(1, 23), (1, 5), (10, 18)]
    with CaptureQueriesContext(connection) as queries:
        got = _got(query, 30, 3)
    assert got == _expected(query, 30, 3)
    page_sql = queries.captured_queries[-1]["sql"]
    offsets = [int(n) for n in re.findall(r"OFFSET (\d+)", page_sql)]
    assert "bounty_id\" <= " in page_sql and all(n < 3 for n in offsets), page_sql


def test_with_a_gap_in_the_ids_the_page_is_read_by_offset(dense: list[Deployment]) -> None:
    make_bounty(dense[1], bounty_id=40)  # 1..5 and 40: not dense
    assert selectors._dense_id_ranges(BOUNTY, [d.pk for d in dense]) is None
    query = ListQuery(BOUNTY, ALL)
    for offset in (1, 17, 30, 37, 38):
        assert _got(query, offset, 4) == _expected(query, offset, 4), offset


def test_a_deployment_without_records_takes_no_place(dense: list[Deployment]) -> None:
    make_deployment(chain_id=4)
    query = ListQuery(BOUNTY, ALL, descending=False)
    for offset in (1, 5, 36):
        assert _got(query, offset, 3) == _expected(query, offset, 3), offset


@pytest.mark.parametrize("sort", ["created_at", "reward", "id"])
@pytest.mark.parametrize("descending", [True, False], ids=["desc", "asc"])
def test_a_deferred_deep_page_equals_the_plain_list(dense: list[Deployment], monkeypatch: pytest.MonkeyPatch,
                                                    sort: str, descending: bool) -> None:
    """Keys first, then their rows, in the keys' order (forced from offset 1 here)."""
    monkeypatch.setattr(selectors, "DEFERRED_OFFSET", 1)
    for query in (ListQuery(BOUNTY, ALL, sort=sort, descending=descending),
                  ListQuery(BOUNTY, DeploymentFilter(chain_id=1), sort=sort, descending=descending),
                  ListQuery(BOUNTY, ALL, q="data", sort=sort, descending=descending)):
        for offset in (1, 4, 20, 36, 37, 50):
            assert _got(query, offset, 5) == _expected(query, offset, 5), (query, offset)


def _in_chain_order(deployment: Deployment, ids: range, per_second: int) -> None:
    """Bounties whose created_at rises with the ID, `per_second` of them sharing each second."""
    for n in ids:
        make_bounty(deployment, bounty_id=n, created_at=T0 + timedelta(seconds=n // per_second),
                    bounty_amount=(n * 5) % 9)
    Deployment.objects.filter(pk=deployment.pk).update(bounty_in_chain_order=True)


@pytest.fixture
def chain_ordered() -> list[Deployment]:
    """Three deployments in chain order, over different ranges and times that interleave, with
    records sharing their second within a deployment and across deployments."""
    deployments = [make_deployment(chain_id=chain) for chain in (1, 2, 3)]
    _in_chain_order(deployments[0], range(1, 24), per_second=3)
    _in_chain_order(deployments[1], range(1, 6), per_second=1)
    _in_chain_order(deployments[2], range(10, 19), per_second=2)
    return deployments


@pytest.mark.parametrize("descending", [True, False], ids=["desc", "asc"])
@pytest.mark.parametrize("limit", [1, 4])
def test_a_deep_page_by_created_at_in_chain_order_equals_the_plain_list_at_every_offset(
        chain_ordered: list[Deployment], monkeypatch: pytest.MonkeyPatch, descending: bool, limit: int) -> None:
    monkeypatch.setattr(selectors, "DEFERRED_OFFSET", 1)
    for deployments in (ALL, DeploymentFilter(chain_id=1), DeploymentFilter(chain_id=3)):
        query = ListQuery(BOUNTY, deployments, sort="created_at", descending=descending)
        for offset in range(1, 40):
            assert _got(query, offset, limit) == _expected(query, offset, limit), (deployments, offset)


def test_a_deep_page_of_one_deployment_in_chain_order_by_created_at_is_an_id_range_page(
        chain_ordered: list[Deployment], monkeypatch: pytest.MonkeyPatch) -> None:
    """In chain order a deployment's created_at order is its ID order: the page query starts at
    the ID its offset lands on instead of skipping rows."""
    monkeypatch.setattr(selectors, "DEFERRED_OFFSET", 1)
    query = ListQuery(BOUNTY, DeploymentFilter(chain_id=1), sort="created_at", descending=False)
    with CaptureQueriesContext(connection) as queries:
        got = _got(query, 15, 3)
    assert got == _expected(query, 15, 3)
    page_sql = queries.captured_queries[-1]["sql"]
    assert "bounty_id\" >= 16" in page_sql and "OFFSET" not in page_sql, page_sql


def test_a_deployment_out_of_chain_order_takes_the_deferred_path(
        chain_ordered: list[Deployment], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(selectors, "DEFERRED_OFFSET", 1)
    make_bounty(chain_ordered[1], bounty_id=6, created_at=T0)  # older than bounty 5 of its deployment
    Deployment.objects.filter(pk=chain_ordered[1].pk).update(bounty_in_chain_order=False)
    assert selectors._dense_id_ranges(BOUNTY, [chain_ordered[1].pk], in_chain_order=True) is None
    for descending in (True, False):
        query = ListQuery(BOUNTY, DeploymentFilter(chain_id=2), sort="created_at", descending=descending)
        for offset in (1, 2, 4, 5):
            assert _got(query, offset, 2) == _expected(query, offset, 2), offset


@pytest.mark.parametrize("descending", [True, False], ids=["desc", "asc"])
def test_a_deep_page_by_created_at_across_deployments_in_sampling_rounds_equals_the_plain_list(
        chain_ordered: list[Deployment], monkeypatch: pytest.MonkeyPatch, descending: bool) -> None:
    """Rounds of a few samples each (records.merged_order) before the keys are read whole."""
    monkeypatch.setattr(selectors, "DEFERRED_OFFSET", 1)
    monkeypatch.setattr(merged_order, "SAMPLES", 3)
    monkeypatch.setattr(merged_order, "MIN_SAMPLES", 2)
    monkeypatch.setattr(merged_order, "WHOLE_KEYS", 4)
    query = ListQuery(BOUNTY, ALL, sort="created_at", descending=descending)
    for offset in range(1, 40):
        with CaptureQueriesContext(connection) as queries:
            got = _got(query, offset, 2)
        assert got == _expected(query, offset, 2), offset
        assert not any("OFFSET" in q["sql"] for q in queries.captured_queries), offset


def test_a_deep_page_by_created_at_across_deployments_reads_keys_by_id_not_by_skipping(
        chain_ordered: list[Deployment], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(selectors, "DEFERRED_OFFSET", 1)
    query = ListQuery(BOUNTY, ALL, sort="created_at")
    with CaptureQueriesContext(connection) as queries:
        got = _got(query, 20, 3)
    assert got == _expected(query, 20, 3)
    # deployments, their ID ranges, the keys of the windows (here: all of them), the page's rows
    assert len(queries.captured_queries) == 4
    assert "BETWEEN" in queries.captured_queries[2]["sql"] and "OFFSET" not in queries.captured_queries[2]["sql"]


def test_a_record_gone_under_the_reads_gives_the_page_of_the_records_there(
        chain_ordered: list[Deployment], monkeypatch: pytest.MonkeyPatch) -> None:
    """A record goes (as in a reorganisation) after the ID ranges are read and before the keys
    are: keys read by ID then miss it, and the page is read by skipping, as the list now is."""
    monkeypatch.setattr(selectors, "DEFERRED_OFFSET", 1)
    ranges_then = selectors._dense_id_ranges

    def ranges_then_reorganised(*args: Any, **kwargs: Any) -> list[selectors.IdRange] | None:
        ranges = ranges_then(*args, **kwargs)
        newest = Bounty.objects.filter(deployment=chain_ordered[0]).order_by("-bounty_id")[0]
        newest.delete()
        Deployment.objects.filter(pk=chain_ordered[0].pk).update(bounty_total=F("bounty_total") - 1)
        return ranges

    monkeypatch.setattr(selectors, "_dense_id_ranges", ranges_then_reorganised)
    for descending in (True, False):
        query = ListQuery(BOUNTY, ALL, sort="created_at", descending=descending)
        with CaptureQueriesContext(connection) as queries:
            got = _got(query, 20, 3)
        assert got == _expected(query, 20, 3), descending
        assert "OFFSET" in queries.captured_queries[-2]["sql"]  # the skip that reads the page's keys


@pytest.mark.django_db(transaction=True)
def test_a_deep_page_by_created_at_across_deployments_reads_one_snapshot(
        chain_ordered: list[Deployment], monkeypatch: pytest.MonkeyPatch) -> None:
    """Another connection removes the newest records (as a reorganisation does) and commits while
    the page's reads run: the page is the list as it was when they began, read by the merge, not
    a mix of before and after (nor the skip that a missing key would fall back to)."""
    monkeypatch.setattr(selectors, "DEFERRED_OFFSET", 1)
    query = ListQuery(BOUNTY, ALL, sort="created_at")
    before = _expected(query, 3, 4)
    ranges_then = selectors._dense_id_ranges

    def reorganise() -> None:
        Bounty.objects.filter(deployment=chain_ordered[0], bounty_id__gte=20).delete()
        Deployment.objects.filter(pk=chain_ordered[0].pk).update(bounty_total=F("bounty_total") - 4)
        connections.close_all()

    def ranges_then_reorganised(*args: Any, **kwargs: Any) -> list[selectors.IdRange] | None:
        ranges = ranges_then(*args, **kwargs)
        elsewhere = threading.Thread(target=reorganise)
        elsewhere.start()
        elsewhere.join(timeout=1)  # it commits while the reads hold their snapshot
        return ranges

    monkeypatch.setattr(selectors, "_dense_id_ranges", ranges_then_reorganised)
    skipped: list[tuple[Any, ...]] = []

    def deferred_page(*args: Any) -> list[PageRow]:
        skipped.append(args)
        return []

    monkeypatch.setattr(selectors, "_deferred_page", deferred_page)
    assert _got(query, 3, 4) == before
    assert skipped == []
    monkeypatch.setattr(selectors, "_dense_id_ranges", ranges_then)
    for _ in range(100):  # the other connection's delete has landed
        if not Bounty.objects.filter(deployment=chain_ordered[0], bounty_id__gte=20).exists():
            break
        time.sleep(0.05)
    assert _expected(query, 3, 4) != before
