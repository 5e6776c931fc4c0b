"""The moderators' admin: read-only mirrored records, the review queue, and a review page per
dispute with notes and the prepared resolveDispute transaction.

The chain is the authority: nobody, superusers included, adds, changes or deletes a mirrored
record here. A moderator's decision takes effect when the arbiter's wallet sends the prepared
transaction and the indexer sees it.
"""

from __future__ import annotations

import json
from datetime import datetime
from typing import TYPE_CHECKING, Any

from django.conf import settings
from django.contrib import admin, messages
from django.contrib.auth.models import User
from django.core.exceptions import PermissionDenied
from django.db.models import QuerySet
from django.http import HttpRequest, HttpResponse, HttpResponseRedirect
from django.template.response import TemplateResponse
from django.urls import path, reverse
from django.utils import timezone
from django.utils.html import format_html, format_html_join
from django.utils.timesince import timesince
from django_otp.admin import OTPAdminSite

from records.models import (
    Bounty,
    Dispute,
    DisputeReviewQueue,
    Submission,
)
from records.moderation import NoteForm, add_note, dispute_review, may_add_notes
from records.representation import checksum_address, rfc3339
from records.selectors import (
    bounty_admin_list,
    dispute_admin_list,
    dispute_get_by_pk,
    dispute_overview,
    record_search,
    review_queue_list,
    submission_admin_list,
)
from records.templatetags.records_format import usdc

if TYPE_CHECKING:
    from records.selectors import QueueRow

admin.site.site_header = "Bounty moderation"
admin.site.site_title = "Bounty moderation"
admin.site.index_title = "Mirrored records and the dispute review queue"
admin.site.index_template = "admin/records/index.html"  # says how many disputes wait for review
# The lists need the width (a moderator's laptop is 1280 px wide or less); the breadcrumbs and
# the front page lead everywhere the sidebar did.
admin.site.enable_nav_sidebar = False
if settings.BOUNTY_ADMIN_TOTP:
    # django-otp's documented switch of the default site: the login form asks for the code of the
    # moderator's authenticator (manage.py add_totp_device), and a session not verified by one is
    # not staff. The instance keeps its name, so every `admin:` URL stays as it is.
    admin.site.__class__ = OTPAdminSite


def _link(url_name: str, args: list[Any], text: str, query: str = "") -> str:
    return format_html('<a href="{}{}">{}</a>', reverse(url_name, args=args), query, text)


def _short_address(address: str) -> str:
    """`0x90F7…b906`, with the whole EIP-55 address on hover: a list has no room for 42 characters."""
    full = checksum_address(address)
    return format_html('<span class="address" title="{}">{}…{}</span>', full, full[:6], full[-4:])


def _short_usdc(amount: int) -> str:
    """`5 USDC` or `1,234.5 USDC`, with the exact amount and base units on hover."""
    whole, fraction = divmod(int(amount), 10**6)
    decimals = f".{fraction:06d}".rstrip("0") if fraction else ""
    return format_html('<span class="amount" title="{}">{}{} USDC</span>', usdc(amount), f"{whole:,}", decimals)


def _moment(moment: datetime) -> str:
    """`2026-11-23 14:58` (UTC), which wraps between date and time; the seconds on hover."""
    return format_html('<time datetime="{}" title="{}">{}</time>', rfc3339(moment),
                       moment.strftime("%Y-%m-%d %H:%M:%S UTC"), moment.strftime("%Y-%m-%d %H:%M"))


class MirroredAdmin(admin.ModelAdmin):  # type: ignore[type-arg]
    """View only: the records mirror the chain."""

    list_per_page = 50
    show_full_result_count = False  # no COUNT(*) over a million rows per page view
    list_select_related = ()  # each admin's get_queryset is a selector that joins what its rows show
    search_help_text = "IDs, addresses, hashes, status or metadata text (case-insensitive substring)"
    search_fields = ["search_text"]  # the search itself is get_search_results below

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def get_search_results(self, request: HttpRequest, queryset: QuerySet[Any],
                           search_term_raw: str) -> tuple[QuerySet[Any], bool]:
        return record_search(queryset, search_term_raw), False

    def get_fields(self, request: HttpRequest, obj: Any = None) -> list[str]:  # type: ignore[override]
        return [f.name for f in self.model._meta.concrete_fields if f.name not in {"id", "search_text"}] + list(
            self.extra_readonly
        )

    extra_readonly: tuple[str, ...] = ()

    def get_readonly_fields(self, request: HttpRequest, obj: Any = None) -> list[str]:
        return self.get_fields(request, obj)

    # Columns under one-word headings in compact forms, so that the lists fit a laptop's width.

    @admin.display(description="created", ordering="created_at")
    def created(self, record: Bounty | Submission | Dispute) -> str:
        return _moment(record.created_at)

    @admin.display(description="deployment", ordering="deployment")
    def deployment_short(self, record: Bounty | Submission | Dispute) -> str:
        return format_html("{}:{}", record.deployment.chain_id, _short_address(record.deployment.contract_address))


