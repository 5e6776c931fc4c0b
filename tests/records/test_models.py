"""The record models store chain values exactly and order them alike on SQLite and PostgreSQL."""

from __future__ import annotations

import pytest
from django.core.exceptions import ValidationError
from django.db import IntegrityError, connection, transaction

from records.fields import UINT256_MAX
from records.models import Bounty, Deployment, Dispute, Submission
from tests.factories import make_bounty, make_deployment, make_dispute, make_submission

pytestmark = pytest.mark.django_db


@pytest.mark.parametrize("amount", [0, 1, 2**53 + 1, 2**63, 2**64 + 1, 10**30 + 7, UINT256_MAX])
def test_amounts_round_trip_exactly(amount: int) -> None:
    bounty = make_bounty(bounty_amount=amount, fee_amount=amount, bond_amount=amount)
    stored = Bounty.objects.get(pk=bounty.pk)
    assert (stored.bounty_amount, stored.fee_amount, stored.bond_amount) == (amount, amount, amount)
    assert Bounty.objects.filter(bounty_amount=amount).get() == bounty


def test_amounts_sort_and_compare_as_numbers() -> None:
    amounts = [UINT256_MAX, 10, 9, 2**70, 0, 2**64, 100]
    for amount in amounts:
        make_bounty(bounty_amount=amount)
    assert list(Bounty.objects.order_by("bounty_amount").values_list("bounty_amount", flat=True)) == sorted(amounts)
    assert list(Bounty.objects.filter(bounty_amount__gt=10).order_by("-bounty_amount")
                .values_list("bounty_amount", flat=True)) == [UINT256_MAX, 2**70, 2**64, 100]


@pytest.mark.parametrize("amount", [-1, UINT256_MAX + 1, "12a", True])
def test_an_amount_outside_uint256_is_refused(amount: object) -> None:
    with pytest.raises(ValidationError), transaction.atomic():
        make_bounty(bounty_amount=amount)


def test_addresses_are_stored_lowercase_and_match_in_any_case() -> None:
    checksummed = "0xf39Fd6e51aad88F6F4ce6aB8827279cffFb92266"
    bounty = make_bounty(poster=checksummed)
    assert Bounty.objects.get(pk=bounty.pk).poster == checksummed.lower()
    assert Bounty.objects.get(poster=checksummed.upper().replace("0X", "0x")) == bounty
    assert Bounty.objects.get(poster__icontains="F6F4CE6A") == bounty


def test_a_malformed_address_or_hash_is_refused() -> None:
    with pytest.raises(ValidationError), transaction.atomic():
        make_bounty(poster="0x1234")
    with pytest.raises(ValidationError), transaction.atomic():
        make_bounty(tx_hash="0x" + "g" * 64)


def test_text_sorts_by_code_point_on_every_backend() -> None:
    prompts = ["b", "B", "a", "é", "Z", "z", "10", "9", "😀", "ア", "a b", "ab"]
    for prompt in prompts:
        make_bounty(prompt=prompt)
    assert list(Bounty.objects.order_by("prompt").values_list("prompt", flat=True)) == sorted(prompts)


def test_addresses_sort_alike_whatever_case_they_arrived_in() -> None:
    posters = ["0xBBBB" + "0" * 36, "0xaaaa" + "0" * 36, "0x9999" + "0" * 36, "0xAAAB" + "0" * 36]
    for poster in posters:
        make_bounty(poster=poster)
    assert list(Bounty.objects.order_by("poster").values_list("poster", flat=True)) == sorted(
        p.lower() for p in posters
    )


def test_ids_are_unique_per_deployment_only() -> None:
    active = make_deployment()
    other = make_deployment(chain_id=1, contract_address="0x" + "ab" * 20)
    make_bounty(active, bounty_id=1)
    make_bounty(other, bounty_id=1)
    with pytest.raises(IntegrityError), transaction.atomic():
        make_bounty(active, bounty_id=1)
    assert Deployment.objects.count() == 2


def test_an_unknown_status_is_refused_by_the_database() -> None:
    bounty = make_bounty()
    with pytest.raises(IntegrityError), transaction.atomic():
        Bounty.objects.filter(pk=bounty.pk).update(status="closed")


def test_parents_resolve_within_the_same_deployment() -> None:
    active = make_deployment()
    other = make_deployment(chain_id=1, contract_address="0x" + "cd" * 20)
    mine = make_bounty(active, bounty_id=7)
    make_bounty(other, bounty_id=7)
    submission = make_submission(mine)
    dispute = make_dispute(submission)
    assert Submission.objects.get(pk=submission.pk).bounty == mine
    assert Dispute.objects.select_related("bounty", "submission").get(pk=dispute.pk).submission == submission
    assert list(mine.submissions.all()) == [submission]
    assert list(submission.disputes.all()) == [dispute]
    assert list(Dispute.objects.filter(bounty__deployment=active)) == [dispute]


def test_sort_keys_have_indexes_ending_in_the_id_and_deployment() -> None:
    with connection.cursor() as cursor:
        constraints = connection.introspection.get_constraints(cursor, Bounty._meta.db_table)
    indexed = {tuple(c["columns"]) for c in constraints.values() if c["index"]}
    for key in ("created_at", "deadline", "bounty_amount", "bond_amount", "status", "poster", "submission_count"):
        assert (key, "bounty_id", "deployment_id") in indexed
