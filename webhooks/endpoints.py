"""What staff do to an endpoint (webhooks.admin): register it at the newest position, rotate its
secret, send it a test event, retry it now, replay it from a position, re-enable it."""

from __future__ import annotations

import time
from datetime import timedelta

import orjson
from asgiref.sync import async_to_sync
from django.conf import settings
from django.db import transaction
from django.utils import timezone

from records.history import Position
from records.selectors import active_deployment_id, changes_after, head_position
from webhooks.delivery import Outcome, Request, Sender
from webhooks.models import ATTEMPTS_KEPT, DeliveryAttempt, Endpoint
from webhooks.signing import new_secret

TEST_TYPE = "webhook.test"
# A change staff make takes the endpoint back from the worker that holds it: that worker drops it
# at its next look at its leases (webhooks.worker.CHECK_SECONDS) and no worker takes it for this long.
TAKE_BACK_SECONDS = 2


def _taken_back() -> dict[str, object]:
    return {"lease_owner": "", "lease_until": timezone.now() + timedelta(seconds=TAKE_BACK_SECONDS)}


def start(endpoint: Endpoint) -> None:
    """A new endpoint: a secret of its own, and the newest position (it is sent what changes after
    it was registered)."""
    endpoint.secret = new_secret()
    deployment_id = active_deployment_id()
    if deployment_id is not None:
        head = head_position(deployment_id)
        endpoint.deployment_id, endpoint.position_seq, endpoint.position_digest = deployment_id, head.seq, head.digest


def rotate_secret(endpoint: Endpoint) -> str:
    """A new secret; the old one signs beside it for BOUNTY_WEBHOOKS_SECRET_OVERLAP_HOURS. The new
    secret is returned to be shown once."""
    overlap = timedelta(hours=settings.BOUNTY_WEBHOOKS_SECRET_OVERLAP_HOURS)
    secret = new_secret()
    Endpoint.objects.filter(pk=endpoint.pk).update(
        previous_secret=endpoint.secret if overlap else "", previous_secret_until=timezone.now() + overlap,
        secret=secret)
    return secret


def retry_now(endpoints: list[Endpoint]) -> int:
    """Their pending retries are due now."""
    return Endpoint.objects.filter(pk__in=[e.pk for e in endpoints], enabled=True).update(next_attempt_at=None)


def enable(endpoint: Endpoint) -> None:
    """Re-enabled: it goes on from its position (or gets `resync` if that was pruned meanwhile)."""
    Endpoint.objects.filter(pk=endpoint.pk).update(enabled=True, disabled_reason="", failing_since=None, failures=0,
                                                   next_attempt_at=None, **_taken_back())


class NotHeld(ValueError):
    pass


def replay_from(endpoint: Endpoint, text: str) -> Position:
    """Sends the endpoint again every change after `text` (a position the service handed out: a
    message's `position`). NotHeld when this history does not hold it."""
    position = Position.parse(text.strip())
    deployment_id = active_deployment_id()
    if position is None or deployment_id is None:
        raise NotHeld(f"{text!r} is not a position the service hands out (seq.digest, as in a message's `position`)")
    if changes_after(deployment_id, position, position.seq + 1, 0) is None:
        raise NotHeld(f"the change log does not hold position {position.seq} of this history (pruned, or "
                      "another history's)")
    with transaction.atomic():
        Endpoint.objects.filter(pk=endpoint.pk).update(
            deployment_id=deployment_id, position_seq=position.seq, position_digest=position.digest,
            next_attempt_at=None, failures=0, failing_since=None, **_taken_back())
    return position


def send_test(endpoint: Endpoint) -> Outcome:
    """A `webhook.test` event, signed as any delivery, sent now; its attempt is kept with the others."""
    now = timezone.now()
    webhook_id = f"msg_{endpoint.pk}_test_{time.time_ns()}"
    body = orjson.dumps({"type": TEST_TYPE, "payload": {"endpoint": endpoint.pk, "sent_at": now.isoformat()},
                         "seq": None, "position": None})
    secrets = [endpoint.secret]
    if endpoint.previous_secret and endpoint.previous_secret_until and endpoint.previous_secret_until > now:
        secrets.append(endpoint.previous_secret)

    async def send() -> Outcome:
        sender = Sender()
        try:
            return await sender.send(Request(endpoint.url, webhook_id, body, secrets))
        finally:
            await sender.close()

    outcome = async_to_sync(send)()
    with transaction.atomic():
        number = Endpoint.objects.select_for_update().values_list("attempts_made", flat=True).get(pk=endpoint.pk)
        Endpoint.objects.filter(pk=endpoint.pk).update(attempts_made=number + 1)
        DeliveryAttempt.objects.update_or_create(
            endpoint_id=endpoint.pk, slot=number % ATTEMPTS_KEPT,
            defaults={"number": number, "webhook_id": webhook_id, "type": TEST_TYPE, "seq": None, "at": now,
                      "status": outcome.status, "latency_ms": round(outcome.latency * 1000),
                      "outcome": outcome.outcome[:300], "response_head": outcome.response_head})
    return outcome
