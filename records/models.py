"""The mirrored records: bounties, submissions and disputes of a deployment.

A deployment is one bounty contract on one chain. On-chain IDs restart per deployment, so
every record is keyed by (deployment, its on-chain ID), and the parent relations are composite
too: a submission's bounty is the bounty with the same deployment and `bounty_id`.

The chain is the authority: only the indexer writes these tables. `submission_count` and
`dispute_count` are kept by the indexer in the same transaction as the child rows, so that
lists can sort on them through an index instead of counting per request.
"""

from __future__ import annotations

from typing import ClassVar

from django.db import models
from django.db.models import Q
from django.utils import timezone

from records.fields import AddressField, Bytes32Field, OrderedTextField, UInt256Field
from records.kinds import BOUNTY, DISPUTE, SUBMISSION, RecordKind


class BountyStatus(models.TextChoices):
    OPEN = "open"
    RESOLVED = "resolved"
    REFUNDED = "refunded"


class SubmissionStatus(models.TextChoices):
    SUBMITTED = "submitted"
    DISPUTED = "disputed"
    ACCEPTED = "accepted"
    REJECTED = "rejected"
    REFUNDED = "refunded"


class DisputeStatus(models.TextChoices):
    PENDING_HUMAN_REVIEW = "pending_human_review"
    UPHELD = "upheld"
    REJECTED = "rejected"
    CANCELLED = "cancelled"


class Deployment(models.Model):
    """One bounty contract on one chain, with the token it settles in."""

    chain_id = models.PositiveBigIntegerField()
    contract_address = AddressField()
    usdc_address = AddressField()
    # Record totals, kept by the indexer in the same transaction as the records, so that a
    # list's `total` needs no COUNT over the table.
    bounty_total = models.PositiveBigIntegerField(default=0)
    submission_total = models.PositiveBigIntegerField(default=0)
    dispute_total = models.PositiveBigIntegerField(default=0)
    # Whether each kind's records are in chain order: created_at never decreases as the ID rises
    # (records.chronology). Kept by the indexer; deep pages sorted by created_at rely on it.
    bounty_in_chain_order = models.BooleanField(default=False, db_default=False)
    submission_in_chain_order = models.BooleanField(default=False, db_default=False)
    dispute_in_chain_order = models.BooleanField(default=False, db_default=False)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["chain_id", "contract_address"], name="deployment_unique"),
        ]

    def __str__(self) -> str:
        return f"{self.chain_id}:{self.contract_address}"


class ChainRecord(models.Model):
    """Fields every mirrored record has: its deployment, its metadata and its source log."""

    # No index of its own: every record table's unique (deployment, ID) constraint leads with it.
    deployment = models.ForeignKey(Deployment, on_delete=models.PROTECT, related_name="+", db_index=False)
    metadata_uri = OrderedTextField()
    metadata_hash = Bytes32Field()
    tx_hash = Bytes32Field()
    block_number = models.PositiveBigIntegerField()
    log_index = models.PositiveIntegerField()
    created_at = models.DateTimeField(default=timezone.now)
    search_text = models.TextField(default="", editable=False, help_text="what `q` matches (records.search)")
    body = models.TextField(default="", editable=False,
                            help_text="the record's JSON without its counter (records.representation.record_body)")

    class Meta:
        abstract = True


def _sort_indexes(kind: RecordKind) -> list[models.Index]:
    """An index per sort key of the kind (records.kinds), ending in the ID and deployment
    tie-breaks: pages come in index order, and a deep page skips its offset in an index-only scan
    of (key, ID, deployment)."""
    return [models.Index(fields=[key, kind.id_field, "deployment"], name=f"{kind.name}_{key}_idx"[:30])
            for key in kind.indexed_sort_fields]


class Bounty(ChainRecord):
    bounty_id = models.PositiveBigIntegerField(verbose_name="bounty ID")
    prompt = OrderedTextField()
    bounty_amount = UInt256Field()
    fee_amount = UInt256Field()
    bond_amount = UInt256Field()
    duration = UInt256Field(help_text="seconds (a uint64: beyond what a signed 64-bit column holds)")
    status = models.CharField(max_length=8, choices=BountyStatus.choices, default=BountyStatus.OPEN)
    poster = AddressField()
    deadline = models.DateTimeField()
    challenge_window = UInt256Field(help_text="seconds (the contract's uint64)")
    submission_count = models.PositiveIntegerField(default=0)

    class Meta:
        verbose_name_plural = "bounties"
        constraints = [
            models.UniqueConstraint(fields=["deployment", "bounty_id"], name="bounty_unique_per_deployment"),
            models.CheckConstraint(condition=Q(status__in=BountyStatus.values), name="bounty_status_valid"),
        ]
        indexes = [
            models.Index(fields=["bounty_id"], name="bounty_id_idx"),
            *_sort_indexes(BOUNTY),
        ]

    def __str__(self) -> str:
        return f"bounty {self.bounty_id} ({self.deployment_id})"


