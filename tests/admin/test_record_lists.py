"""The records' lists and change pages: a submission links to its bounty, or says it is not mirrored."""

from __future__ import annotations

from django.test import Client
from django.urls import reverse

from records.models import Bounty, Dispute, Submission
from tests.factories import make_bounty, make_dispute, make_submission


def test_a_submission_links_to_its_bounty(moderator_client: Client, dispute: Dispute) -> None:
    bounty = Bounty.objects.get()
    link = f'<a href="{reverse("admin:records_bounty_change", args=[bounty.pk])}">bounty {bounty.bounty_id}</a>'
    assert link in moderator_client.get(reverse("admin:records_submission_changelist")).content.decode()
    submission = Submission.objects.get()
    page = moderator_client.get(reverse("admin:records_submission_change", args=[submission.pk])).content.decode()
    assert link in page


def test_a_submission_whose_bounty_is_not_mirrored_says_so(moderator_client: Client, db: None) -> None:
    orphan = make_submission(make_bounty(), bounty_id=999_999)
    assert "#999999 (not mirrored)" in moderator_client.get(
        reverse("admin:records_submission_changelist")).content.decode()
    page = moderator_client.get(reverse("admin:records_submission_change", args=[orphan.pk])).content.decode()
    assert "#999999 (not mirrored)" in page


def test_a_dispute_links_to_its_siblings(moderator_client: Client, dispute: Dispute) -> None:
    sibling = make_dispute(Submission.objects.get())
    page = moderator_client.get(reverse("admin:records_dispute_change", args=[dispute.pk])).content.decode()
    assert f'<a href="{reverse("admin:records_dispute_change", args=[sibling.pk])}">#{sibling.dispute_id}</a>' in page
    assert "sibling disputes: none" not in page
