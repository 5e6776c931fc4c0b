"""What a moderator's review page shows for one dispute, and the one thing a moderator writes:
a note on it (`add_note`).

Metadata is parsed with the client library and checked against the record's metadata hash;
the resolution is prepared with the client library's transaction builder for the arbiter's
wallet. Nothing here writes to the chain or to the mirrored records.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from django import forms
from django.contrib.auth.models import Group, Permission, User
from django.core.exceptions import PermissionDenied

from bounty_client import TransactionBuilder
from bounty_client.deployment import Deployment as ClientDeployment
from bounty_client.metadata import metadata_hash, parse_metadata_uri
from records.models import (
    Bounty,
    Dispute,
    DisputeStatus,
    ModeratorNote,
    Recommendation,
    Submission,
    SubmissionStatus,
)
from records.selectors import dispute_overview, moderator_note_list

MODERATORS = "Moderators"
# What moderators may do: view the mirrored records and the queue, read and add notes.
MODERATOR_PERMISSIONS = (
    "add_moderatornote",
    "view_bounty",
    "view_dispute",
    "view_disputereviewqueue",
    "view_moderatornote",
    "view_submission",
)


def ensure_moderators_group() -> Group:
    """The Moderators group with exactly MODERATOR_PERMISSIONS (made by migration 0004; this
    restores it where it is missing, e.g. after a test database flush)."""
    group, _ = Group.objects.get_or_create(name=MODERATORS)
    group.permissions.set(
        Permission.objects.filter(content_type__app_label="records", codename__in=MODERATOR_PERMISSIONS)
    )
    return group


class NoteForm(forms.Form):
    recommendation = forms.ChoiceField(choices=Recommendation.choices, widget=forms.RadioSelect)
    text = forms.CharField(widget=forms.Textarea(attrs={"rows": 4, "cols": 80}), max_length=10_000)


def may_add_notes(moderator: User) -> bool:
    return moderator.has_perm("records.add_moderatornote")


def add_note(dispute: Dispute, moderator: User, form: NoteForm) -> ModeratorNote | None:
    """The moderator's note on the dispute, written from the review page's form when it is valid;
    None when it is not (the form's errors say why). PermissionDenied for a user who may not add
    notes, whatever the form holds."""
    if not may_add_notes(moderator):
        raise PermissionDenied
    if not form.is_valid():
        return None
    return ModeratorNote.objects.create(
        deployment=dispute.deployment, dispute_id=dispute.dispute_id, author=moderator,
        recommendation=form.cleaned_data["recommendation"], text=form.cleaned_data["text"],
    )


@dataclass(frozen=True)
class Metadata:
    """A record's metadata as a moderator sees it."""

    uri: str
    parsed: str | None  # pretty JSON when the URI is inline and parses
    hash_matches: bool | None  # None when there is nothing inline to hash

    @classmethod
    def of(cls, record: Bounty | Submission | Dispute) -> Metadata:
        value = parse_metadata_uri(record.metadata_uri)
        if value is None:
            return cls(uri=record.metadata_uri, parsed=None, hash_matches=None)
        # A JSON escape may hold a lone surrogate, which a page cannot encode in UTF-8: it is shown
        # escaped, as written.
        pretty = json.dumps(value, indent=2, ensure_ascii=False, sort_keys=True) \
            .encode("utf-8", "backslashreplace").decode("utf-8")
        return cls(uri=record.metadata_uri, parsed=pretty, hash_matches=metadata_hash(value) == record.metadata_hash)


@dataclass(frozen=True)
class DisputeReview:
    dispute: Dispute
    submission: Submission | None
    bounty: Bounty | None
    siblings: list[Dispute]
    metadata: dict[str, Metadata]
    pending: bool
    notes: list[ModeratorNote]
    transactions: dict[str, dict[str, Any]]
    resolvable: bool
    why_not: str


def dispute_review(dispute: Dispute) -> DisputeReview | None:
    """The review page of a dispute (looked up with its deployment); None if a chain
    reorganisation has just removed it."""
    deployment = dispute.deployment
    overview = dispute_overview(deployment, dispute.dispute_id)
    if overview is None:
        return None
    submission, bounty = overview.submission, overview.bounty
    metadata = {"dispute": Metadata.of(dispute)}
    if submission is not None:
        metadata["submission"] = Metadata.of(submission)
    if bounty is not None:
        metadata["bounty"] = Metadata.of(bounty)
    pending = dispute.status == DisputeStatus.PENDING_HUMAN_REVIEW
    builder = TransactionBuilder(ClientDeployment(
        chain_id=deployment.chain_id, contract_address=deployment.contract_address,
        usdc_address=deployment.usdc_address,
    ))
    transactions: dict[str, dict[str, Any]] = {}
    why_not = ""
    if not pending:
        why_not = f"This dispute is already {dispute.get_status_display()}."
    elif submission is not None and submission.status == SubmissionStatus.REJECTED:
        why_not = ("Its submission was already rejected through another dispute: the arbiter cannot resolve it, "
                   "but anyone can cancel it, which returns the challenger's bond.")
        transactions["cancel"] = dict(builder.cancel_resolved_dispute(dispute.dispute_id))
    elif submission is None or submission.status != SubmissionStatus.DISPUTED:
        why_not = "Its submission is not in the disputed state, so the arbiter cannot resolve it."
    else:
        transactions["uphold"] = dict(builder.resolve_dispute(dispute.dispute_id, True))
        transactions["reject"] = dict(builder.resolve_dispute(dispute.dispute_id, False))
    return DisputeReview(
        dispute=dispute,
        submission=submission,
        bounty=bounty,
        siblings=overview.disputes,
        metadata=metadata,
        pending=pending,
        notes=moderator_note_list(deployment, dispute.dispute_id),
        transactions=transactions,
        resolvable="uphold" in transactions,
        why_not=why_not,
    )
