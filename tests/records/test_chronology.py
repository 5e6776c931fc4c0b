"""Whether a deployment's records are in chain order (records.chronology), as the data migration
and the indexer establish it, and the two database helpers that deep pages by created_at use."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from django.apps import apps
from django.db.models import F

from records.chronology import AnyOf, EpochMicroseconds, refresh_in_chain_order
from records.models import Bounty, Deployment
from tests.factories import T0, make_bounty, make_deployment, make_submission

pytestmark = pytest.mark.django_db


def test_records_whose_created_at_rises_with_the_id_are_in_chain_order() -> None:
    deployment = make_deployment()
    for n in range(1, 5):  # two sharing each second
        make_bounty(deployment, bounty_id=n, created_at=T0 + timedelta(seconds=n // 2))
    refresh_in_chain_order(apps)
    assert Deployment.objects.get(pk=deployment.pk).bounty_in_chain_order


def test_one_record_older_than_the_one_before_it_breaks_the_order() -> None:
    ordered, broken = make_deployment(chain_id=1), make_deployment(chain_id=2)
    bounties = [make_bounty(deployment, bounty_id=1, created_at=T0) for deployment in (ordered, broken)]
    for bounty in bounties:
        make_submission(bounty, submission_id=1, created_at=T0 + timedelta(seconds=5))
    make_submission(bounties[1], submission_id=2, created_at=T0)  # older than submission 1
    refresh_in_chain_order(apps)
    assert Deployment.objects.get(pk=ordered.pk).submission_in_chain_order
    broken = Deployment.objects.get(pk=broken.pk)
    assert not broken.submission_in_chain_order
    assert broken.bounty_in_chain_order, "each kind has its own flag"


@pytest.mark.parametrize("moment", [
    datetime(1970, 1, 1, tzinfo=UTC), datetime(2025, 6, 1, 12, 30, 5, tzinfo=UTC),
    datetime(2025, 6, 1, 12, 30, 5, 1, tzinfo=UTC), datetime(2031, 12, 31, 23, 59, 59, 999_999, tzinfo=UTC),
], ids=["epoch", "whole second", "one microsecond", "last microsecond of a year"])
def test_epoch_microseconds_reads_created_at_exactly(moment: datetime) -> None:
    make_bounty(make_deployment(), bounty_id=1, created_at=moment)
    got = Bounty.objects.values_list(EpochMicroseconds("created_at"), flat=True).get()
    assert got == (moment - datetime(1970, 1, 1, tzinfo=UTC)) // timedelta(microseconds=1)


def test_any_of_matches_exactly_the_listed_ids() -> None:
    deployment = make_deployment()
    for n in range(1, 8):
        make_bounty(deployment, bounty_id=n)
    wanted = Bounty.objects.filter(AnyOf(F("bounty_id"), [2, 5, 7, 99])).values_list("bounty_id", flat=True)
    assert sorted(wanted) == [2, 5, 7]