class DisputeColumns:
    """The columns the disputes list and the review queue share."""

    @admin.display(description="review")
    def review_link(self, dispute: Dispute) -> str:
        return _link("admin:records_dispute_review", [dispute.pk], "review")

    @admin.display(description="dispute", ordering="dispute_id")
    def dispute(self, dispute: Dispute) -> int:
        return dispute.dispute_id

    @admin.display(description="bounty", ordering="bounty_id")
    def bounty(self, dispute: Dispute) -> int:
        return dispute.bounty_id

    @admin.display(description="submission", ordering="submission_id")
    def submission(self, dispute: Dispute) -> int:
        return dispute.submission_id

    @admin.display(description="challenger", ordering="challenger_id")
    def challenger(self, dispute: Dispute) -> str:
        return _short_address(dispute.challenger_id)


@admin.register(Bounty)
class BountyAdmin(MirroredAdmin):
    list_display = ["bounty", "status", "reward", "poster_address", "submissions", "ends", "created",
                    "deployment_short"]
    list_filter = ["status", "deployment", "created_at", "deadline"]
    ordering = ["-created_at", "-bounty_id"]
    extra_readonly = ("related",)

    def get_queryset(self, request: HttpRequest) -> QuerySet[Bounty]:
        return bounty_admin_list()

    @admin.display(description="bounty", ordering="bounty_id")
    def bounty(self, bounty: Bounty) -> int:
        return bounty.bounty_id

    @admin.display(description="submissions", ordering="submission_count")
    def submissions(self, bounty: Bounty) -> int:
        return bounty.submission_count

    @admin.display(description="deadline", ordering="deadline")
    def ends(self, bounty: Bounty) -> str:
        return _moment(bounty.deadline)

    @admin.display(description="reward", ordering="bounty_amount")
    def reward(self, bounty: Bounty) -> str:
        return _short_usdc(bounty.bounty_amount)

    @admin.display(description="poster", ordering="poster")
    def poster_address(self, bounty: Bounty) -> str:
        return _short_address(bounty.poster)

    @admin.display(description="related records")
    def related(self, bounty: Bounty) -> str:
        where = f"?deployment__id__exact={bounty.deployment_id}&bounty_id={bounty.bounty_id}"
        return format_html(
            "{} · {}",
            _link("admin:records_submission_changelist", [], f"{bounty.submission_count} submissions", where),
            _link("admin:records_dispute_changelist", [], "disputes", where),
        )


@admin.register(Submission)
class SubmissionAdmin(MirroredAdmin):
    list_display = ["submission", "status", "bounty_link", "claimant_address", "bond", "disputes", "review_ends",
                    "created"]
    list_filter = ["status", "deployment", "created_at", "review_deadline"]
    ordering = ["-created_at", "-submission_id"]
    extra_readonly = ("related",)

    def get_queryset(self, request: HttpRequest) -> QuerySet[Submission]:
        return submission_admin_list()

    @admin.display(description="submission", ordering="submission_id")
    def submission(self, submission: Submission) -> int:
        return submission.submission_id

    @admin.display(description="disputes", ordering="dispute_count")
    def disputes(self, submission: Submission) -> int:
        return submission.dispute_count

    @admin.display(description="review deadline", ordering="review_deadline")
    def review_ends(self, submission: Submission) -> str:
        return _moment(submission.review_deadline)

    @admin.display(description="bounty", ordering="bounty_id")
    def bounty_link(self, submission: Submission) -> str:
        try:
            bounty = submission.bounty
        except Bounty.DoesNotExist:
            return f"#{submission.bounty_id} (not mirrored)"
        return _link("admin:records_bounty_change", [bounty.pk], f"bounty {bounty.bounty_id}")

    @admin.display(description="claimant", ordering="claimant")
    def claimant_address(self, submission: Submission) -> str:
        return _short_address(submission.claimant)

    @admin.display(description="bond", ordering="bond_amount")
    def bond(self, submission: Submission) -> str:
        return _short_usdc(submission.bond_amount)

    @admin.display(description="related records")
    def related(self, submission: Submission) -> str:
        where = f"?deployment__id__exact={submission.deployment_id}&submission_id={submission.submission_id}"
        return format_html(
            "{} · {}",
            self.bounty_link(submission),
            _link("admin:records_dispute_changelist", [], f"{submission.dispute_count} disputes", where),
        )


