"""The indexer keeps `Deployment.<kind>_in_chain_order` (records.chronology): a deployment it creates
starts in order, and a batch whose new records are older than those before them clears it."""

from __future__ import annotations

from datetime import timedelta

import pytest

from indexer.store import RecordStore
from records.models import Bounty, Deployment
from tests.factories import T0, make_bounty, make_deployment

pytestmark = pytest.mark.django_db


def _store_with_new_bounty(deployment: Deployment, bounty_id: int, seconds: int) -> RecordStore:
    template = make_bounty(deployment, bounty_id=bounty_id)
    Bounty.objects.filter(pk=template.pk).delete()  # a record as the store builds it, not yet saved
    template.pk, template.created_at = None, T0 + timedelta(seconds=seconds)
    store = RecordStore(Deployment.objects.get(pk=deployment.pk))
    store.add("bounty", bounty_id, template)
    return store


@pytest.fixture
def deployment() -> Deployment:
    deployment = make_deployment()
    make_bounty(deployment, bounty_id=1, created_at=T0 + timedelta(seconds=10))
    Deployment.objects.filter(pk=deployment.pk).update(bounty_in_chain_order=True, bounty_total=1)
    return deployment


def test_new_records_no_older_than_those_before_them_keep_the_order(deployment: Deployment) -> None:
    _store_with_new_bounty(deployment, 2, seconds=10).save()
    assert Deployment.objects.get(pk=deployment.pk).bounty_in_chain_order
    assert Bounty.objects.filter(deployment=deployment).count() == 2


def test_a_new_record_older_than_the_one_before_it_clears_the_order(deployment: Deployment) -> None:
    _store_with_new_bounty(deployment, 2, seconds=9).save()
    assert not Deployment.objects.get(pk=deployment.pk).bounty_in_chain_order
    assert Bounty.objects.filter(deployment=deployment).count() == 2
