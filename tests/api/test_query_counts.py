"""The number of queries of every route, pinned: independent of the number of rows (no N+1), and
smaller once the body is cached (a page or record is then read from the cache after the query
for the data version; streamed arrays are never cached, but a matching tag skips them too)."""

from __future__ import annotations

import pytest
from django.test import Client
from pytest_django import DjangoAssertNumQueries

from records.models import Deployment
from tests.api import helpers as h
from tests.factories import ACTIVE_CONTRACT

# (route, queries on a cold cache, once cached, for a matching If-None-Match). The parts: the
# data version (V), the deployment IDs a list spans (I), the rows (R), the deployments of the rows
# (D), the total (T: I again, then the deployments' totals, a parent's counter or a COUNT), the
# qualified or active deployment (Q), the record or an overview's parts (O).
COUNTS: list[tuple[str, int, int, int | None]] = [
    ("/health", 3, 3, None),                              # SELECT 1, Q, its sync state; no tag
    ("/bounties", 4, 4, 1),                               # V D I R: streamed, never cached | V
    ("/bounties?limit=2", 6, 1, 1),                       # V I R D T T | V
    ("/bounties?q=&sort=submissions", 6, 1, 1),
    ("/bounties/{b}", 3, 2, 2),                           # Q V O | Q V
    ("/bounties/{b}/overview", 5, 2, 2),                  # Q V bounty submissions disputes | Q V
    ("/submissions", 4, 4, 1),
    ("/submissions?cursor=0", 6, 1, 1),
    ("/submissions?bounty_id={b}", 5, 5, 2),              # Q V D I R | Q V
    ("/submissions?bounty_id={b}&limit=2", 7, 2, 2),      # Q V I R D T(I, the bounty's counter) | Q V
    ("/submissions/{s}", 3, 2, 2),
    ("/submissions/{s}/overview", 5, 2, 2),               # Q V submission disputes bounty | Q V
    ("/disputes", 4, 4, 1),
    ("/disputes?q=pending", 6, 1, 1),                     # V I R D T(I, COUNT) | V
    ("/disputes?bounty_id={b}", 7, 2, 2),                 # Q V I R D T(I, COUNT) | Q V
    ("/disputes?submission_id={s}", 5, 5, 2),
    ("/disputes?submission_id={s}&limit=2", 7, 2, 2),     # T from the submission's counter
    ("/disputes/{d}", 3, 2, 2),
    ("/disputes/{d}/overview", 6, 2, 2),                  # Q V dispute siblings bounty submission | Q V
    ("/bounties/0", 3, 3, None),                          # a 404 is never cached, has no tag
    # A deep page of one deployment's default order, read as an ID range: + the deployment's
    # total, the lowest and the highest ID.
    (f"/bounties?chain_id=91342&contract_address={ACTIVE_CONTRACT}&cursor=1", 9, 1, 1),
    ("/disputes?chain_id=91342&limit=1&cursor=2&dir=asc", 9, 1, 1),
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
