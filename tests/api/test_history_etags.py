"""Cached answers and ETags across histories (records.history): a database restored from a backup,
a promoted standby or a re-index numbers its changes alike, so after the switch `last_seq` can be
the very integer it was, over other records. The data version carries the history's digest, so
with the cache kept (the same Redis before and after, or the process's own memory) no old ETag
is answered 304 for a body that differs from what it tagged, and no request is answered a body
cached for the other history: on every read route, lists, pages, records and overviews."""

from __future__ import annotations

import orjson
import pytest
from django.core.cache import cache
from django.db import transaction
from django.http import HttpResponseBase
from django.test import Client

from indexer.changelog import Change
from records.changes import MessageType
from records.history import Position
from records.models import Bounty, Deployment, Dispute, Submission
from records.selectors import head_position
from tests.api import helpers as h
from tests.factories import set_status
from tests.history import replace_history


@pytest.fixture
def tree(active: Deployment) -> h.Tree:
    """A bounty, its submission and two disputes, each with its creation in the change log."""
    tree = h.make_tree(active, disputes_per_submission=(2,))
    replace_history(active, 0, logged("created", tree.bounty, *tree.submissions, *tree.disputes))
    return tree


def logged(action: str, *records: Bounty | Submission | Dispute) -> list[Change]:
    """The change-log entries of `records` as the indexer writes them: `<kind>.<action>` with the
    record's body."""
    return [(MessageType(f"{type(record).__name__.lower()}.{action}"), orjson.loads(record.body), record.block_number)
            for record in records]


def another_history(active: Deployment, tree: h.Tree) -> Position:
    """Puts in place, in one transaction, the history a restored backup could hold: only the
    bounty's creation in common, then the bounty refunded, the submission rejected and the first
    dispute upheld, up to the same seq as before."""
    before = head_position(active.pk)
    with transaction.atomic():
        changed = [set_status(tree.bounty, "refunded"), set_status(tree.submissions[0], "rejected"),
                   set_status(tree.disputes[0], "upheld")]
        after = replace_history(active, 1, logged("updated", *changed))
    assert after.seq == before.seq and after.digest != before.digest
    return after


def fetch(api: Client, template: str, tree: h.Tree, tag: str | None = None) -> HttpResponseBase:
    response: HttpResponseBase = api.get(template.format(**tree.ids),
                                         headers={} if tag is None else {"If-None-Match": tag})
    return response


@pytest.mark.parametrize("template", h.READ_ROUTES)
def test_an_answer_of_one_history_is_never_served_in_another_at_the_same_seq(
        api: Client, active: Deployment, tree: h.Tree, template: str) -> None:
    first = fetch(api, template, tree)
    old_tag, old_body = first["ETag"], h.content(first)
    assert first.status_code == 200 and fetch(api, template, tree, old_tag).status_code == 304  # tagged, cached

    another_history(active, tree)
    again = fetch(api, template, tree, old_tag)
    new_tag, new_body = again["ETag"], h.content(again)
    assert again.status_code == 200, "an old ETag is not a 304 for the other history's body"
    assert new_body != old_body and new_tag != old_tag
    plain = fetch(api, template, tree)
    assert (plain.status_code, h.content(plain), plain["ETag"]) == (200, new_body, new_tag)

    cache.clear()  # what the new history answers with nothing cached: the same
    fresh = fetch(api, template, tree)
    assert (h.content(fresh), fresh["ETag"]) == (new_body, new_tag)
    assert fetch(api, template, tree, new_tag).status_code == 304
