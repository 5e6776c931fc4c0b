"""The number of queries of every route, pinned: independent of the number of rows (no N+1), and
smaller once the body is cached (a page or record is then read from the cache after the query
for the data version; an unpaged array from its spool, records.spools, and a matching tag skips
either)."""

from __future__ import annotations

import pytest
from django.test import Client
from pytest_django import DjangoAssertNumQueries

from records.models import Deployment
from tests.api import helpers as h
from tests.factories import ACTIVE_CONTRACT, bump_version

# (route, queries on a cold cache, once cached, for a matching If-None-Match). The parts: the
# data version (V), the deployment IDs a list spans (I), the rows (their stored bodies: R), the
# total of a full page (T: I again, then the deployments' totals, a parent's counter or a COUNT; a
# page that is not full is its own total), the qualified or active deployment (Q), the record or an
# overview's parts (O). A body not cached is read in one snapshot with the data version it is
# cached and tagged under: V again, first in it (records.api.caching).
COUNTS: list[tuple[str, int, int, int | None]] = [
    ("/health", 7, 7, None),                 # SELECT 1, Q, its sync state, index state, processes, webhooks (2)
    ("/bounties", 4, 1, 1),                               # V, then V I R in the spool's read | V | V
    ("/bounties?limit=2", 6, 1, 1),                       # V, V I R T T in the body's snapshot | V
    ("/bounties?q=&sort=submissions", 4, 1, 1),         # V, V I R: a short page is its own total
    ("/bounties/{b}", 4, 2, 2),                           # Q V, V O in the body's snapshot | Q V
    ("/bounties/{b}/overview", 6, 2, 2),                  # Q V, V bounty submissions disputes | Q V
    ("/submissions", 4, 1, 1),
    ("/submissions?cursor=0", 4, 1, 1),
    ("/submissions?bounty_id={b}", 5, 2, 2),              # Q V, then V I R in the spool's read | Q V
    ("/submissions?bounty_id={b}&limit=2", 7, 2, 2),      # Q V, V I R T(I, the bounty's counter) | Q V
    ("/submissions/{s}", 4, 2, 2),
    ("/submissions/{s}/overview", 6, 2, 2),               # Q V, V submission disputes bounty | Q V
    ("/disputes", 4, 1, 1),
    ("/disputes?q=pending", 4, 1, 1),                     # V, V I R | V
    ("/disputes?bounty_id={b}", 5, 2, 2),                 # Q V, V I R | Q V
    ("/disputes?submission_id={s}", 5, 2, 2),
    ("/disputes?submission_id={s}&limit=2", 7, 2, 2),     # T from the submission's counter
    ("/disputes/{d}", 4, 2, 2),
    ("/disputes/{d}/overview", 7, 2, 2),                  # Q V, V dispute siblings bounty submission | Q V
    ("/bounties/0", 4, 4, None),                          # a 404 is never cached, has no tag
    # A deep page of the default order, read as an ID range: + one query for the deployments'
    # totals and lowest and highest IDs (E), in one deployment or across all of them.
    (f"/submissions?chain_id=91342&contract_address={ACTIVE_CONTRACT}&cursor=1", 5, 1, 1),  # V, V I E R
    ("/disputes?chain_id=91342&limit=1&cursor=2&dir=asc", 7, 1, 1),
    ("/bounties?limit=1&cursor=1", 7, 1, 1),
]


@pytest.fixture(params=[1, 2], ids=["one tree", "two trees"])
def tree(request: pytest.FixtureRequest, active: Deployment, other_chain: Deployment) -> h.Tree:
    """The active deployment's trees, and as many bounties of another deployment: the counts must
    not grow with the rows."""
    trees = [h.make_tree(active, disputes_per_submission=(2, 1)) for _ in range(request.param)]
    for _ in range(request.param):
        h.make_tree(other_chain, disputes_per_submission=(1,))
    return trees[0]


@pytest.mark.parametrize(("template", "cold", "warm", "tagged"), COUNTS)
def test_each_route_makes_a_fixed_number_of_queries(api: Client, django_assert_num_queries: DjangoAssertNumQueries,
                                                    tree: h.Tree, template: str, cold: int, warm: int,
                                                    tagged: int | None) -> None:
    """Cold fills the cache, warm reads it, and a matching If-None-Match is answered from the tag."""
    path = template.format(**tree.ids)
    with django_assert_num_queries(cold):
        response = api.get(path)
        h.content(response)
    with django_assert_num_queries(warm):
        h.content(api.get(path))
    if tagged is not None:
        with django_assert_num_queries(tagged):
            assert api.get(path, headers={"If-None-Match": response["ETag"]}).status_code == 304


@pytest.mark.parametrize(("template", "queries"), [
    ("/bounties", 1), ("/submissions", 1), ("/disputes", 1),  # V
    ("/submissions?bounty_id={b}", 2), ("/disputes?submission_id={s}", 2),  # Q V
])
def test_head_of_an_unpaged_list_reads_no_records(api: Client, django_assert_num_queries: DjangoAssertNumQueries,
                                                  tree: h.Tree, template: str, queries: int) -> None:
    """A HEAD sends no body, so the stream of records is never read; its tag is GET's."""
    path = template.format(**tree.ids)
    with django_assert_num_queries(queries):
        head = api.head(path)
        assert h.content(head) == b""
    assert head["ETag"] == api.get(path)["ETag"]


def test_only_a_full_page_or_one_past_the_end_reads_the_total(
        api: Client, active: Deployment, django_assert_num_queries: DjangoAssertNumQueries) -> None:
    """A page with fewer rows than its limit ends the list, so its offset plus its rows is the
    total; a full page, or one past the end, has to ask (here a COUNT, with q)."""
    for _ in range(3):
        h.make_tree(active, disputes_per_submission=())
    cases = [({"q": "open", "limit": "5"}, 4), ({"q": "open", "limit": "3", "cursor": "1"}, 4),  # V, V I R
             ({"q": "open", "limit": "3"}, 6), ({"q": "open", "cursor": "7"}, 6)]  # V, V I R, T: I COUNT
    for params, queries in cases:
        bump_version(active)  # a new data version: nothing cached
        with django_assert_num_queries(queries):
            assert h.page(api, "/bounties", params)["total"] == 3, params
