"""The indexer's unit of work (indexer.store): what its render cache assumes of the record kinds.

`RecordStore._render` renders a record it rendered before again only when its status changed,
and then by swapping the status into its search fields and its body. That is right only while
the status is the one field of the kind's `mutable_fields` (records.kinds) that either holds:
this test fails for a new mutable field that reaches the search text or the body before the
render cache handles it."""

from __future__ import annotations

from typing import Any

import pytest

from records.kinds import KINDS, RecordKind
from records.models import Deployment
from records.representation import record_body
from records.search import search_fields
from tests.factories import make_bounty, make_deployment, make_dispute, make_submission

pytestmark = pytest.mark.django_db


def _one_of_each(deployment: Deployment) -> dict[str, Any]:
    bounty = make_bounty(deployment)
    submission = make_submission(bounty)
    return {"bounty": bounty, "submission": submission, "dispute": make_dispute(submission)}


def _rendered(record: Any, deployment: Deployment) -> tuple[list[str], str]:
    """What the store renders of a record: its search fields and its body."""
    return search_fields(record), record_body(record, chain_id=deployment.chain_id,
                                              contract_address=deployment.contract_address)


def _another(value: Any) -> Any:
    return value + 1 if isinstance(value, int) else f"{value}-changed"


@pytest.mark.parametrize("kind", KINDS, ids=lambda kind: kind.name)
def test_the_status_is_the_one_mutable_field_a_record_renders(kind: RecordKind) -> None:
    deployment = make_deployment()
    records = _one_of_each(deployment)
    assert set(records) == {kind.name for kind in KINDS}  # a record of every kind
    record = records[kind.name]
    before = _rendered(record, deployment)
    for name in kind.mutable_fields:
        if name != "status":
            setattr(record, name, _another(getattr(record, name)))
            assert _rendered(record, deployment) == before, (
                f"{kind.name}.{name} changes the search text or the body: RecordStore._render must re-render it")
    assert "status" in kind.mutable_fields
    record.status = _other_status(record)
    assert _rendered(record, deployment) != before  # the status is rendered: the cache swaps it in


def _other_status(record: Any) -> str:
    choices: list[str] = [value for value, _ in type(record)._meta.get_field("status").choices]
    return next(value for value in choices if value != record.status)
