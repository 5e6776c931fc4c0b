"""The admin's front page: how many disputes wait for review, one click from the queue."""

from __future__ import annotations

import re

from django.contrib.auth.models import User
from django.test import Client
from django.urls import reverse

from records.models import Dispute, Submission
from tests.factories import make_dispute, set_status

QUEUE = reverse("admin:records_disputereviewqueue_changelist")


def _waiting(client: Client) -> str:
    page = client.get(reverse("admin:index")).content.decode()
    match = re.search(r'<p id="review-waiting">(.*?)</p>', page, re.S)
    assert match is not None, page
    return " ".join(re.sub(r"<[^>]+>", "", match.group(1)).split())


def test_it_counts_the_disputes_waiting_for_review_and_links_the_queue(moderator_client: Client,
                                                                      dispute: Dispute) -> None:
    submission = Submission.objects.get()
    make_dispute(submission)
    set_status(make_dispute(submission), "upheld")
    page = moderator_client.get(reverse("admin:index")).content.decode()
    assert f'<a href="{QUEUE}"><strong>2</strong>' in page
    assert _waiting(moderator_client) == "2 disputes waiting for review"


def test_it_says_when_the_queue_is_empty(moderator_client: Client, dispute: Dispute) -> None:
    set_status(dispute, "rejected")
    assert _waiting(moderator_client) == "0 disputes waiting for review: the queue is empty"


def test_one_dispute_is_singular(moderator_client: Client, dispute: Dispute) -> None:
    assert _waiting(moderator_client) == "1 dispute waiting for review"


def test_staff_who_may_not_see_the_queue_get_no_count(db: None, dispute: Dispute) -> None:
    client = Client()
    client.force_login(User.objects.create_user("visitor", is_staff=True))
    assert 'id="review-waiting"' not in client.get(reverse("admin:index")).content.decode()