class Submission(ChainRecord):
    submission_id = models.PositiveBigIntegerField(verbose_name="submission ID")
    bounty_id = models.PositiveBigIntegerField(verbose_name="bounty ID")
    bounty = models.ForeignObject(
        Bounty,
        on_delete=models.CASCADE,
        from_fields=["deployment", "bounty_id"],
        to_fields=["deployment", "bounty_id"],
        related_name="submissions",
    )
    tile_id = AddressField(help_text="submitter address field")
    content = OrderedTextField()
    bond_amount = UInt256Field()
    review_deadline = models.DateTimeField()
    status = models.CharField(max_length=9, choices=SubmissionStatus.choices, default=SubmissionStatus.SUBMITTED)
    claimant = AddressField()
    dispute_count = models.PositiveIntegerField(default=0)

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["deployment", "submission_id"], name="submission_unique_per_deployment"
            ),
            models.CheckConstraint(condition=Q(status__in=SubmissionStatus.values), name="submission_status_valid"),
        ]
        indexes = [
            models.Index(fields=["submission_id"], name="submission_id_idx"),
            models.Index(fields=["deployment", "bounty_id", "submission_id"], name="submission_parent_idx"),
            *_sort_indexes(SUBMISSION),
        ]

    def __str__(self) -> str:
        return f"submission {self.submission_id} ({self.deployment_id})"


class Dispute(ChainRecord):
    dispute_id = models.PositiveBigIntegerField(verbose_name="dispute ID")
    bounty_id = models.PositiveBigIntegerField(verbose_name="bounty ID")
    submission_id = models.PositiveBigIntegerField(verbose_name="submission ID")
    bounty = models.ForeignObject(
        Bounty,
        on_delete=models.CASCADE,
        from_fields=["deployment", "bounty_id"],
        to_fields=["deployment", "bounty_id"],
        related_name="disputes",
    )
    submission = models.ForeignObject(
        Submission,
        on_delete=models.CASCADE,
        from_fields=["deployment", "submission_id"],
        to_fields=["deployment", "submission_id"],
        related_name="disputes",
    )
    challenger_id = AddressField(verbose_name="challenger", help_text="address of the challenger (a grout)")
    reason = OrderedTextField()
    bond_amount = UInt256Field()
    status = models.CharField(
        max_length=20, choices=DisputeStatus.choices, default=DisputeStatus.PENDING_HUMAN_REVIEW
    )

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["deployment", "dispute_id"], name="dispute_unique_per_deployment"),
            models.CheckConstraint(condition=Q(status__in=DisputeStatus.values), name="dispute_status_valid"),
        ]
        indexes = [
            models.Index(fields=["dispute_id"], name="dispute_id_idx"),
            models.Index(fields=["deployment", "bounty_id", "dispute_id"], name="dispute_bounty_idx"),
            models.Index(fields=["deployment", "submission_id", "dispute_id"], name="dispute_submission_idx"),
            *_sort_indexes(DISPUTE),
        ]

    def __str__(self) -> str:
        return f"dispute {self.dispute_id} ({self.deployment_id})"


class PendingReviewManager(models.Manager["DisputeReviewQueue"]):
    def get_queryset(self) -> models.QuerySet[DisputeReviewQueue]:
        return super().get_queryset().filter(status=DisputeStatus.PENDING_HUMAN_REVIEW)


class DisputeReviewQueue(Dispute):
    """Disputes pending human review, oldest first: the moderators' queue in the admin. Its
    manager holds only those, so the queue and the count on the admin's front page agree."""

    objects: ClassVar[PendingReviewManager] = PendingReviewManager()

    class Meta:
        proxy = True
        verbose_name = "dispute pending review"
        verbose_name_plural = "review queue: disputes pending review"


class Recommendation(models.TextChoices):
    UPHOLD = "uphold"
    REJECT = "reject"


class ModeratorNote(models.Model):
    """A moderator's recommendation on a dispute, kept by the service (not on chain).

    The decision itself takes effect only when the arbiter's wallet sends resolveDispute and
    the indexer sees it. Notes are attached to the dispute's on-chain identity, not to the row,
    so they survive a re-index of the deployment."""

    deployment = models.ForeignKey(Deployment, on_delete=models.PROTECT, related_name="+")
    dispute_id = models.PositiveBigIntegerField(verbose_name="dispute ID")
    recommendation = models.CharField(max_length=6, choices=Recommendation.choices)
    text = models.TextField()
    author = models.ForeignKey("auth.User", on_delete=models.PROTECT, related_name="moderator_notes")
    created_at = models.DateTimeField(default=timezone.now, editable=False)

    class Meta:
        ordering = ["created_at", "pk"]
        indexes = [models.Index(fields=["deployment", "dispute_id", "created_at"], name="note_dispute_idx")]
        constraints = [
            models.CheckConstraint(condition=Q(recommendation__in=Recommendation.values),
                                   name="note_recommendation_valid"),
        ]

    def __str__(self) -> str:
        return f"{self.recommendation} on dispute {self.dispute_id} by {self.author}"