@admin.register(Dispute)
class DisputeAdmin(DisputeColumns, MirroredAdmin):
    list_display = ["review_link", "dispute", "status", "bounty", "submission", "challenger", "bond", "created"]
    list_display_links = ["dispute"]
    list_filter = ["status", "deployment", "created_at"]
    ordering = ["-created_at", "-dispute_id"]
    extra_readonly = ("related",)

    def get_queryset(self, request: HttpRequest) -> QuerySet[Dispute]:
        return dispute_admin_list()

    @admin.display(description="bond", ordering="bond_amount")
    def bond(self, dispute: Dispute) -> str:
        return _short_usdc(dispute.bond_amount)

    @admin.display(description="related records")
    def related(self, dispute: Dispute) -> str:
        overview = dispute_overview(dispute.deployment, dispute.dispute_id)
        siblings = overview.disputes if overview is not None else []
        return format_html(
            "{} · {}<br>sibling disputes: {}",
            self.review_link(dispute),
            _link("admin:records_submission_changelist", [],
                  f"submission {dispute.submission_id}",
                  f"?deployment__id__exact={dispute.deployment_id}&submission_id={dispute.submission_id}"),
            format_html_join(", ", "{}", ((_link("admin:records_dispute_change", [s.pk], f"#{s.dispute_id}"),)
                                          for s in siblings)) or "none",
        )

    def get_urls(self) -> list[Any]:
        review = path("<int:pk>/review/", self.admin_site.admin_view(self.review_view), name="records_dispute_review")
        return [review, *super().get_urls()]

    def review_view(self, request: HttpRequest, pk: int) -> HttpResponse:
        if not request.user.has_perm("records.view_dispute"):
            raise PermissionDenied
        dispute = dispute_get_by_pk(pk)
        if dispute is None:
            return self._dispute_gone(request, pk)
        if not isinstance(request.user, User):
            raise PermissionDenied
        form = NoteForm(request.POST or None)
        if request.method == "POST" and add_note(dispute, request.user, form) is not None:
            messages.success(request, "Note added.")
            return HttpResponseRedirect(request.path)
        review = dispute_review(dispute)
        if review is None:
            return self._dispute_gone(request, pk)
        context = {
            **self.admin_site.each_context(request),
            "opts": self.model._meta,
            "title": f"Review dispute {dispute.dispute_id}",
            "review": review,
            "form": form,
            "can_add_note": may_add_notes(request.user),
            "transactions_json": {name: json.dumps(tx, indent=2) for name, tx in review.transactions.items()},
        }
        return TemplateResponse(request, "admin/records/dispute/review.html", context)

    def _dispute_gone(self, request: HttpRequest, pk: int) -> HttpResponse:
        messages.error(request, f"No dispute with key {pk}: it may have been removed by a chain reorganisation.")
        return HttpResponseRedirect(reverse("admin:records_disputereviewqueue_changelist"))


@admin.register(DisputeReviewQueue)
class DisputeReviewQueueAdmin(DisputeColumns, MirroredAdmin):
    """The disputes waiting for a moderator, oldest first; each row opens its review page (the
    first column, so that it is in view however narrow the window)."""

    list_display = ["review_link", "dispute", "pending_for", "bounty", "submission", "challenger", "notes"]
    list_display_links = None
    list_filter = ["deployment"]
    ordering = ["created_at", "dispute_id"]

    def get_queryset(self, request: HttpRequest) -> QuerySet[QueueRow]:
        return review_queue_list()

    @admin.display(description="pending for", ordering="created_at")
    def pending_for(self, dispute: Dispute) -> str:
        return timesince(dispute.created_at, timezone.now())

    @admin.display(description="notes")
    def notes(self, dispute: QueueRow) -> int:
        return dispute.note_count

    def change_view(self, request: HttpRequest, object_id: str, form_url: str = "",
                    extra_context: dict[str, Any] | None = None) -> HttpResponse:
        return HttpResponseRedirect(reverse("admin:records_dispute_review", args=[object_id]))
