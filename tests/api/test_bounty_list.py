"""GET /bounties: what only the bounty list does. test_lists.py pins what every list does."""

from __future__ import annotations

from django.test import Client

from records.models import Deployment
from tests.api import helpers as h
from tests.factories import make_bounty, make_submission

PATH = h.LIST_PATHS["bounties"]


def test_page_rows_carry_their_exact_submission_count(api: Client, active: Deployment) -> None:
    bounties = [make_bounty(active) for _ in range(3)]
    for bounty, count in zip(bounties, [0, 3, 1], strict=True):
        for _ in range(count):
            make_submission(bounty)
    items = h.page(api, PATH, {"dir": "asc", "limit": "3"})["items"]
    assert [row["submission_count"] for row in items] == [0, 3, 1]
    assert items == [h.expected_bounty(b, with_count=True) for b in bounties]
    assert all("submission_count" not in row for row in h.array(api, PATH))
