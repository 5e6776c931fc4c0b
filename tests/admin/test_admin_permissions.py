"""Who may see what in the admin: moderators view and take notes; nobody edits the mirror."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import Group, User
from django.core.management import call_command
from django.test import Client
from django.urls import reverse

from records.models import Bounty, Dispute, ModeratorNote, Submission
from records.moderation import ensure_moderators_group
from tests.admin.conftest import PASSWORD

MIRRORED = ["bounty", "submission", "dispute", "disputereviewqueue"]


EXPECTED = ["add_moderatornote", "view_bounty", "view_dispute", "view_disputereviewqueue", "view_moderatornote",
            "view_submission"]


@pytest.mark.django_db(transaction=True)
def test_the_migration_creates_the_moderators_group_with_exactly_what_it_needs() -> None:
    call_command("migrate", "records", "0003_moderation", verbosity=0)
    assert not Group.objects.filter(name="Moderators").exists()
    call_command("migrate", verbosity=0)  # every app: going back also unapplied migrations that depend on records'
    codenames = sorted(Group.objects.get(name="Moderators").permissions.values_list("codename", flat=True))
    assert codenames == EXPECTED


def test_the_group_can_be_restored_with_the_same_permissions(db: None) -> None:
    Group.objects.filter(name="Moderators").delete()
    assert sorted(ensure_moderators_group().permissions.values_list("codename", flat=True)) == EXPECTED


@pytest.mark.parametrize("url_name", ["admin:index", "admin:records_disputereviewqueue_changelist"])
def test_anonymous_users_are_sent_to_the_login_page(client: Client, db: None, url_name: str) -> None:
    response = client.get(reverse(url_name))
    assert response.status_code == 302
    assert response["Location"].startswith(reverse("admin:login"))


def test_anonymous_users_cannot_open_a_review_page(client: Client, dispute: Dispute) -> None:
    response = client.get(reverse("admin:records_dispute_review", args=[dispute.pk]))
    assert response.status_code == 302
    assert response["Location"].startswith(reverse("admin:login"))


def test_non_staff_users_cannot_log_in(client: Client, db: None) -> None:
    User.objects.create_user("visitor", password=PASSWORD)
    response = client.post(reverse("admin:login"), {"username": "visitor", "password": PASSWORD})
    assert response.status_code == 200
    assert "_auth_user_id" not in client.session


def test_staff_outside_the_group_see_nothing(client: Client, dispute: Dispute) -> None:
    client.force_login(User.objects.create_user("intern", password=PASSWORD, is_staff=True))
    assert b"have permission to view or edit anything" in client.get(reverse("admin:index")).content
    assert client.get(reverse("admin:records_dispute_review", args=[dispute.pk])).status_code == 403
    assert client.get(reverse("admin:records_bounty_changelist")).status_code == 403


@pytest.mark.parametrize("model", MIRRORED)
def test_moderators_can_list_the_mirrored_records(moderator_client: Client, dispute: Dispute, model: str) -> None:
    assert moderator_client.get(reverse(f"admin:records_{model}_changelist")).status_code == 200


@pytest.mark.parametrize("user_kind", ["moderator", "superuser"])
@pytest.mark.parametrize("model", ["bounty", "submission", "dispute"])
def test_nobody_adds_changes_or_deletes_mirrored_records(client: Client, dispute: Dispute, moderator: User,
                                                         user_kind: str, model: str) -> None:
    user = moderator if user_kind == "moderator" else User.objects.create_superuser("root", password=PASSWORD)
    client.force_login(user)
    records: dict[str, Bounty | Submission | Dispute] = {
        "bounty": Bounty.objects.get(), "submission": Submission.objects.get(), "dispute": dispute,
    }
    record = records[model]
    change_url = reverse(f"admin:records_{model}_change", args=[record.pk])
    page = client.get(change_url)
    assert page.status_code == 200
    assert b'name="_save"' not in page.content
    assert client.get(reverse(f"admin:records_{model}_add")).status_code == 403
    assert client.post(change_url, {"status": "rejected"}).status_code == 403
    assert client.post(reverse(f"admin:records_{model}_delete", args=[record.pk]), {"post": "yes"}).status_code == 403
    assert type(record)._default_manager.filter(pk=record.pk, status=record.status).exists()


def test_notes_keep_their_author_whatever_the_form_says(moderator_client: Client, moderator: User,
                                                        dispute: Dispute) -> None:
    other = User.objects.create_user("someone-else")
    url = reverse("admin:records_dispute_review", args=[dispute.pk])
    response = moderator_client.post(url, {"recommendation": "uphold", "text": "Clearly copied.",
                                           "author": other.pk})
    assert response.status_code == 302
    note = ModeratorNote.objects.get()
    assert (note.author, note.recommendation, note.text, note.dispute_id) == (
        moderator, "uphold", "Clearly copied.", dispute.dispute_id)
    assert b"Clearly copied." in moderator_client.get(url).content


def test_notes_are_visible_to_every_moderator(moderator_client: Client, dispute: Dispute, client: Client) -> None:
    url = reverse("admin:records_dispute_review", args=[dispute.pk])
    moderator_client.post(url, {"recommendation": "reject", "text": "Looks original to me."})
    colleague = User.objects.create_user("mod2", is_staff=True)
    colleague.groups.add(ensure_moderators_group())
    client.force_login(colleague)
    page = client.get(url).content.decode()
    assert "Looks original to me." in page
    assert "mod," in page


def test_staff_without_the_note_permission_cannot_add_notes(client: Client, dispute: Dispute) -> None:
    viewer = User.objects.create_user("viewer", is_staff=True)
    viewer.user_permissions.add(*ensure_moderators_group().permissions.exclude(codename="add_moderatornote"))
    client.force_login(viewer)
    url = reverse("admin:records_dispute_review", args=[dispute.pk])
    assert b'id="note-form"' not in client.get(url).content
    assert client.post(url, {"recommendation": "uphold", "text": "x"}).status_code == 403
    assert not ModeratorNote.objects.exists()
