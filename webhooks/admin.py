"""Webhook endpoints in the admin, for staff with the endpoint model's permissions
(`webhooks.view_endpoint`, `add_`, `change_`, `delete_`): register one (its secret is shown once),
rotate its secret, send it a test event, retry it now, replay it from a position, re-enable it, and
see its newest attempts."""

from __future__ import annotations

from typing import Any
from urllib.parse import urlsplit

from django import forms
from django.contrib import admin, messages
from django.db.models import QuerySet
from django.http import HttpRequest, HttpResponse
from django.template.response import TemplateResponse

from records.changes import MessageType
from webhooks import endpoints
from webhooks.addresses import Refused, check_url
from webhooks.models import DeliveryAttempt, Endpoint


class EndpointForm(forms.ModelForm):  # type: ignore[type-arg]
    url = forms.URLField(max_length=2048, assume_scheme="https", label="URL",
                         help_text=Endpoint._meta.get_field("url").help_text)
    event_types = forms.MultipleChoiceField(
        choices=[(t.value, t.value) for t in MessageType if t != MessageType.RESYNC], required=False,
        widget=forms.CheckboxSelectMultiple,
        help_text="the types it is sent; none chosen: every type. `resync` is always sent")
    replay_from = forms.CharField(
        required=False, max_length=60,
        help_text="a position (a message's `position`, seq.digest): every change after it is sent again")

    class Meta:
        model = Endpoint
        fields = ["url", "description", "event_types", "bounty_id", "actor", "enabled"]

    def clean_url(self) -> str:
        url: str = self.cleaned_data["url"]
        try:
            check_url(url)
        except Refused as refused:
            raise forms.ValidationError(str(refused)) from None
        return url


class AttemptInline(admin.TabularInline):  # type: ignore[type-arg]
    model = DeliveryAttempt
    fields = readonly_fields = ("at", "webhook_id", "type", "seq", "status", "latency_ms", "outcome",
                                "response_head")
    ordering = ["-number"]
    extra = 0
    can_delete = False
    verbose_name_plural = "newest attempts"

    def has_add_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False


@admin.register(Endpoint)
class EndpointAdmin(admin.ModelAdmin):  # type: ignore[type-arg]
    form = EndpointForm
    list_display = ["url_host", "description", "enabled", "position", "delivered_at", "failing", "disabled_reason"]
    list_filter = ["enabled"]
    search_fields = ["url", "description"]
    readonly_fields = ["position", "delivered_at", "failing", "next_attempt_at", "disabled_reason", "created_at"]
    inlines = [AttemptInline]
    actions = ["send_test_event", "retry_now", "rotate_secret", "enable"]

    @admin.display(description="host")
    def url_host(self, obj: Endpoint) -> str:
        return urlsplit(obj.url).hostname or obj.url

    @admin.display(description="position")
    def position(self, obj: Endpoint) -> str:
        return "—" if obj.position_seq is None else f"{obj.position_seq}.{obj.position_digest}"

    @admin.display(description="failing")
    def failing(self, obj: Endpoint) -> str:
        if obj.failing_since is None:
            return "—"
        return f"since {obj.failing_since:%Y-%m-%d %H:%M:%S} UTC, {obj.failures} attempts"

    def save_model(self, request: HttpRequest, obj: Endpoint, form: Any, change: bool) -> None:
        was_enabled = (Endpoint.objects.filter(pk=obj.pk).values_list("enabled", flat=True).first()
                       if change else None)
        if not change:
            endpoints.start(obj)
        super().save_model(request, obj, form, change)
        if change and obj.enabled and was_enabled is False:
            endpoints.enable(obj)
        replay = form.cleaned_data.get("replay_from")
        if replay:
            try:
                position = endpoints.replay_from(obj, replay)
            except endpoints.NotHeld as error:
                self.message_user(request, f"Not replayed: {error}", messages.ERROR)
            else:
                self.message_user(request, f"Every change after seq {position.seq} is sent again.")

    def response_add(self, request: HttpRequest, obj: Endpoint, post_url_continue: str | None = None) -> HttpResponse:
        """The new endpoint's secret, on this page only (no redirect, no message stored in a cookie)."""
        return self._secrets(request, [(obj, obj.secret)], "The endpoint is registered. Its signing secret:")

    def _secrets(self, request: HttpRequest, secrets: list[tuple[Endpoint, str]], explanation: str) -> HttpResponse:
        response = TemplateResponse(request, "admin/webhooks/endpoint/secret.html", {
            **self.admin_site.each_context(request), "secrets": secrets, "explanation": explanation,
            "title": "Signing secret"})
        response["Cache-Control"] = "no-store"  # the admin's never_cache adds to it
        return response

    @admin.action(description="Send a test event", permissions=["change"])
    def send_test_event(self, request: HttpRequest, queryset: QuerySet[Endpoint]) -> None:
        for endpoint in queryset[:10]:
            outcome = endpoints.send_test(endpoint)
            level = messages.SUCCESS if outcome.delivered else messages.ERROR
            self.message_user(request, f"{self.url_host(endpoint)}: {outcome.outcome} "
                                       f"({outcome.status or 'no answer'}, {outcome.latency * 1000:.0f} ms)", level)

    @admin.action(description="Retry now", permissions=["change"])
    def retry_now(self, request: HttpRequest, queryset: QuerySet[Endpoint]) -> None:
        count = endpoints.retry_now(list(queryset))
        self.message_user(request, f"{count} endpoint(s) are tried again now.")

    @admin.action(description="Rotate the signing secret", permissions=["change"])
    def rotate_secret(self, request: HttpRequest, queryset: QuerySet[Endpoint]) -> HttpResponse:
        secrets = [(endpoint, endpoints.rotate_secret(endpoint)) for endpoint in queryset]
        return self._secrets(request, secrets, "New signing secrets. Each old secret signs beside the new one "
                                               "until BOUNTY_WEBHOOKS_SECRET_OVERLAP_HOURS have passed:")

    @admin.action(description="Enable (go on from its position)", permissions=["change"])
    def enable(self, request: HttpRequest, queryset: QuerySet[Endpoint]) -> None:
        for endpoint in queryset:
            endpoints.enable(endpoint)
        self.message_user(request, f"{queryset.count()} endpoint(s) enabled.")
