"""records.moderation.add_note, the one writer of a moderator's note: the review page
(tests/admin/test_admin_permissions.py) posts its form through it."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import User
from django.core.exceptions import PermissionDenied

from records.models import Dispute, ModeratorNote
from records.moderation import NoteForm, add_note, ensure_moderators_group


def test_it_writes_a_valid_note_by_its_moderator(moderator: User, dispute: Dispute) -> None:
    note = add_note(dispute, moderator, NoteForm({"recommendation": "reject", "text": "Looks original."}))
    assert note is not None
    assert (note.deployment, note.dispute_id, note.author, note.recommendation, note.text) == (
        dispute.deployment, dispute.dispute_id, moderator, "reject", "Looks original.")
    assert list(ModeratorNote.objects.all()) == [note]


@pytest.mark.parametrize("data", [
    pytest.param({"recommendation": "uphold", "text": ""}, id="no-text"),
    pytest.param({"recommendation": "maybe", "text": "Not sure."}, id="no-such-recommendation"),
    pytest.param({"recommendation": "uphold", "text": "x" * 10_001}, id="too-long"),
])
def test_it_writes_nothing_for_an_invalid_form(moderator: User, dispute: Dispute, data: dict[str, str]) -> None:
    form = NoteForm(data)
    assert add_note(dispute, moderator, form) is None
    assert form.errors
    assert not ModeratorNote.objects.exists()


def test_it_refuses_a_user_who_may_not_add_notes(dispute: Dispute) -> None:
    viewer = User.objects.create_user("viewer", is_staff=True)
    viewer.user_permissions.add(*ensure_moderators_group().permissions.exclude(codename="add_moderatornote"))
    with pytest.raises(PermissionDenied):
        add_note(dispute, viewer, NoteForm({"recommendation": "uphold", "text": "x"}))
    assert not ModeratorNote.objects.exists()
