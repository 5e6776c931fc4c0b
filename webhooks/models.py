"""Webhook endpoints: where the service POSTs the change log's changes (docs/api.md, Webhooks), and
each one's progress through it.

An endpoint's progress is a position in the active deployment's change log (records.history):
the change after it is the next one it is sent. Workers (`manage.py run_webhooks`) share the
endpoints through a lease on the row (`lease_owner` until `lease_until`), taken with
`SELECT … FOR UPDATE SKIP LOCKED`, so one endpoint is delivered by one worker at a time.
"""

from __future__ import annotations

from django.db import models
from django.utils import timezone

from records.fields import AddressField
from records.models import Deployment

RESPONSE_HEAD_CHARS = 256  # of an answer's body, kept with its attempt
ATTEMPTS_KEPT = 20  # per endpoint, the newest (a ring of slots)


class Endpoint(models.Model):
    """A receiver of webhooks, registered by staff (webhooks.admin)."""

    url = models.URLField(max_length=2048, verbose_name="URL",
                          help_text="https:// (http:// only where BOUNTY_WEBHOOKS_ALLOW_PLAIN_HTTP allows it); "
                                    "a public address unless BOUNTY_WEBHOOKS_ALLOWED_NETWORKS names it")
    description = models.CharField(max_length=200, blank=True)
    event_types = models.JSONField(default=list, blank=True,
                                   help_text="the types it is sent (the websocket's); none chosen: every type. "
                                             "`resync` is sent whatever is chosen")
    bounty_id = models.PositiveBigIntegerField(null=True, blank=True, verbose_name="bounty ID",
                                               help_text="only changes of this bounty and its submissions and disputes")
    # The records' address fields are never null; this one may be (no filter), which the field's
    # type (a CharField[str, str] to the stubs) cannot say.
    actor = AddressField(null=True, blank=True,  # type: ignore[misc]
                         help_text="only records this address posted, claims or challenges")
    enabled = models.BooleanField(default=True)
    disabled_reason = models.CharField(max_length=300, blank=True, editable=False)
    # The signing secrets (`whsec_` and base64, as Standard Webhooks writes them); the previous one
    # signs too until `previous_secret_until`, after a rotation.
    secret = models.CharField(max_length=80, editable=False)
    previous_secret = models.CharField(max_length=80, blank=True, editable=False)
    previous_secret_until = models.DateTimeField(null=True, blank=True, editable=False)
    # The position after the last change it was sent (or skipped by its filters): the deployment
    # whose change log it is in, the seq and its digest (records.history.Position).
    deployment = models.ForeignKey(Deployment, on_delete=models.PROTECT, related_name="+", null=True,
                                   editable=False)
    position_seq = models.PositiveBigIntegerField(null=True, editable=False)
    position_digest = models.CharField(max_length=32, blank=True, editable=False)
    # Retrying: the next attempt's time, since when it fails, and how many attempts of the change failed.
    next_attempt_at = models.DateTimeField(null=True, blank=True, editable=False)
    failing_since = models.DateTimeField(null=True, blank=True, editable=False)
    failures = models.PositiveIntegerField(default=0, editable=False)
    delivered_at = models.DateTimeField(null=True, blank=True, editable=False,
                                        help_text="when it last answered 2xx")
    attempts_made = models.PositiveBigIntegerField(default=0, editable=False)
    lease_owner = models.CharField(max_length=100, blank=True, editable=False)
    lease_until = models.DateTimeField(null=True, blank=True, editable=False)
    created_at = models.DateTimeField(default=timezone.now, editable=False)

    class Meta:
        verbose_name = "webhook endpoint"
        indexes = [models.Index(fields=["enabled", "next_attempt_at"], name="webhook_endpoint_due_idx")]

    def __str__(self) -> str:
        return self.url


