"""What each admin page costs in queries, pinned: the same at 10 rows and at 50 (a full page), so
that a query per row never comes back unnoticed. Each count includes the request's own: the
session, the user and the user's permissions."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from django.contrib import admin
from django.contrib.auth.models import User
from django.contrib.contenttypes.models import ContentType
from django.test import Client
from django.urls import reverse

from records.models import Bounty, Dispute, DisputeReviewQueue, ModeratorNote, Recommendation, Submission
from tests.factories import make_bounty, make_dispute, make_submission, set_status

ROWS = [10, 50]  # 50: a full page of every list (MirroredAdmin.list_per_page)

# The request's own 4 (session, user, the user's and the group's permissions), the deployment
# filter's choices, the COUNT the paginator needs, the page; a submission's bounty is prefetched.
CHANGELISTS: dict[type[Any], int] = {Bounty: 7, Submission: 8, Dispute: 7, DisputeReviewQueue: 7}
# The 4, the content type, the record; a submission's bounty; a dispute's overview (itself, its
# siblings, its bounty and its submission) for its related records.
CHANGE_PAGES: dict[type[Any], int] = {Bounty: 6, Submission: 7, Dispute: 10}
# The 4, the dispute with its deployment, its overview (4) and its notes with their authors.
REVIEW_PAGE = 10


@pytest.fixture(autouse=True)
def _no_content_types_cached(db: None) -> None:
    """A change page looks up its model's content type once per process: counted on every test,
    whichever ran before."""
    ContentType.objects.clear_cache()


def _note(dispute: Dispute, author: User) -> ModeratorNote:
    return ModeratorNote.objects.create(deployment=dispute.deployment, dispute_id=dispute.dispute_id, author=author,
                                        recommendation=Recommendation.UPHOLD, text="Looks copied.")


def _records(rows: int, author: User) -> None:
    """`rows` records of each kind, each dispute pending review with a note: every column of
    every list has something to show on every row."""
    for _ in range(rows):
        submission = make_submission(make_bounty())
        set_status(submission, "disputed")
        _note(make_dispute(submission), author)


def test_every_records_admin_is_counted() -> None:
    registered = {model for model in admin.site._registry if model._meta.app_label == "records"}
    assert registered == set(CHANGELISTS)


@pytest.mark.parametrize("rows", ROWS)
@pytest.mark.parametrize("model", list(CHANGELISTS), ids=lambda model: model._meta.model_name)
def test_a_changelist_costs_the_same_queries_whatever_its_rows(
        moderator_client: Client, moderator: User, django_assert_num_queries: Callable[..., Any],
        model: type[Any], rows: int) -> None:
    _records(rows, moderator)
    with django_assert_num_queries(CHANGELISTS[model]):
        response = moderator_client.get(reverse(f"admin:records_{model._meta.model_name}_changelist"))
    assert len(response.context["cl"].result_list) == rows


@pytest.mark.parametrize("rows", ROWS)
@pytest.mark.parametrize("model", list(CHANGE_PAGES), ids=lambda model: model._meta.model_name)
def test_a_change_page_costs_the_same_queries_whatever_its_related_records(
        moderator_client: Client, django_assert_num_queries: Callable[..., Any], model: type[Any], rows: int) -> None:
    bounty = make_bounty()
    submission = make_submission(bounty)
    disputes = [make_dispute(submission) for _ in range(rows)]
    record = {Bounty: bounty, Submission: submission, Dispute: disputes[0]}[model]
    with django_assert_num_queries(CHANGE_PAGES[model]):
        response = moderator_client.get(reverse(f"admin:records_{model._meta.model_name}_change", args=[record.pk]))
    assert response.status_code == 200


@pytest.mark.parametrize("rows", ROWS)
def test_the_review_page_costs_the_same_queries_whatever_its_siblings_and_notes(
        moderator_client: Client, moderator: User, django_assert_num_queries: Callable[..., Any], rows: int) -> None:
    submission = make_submission(make_bounty())
    set_status(submission, "disputed")
    disputes = [make_dispute(submission) for _ in range(rows)]
    for _ in range(rows):
        _note(disputes[0], moderator)
    with django_assert_num_queries(REVIEW_PAGE):
        response = moderator_client.get(reverse("admin:records_dispute_review", args=[disputes[0].pk]))
    assert len(response.context["review"].siblings) == rows - 1
    assert len(response.context["review"].notes) == rows
