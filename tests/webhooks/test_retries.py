"""Retries a receiver can live with: a receiver down for an hour is tried again and again with the
same `webhook-id` (the endpoint's clock moved, not waited: each retry's time brought forward),
then gets everything in order; an endpoint failing past BOUNTY_WEBHOOKS_DISABLE_AFTER_HOURS is
disabled, staff are told on the moderators' channel, and nothing is dropped meanwhile."""

from __future__ import annotations

import json
from datetime import timedelta
from functools import partial
from typing import Any

import pytest
from django.utils import timezone

from records.models import Deployment
from tests.history import append_changes, updates
from tests.webhooks.conftest import ReceiverProcess, register, wait_until
from webhooks import endpoints, schedule
from webhooks.models import DeliveryAttempt, Endpoint

pytestmark = pytest.mark.django_db(transaction=True)


def attempts(endpoint: Endpoint) -> list[DeliveryAttempt]:
    return list(DeliveryAttempt.objects.filter(endpoint=endpoint).order_by("number"))


def tried_at_least(endpoint: Endpoint, count: int) -> bool:
    return len(attempts(endpoint)) >= count


def time_passes(endpoint: Endpoint, hours: float = 0) -> None:
    """The endpoint's next retry is due now, and it has been failing `hours` longer."""
    row = Endpoint.objects.get(pk=endpoint.pk)
    Endpoint.objects.filter(pk=endpoint.pk).update(
        next_attempt_at=timezone.now() - timedelta(seconds=1),
        failing_since=(row.failing_since or timezone.now()) - timedelta(hours=hours))


def test_the_backoff_tries_thirty_to_forty_five_times_over_a_day_and_honours_retry_after_up_to_its_bound(
        settings: Any) -> None:
    settings.BOUNTY_WEBHOOKS_MAX_RETRY_AFTER_SECONDS = 600
    waits = [schedule.delay(n) for n in range(1, 101)]
    assert all(0.5 * schedule.FIRST_DELAY * 2 ** (n - 1) <= wait <= schedule.FIRST_DELAY * 2 ** (n - 1)
               for n, wait in enumerate(waits[:5], start=1))
    elapsed, tries = 0.0, 0
    while elapsed < 24 * 3600:
        elapsed += waits[tries]
        tries += 1
    assert 30 <= tries <= 45
    assert max(waits) <= schedule.MAX_DELAY
    assert schedule.delay(1, retry_after=120) == 120
    assert schedule.delay(1, retry_after=86_400) == 600  # the bound


def test_a_receiver_down_for_an_hour_is_tried_again_with_the_same_id_then_gets_everything_in_order(
        deployment: Deployment, receiver: ReceiverProcess, workers: Any) -> None:
    endpoint = register(receiver.url("down"))
    receiver.kill()
    workers()
    append_changes(deployment, updates(1, 2, 3))
    for tries in range(1, 6):  # an hour of retries, their waits skipped
        wait_until(partial(tried_at_least, endpoint, tries), what=f"attempt {tries}")
        time_passes(endpoint, hours=0.2)
    tried = attempts(endpoint)
    assert {attempt.webhook_id for attempt in tried} == {tried[0].webhook_id}
    assert all(attempt.status is None and attempt.outcome.startswith("could not connect") for attempt in tried)
    assert Endpoint.objects.get(pk=endpoint.pk).enabled
    receiver.start()
    time_passes(endpoint)
    bodies = wait_until(lambda: len(d := receiver.deliveries("down")) == 3 and d, what="everything delivered")
    assert [json.loads(d["body"])["payload"]["id"] for d in bodies] == [1, 2, 3]
    assert bodies[0]["headers"]["webhook-id"] == tried[0].webhook_id


def test_an_endpoint_failing_past_the_threshold_is_disabled_staff_are_told_and_reenabled_it_loses_nothing(
        deployment: Deployment, receiver: ReceiverProcess, workers: Any) -> None:
    endpoint = register(receiver.url("failing"))
    receiver.behave("failing", status=503)
    workers(BOUNTY_MODERATOR_NOTIFY_URLS=f"json://127.0.0.1:{receiver.port}/hook/moderators",
            BOUNTY_ADMIN_BASE_URL="https://bounties.example.org", BOUNTY_MODERATOR_NOTIFY_WINDOW_SECONDS="1")
    append_changes(deployment, updates(1))
    wait_until(lambda: attempts(endpoint), what="a first attempt")
    time_passes(endpoint, hours=23)
    wait_until(lambda: len(attempts(endpoint)) >= 2, what="a second attempt")
    assert Endpoint.objects.get(pk=endpoint.pk).enabled  # 23 h: still tried
    time_passes(endpoint, hours=2)
    row = wait_until(lambda: (r := Endpoint.objects.get(pk=endpoint.pk)) and not r.enabled and r,
                     what="the endpoint disabled")
    assert row.disabled_reason.startswith("failing for 25.0 h (BOUNTY_WEBHOOKS_DISABLE_AFTER_HOURS=24): answered 503")
    told = wait_until(lambda: receiver.deliveries("moderators"), what="staff told")
    message = json.loads(told[0]["body"])["message"]
    assert f"endpoint {endpoint.pk}" in message and "127.0.0.1" in message and "/hook/" not in message
    append_changes(deployment, updates(2))  # while disabled: kept, not sent
    receiver.behave("failing", status=200)
    endpoints.enable(row)
    bodies = wait_until(lambda: len(d := [x for x in receiver.deliveries("failing") if x["status"] == 200]) == 2
                        and d, what="both changes after re-enabling")
    assert [json.loads(d["body"])["payload"]["id"] for d in bodies] == [1, 2]