class DeliveryAttempt(models.Model):
    """One of an endpoint's newest ATTEMPTS_KEPT attempts (a ring: attempt n is kept in slot
    n mod ATTEMPTS_KEPT), as the admin shows them."""

    endpoint = models.ForeignKey(Endpoint, on_delete=models.CASCADE, related_name="attempts")
    slot = models.PositiveSmallIntegerField()
    number = models.PositiveBigIntegerField(help_text="the endpoint's attempts before it")
    webhook_id = models.CharField(max_length=120, verbose_name="webhook-id")
    type = models.CharField(max_length=24)
    seq = models.PositiveBigIntegerField(null=True)
    at = models.DateTimeField()
    status = models.PositiveSmallIntegerField(null=True, help_text="the HTTP status; none: no answer")
    latency_ms = models.PositiveIntegerField()
    outcome = models.CharField(max_length=300, help_text="delivered, or why not")
    response_head = models.CharField(max_length=RESPONSE_HEAD_CHARS, blank=True,
                                     help_text=f"the answer's first {RESPONSE_HEAD_CHARS} characters")

    class Meta:
        constraints = [models.UniqueConstraint(fields=["endpoint", "slot"], name="webhook_attempt_slot_unique")]

    def __str__(self) -> str:
        return f"{self.webhook_id}: {self.outcome}"


class NoticeKind(models.TextChoices):
    REVIEW = "review", "entered review"
    OVERDUE = "overdue", "waiting past BOUNTY_MODERATOR_REVIEW_OVERDUE_HOURS"
    ENDPOINT_DISABLED = "endpoint_disabled", "webhook endpoint disabled"


class ModeratorNotice(models.Model):
    """Something the moderators' channels are told (webhooks.moderation), and which channels took it.

    A dispute's notices are keyed by its on-chain identity (deployment, dispute ID), one of each
    kind, so that a re-index, which rewrites the dispute's row, tells nobody again. A worker
    claims the notices it sends (`claimed_by` until `claimed_until`), so that two workers never
    send the same one; a claim not settled (the worker died) lapses and the notice is sent again."""

    kind = models.CharField(max_length=20, choices=NoticeKind.choices)
    deployment = models.ForeignKey(Deployment, on_delete=models.PROTECT, related_name="+", null=True)
    dispute_id = models.PositiveBigIntegerField(null=True, verbose_name="dispute ID")
    endpoint_id = models.PositiveBigIntegerField(null=True, verbose_name="endpoint ID",
                                                 help_text="not a foreign key: the endpoint may be deleted since")
    text = models.CharField(max_length=400, blank=True, help_text="an endpoint's notice: what happened (no URL)")
    created_at = models.DateTimeField(default=timezone.now)
    # The channels that took it, each named by a digest of its URL (webhooks.moderation.Channel.key);
    # done once every configured channel took it, or once it no longer matters (the dispute left review).
    told = models.JSONField(default=list)
    done = models.BooleanField(default=False)
    claimed_by = models.CharField(max_length=100, blank=True)
    claimed_until = models.DateTimeField(null=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["deployment", "dispute_id", "kind"],
                                    condition=models.Q(dispute_id__isnull=False),
                                    name="moderator_notice_once_per_dispute"),
        ]
        indexes = [models.Index(fields=["created_at"], condition=models.Q(done=False),
                                name="moderator_notice_pending_idx")]

    def __str__(self) -> str:
        subject = f"dispute {self.dispute_id}" if self.dispute_id is not None else f"endpoint {self.endpoint_id}"
        return f"{subject}: {self.get_kind_display()}"


class WorkerBeat(models.Model):
    """A `run_webhooks` process seen lately: it writes its beat every few seconds while it runs
    and deletes it when it stops (GET /health lists those seen within the heartbeat)."""

    name = models.CharField(max_length=100, unique=True, help_text="host name and process ID")
    started_at = models.DateTimeField()
    last_seen = models.DateTimeField()

    def __str__(self) -> str:
        return self.name
