"""Endpoints in the admin: staff with the endpoint permissions register one (its secret shown
once, never again), rotate its secret (both signatures sent meanwhile), send it a test event, and
replay it from a position; staff without them see nothing of it."""

from __future__ import annotations

import json
import re
from typing import Any

import pytest
from django.contrib.auth.models import Permission, User
from django.test import Client
from standardwebhooks.webhooks import Webhook

from records.models import Deployment
from records.selectors import head_position
from tests.history import append_changes, updates
from tests.webhooks.conftest import ReceiverProcess, wait_until
from webhooks.models import DeliveryAttempt, Endpoint

pytestmark = pytest.mark.django_db(transaction=True)

ENDPOINTS = "/admin/webhooks/endpoint/"


@pytest.fixture
def staff(settings: Any) -> Client:
    settings.BOUNTY_WEBHOOKS_ALLOW_PLAIN_HTTP = True
    settings.BOUNTY_WEBHOOKS_ALLOWED_NETWORKS = [__import__("ipaddress").ip_network("127.0.0.0/8")]
    user = User.objects.create_user("hooks", "hooks@example.com", "pw", is_staff=True)
    user.user_permissions.add(*Permission.objects.filter(content_type__app_label="webhooks",
                                                         codename__endswith="_endpoint"))
    client = Client()
    client.force_login(user)
    return client


def secrets_shown(page: str) -> list[str]:
    return re.findall(r'<code class="webhook-secret">(whsec_[A-Za-z0-9+/=]+)</code>', page)


def test_a_registered_endpoint_starts_at_the_newest_change_and_its_secret_is_shown_once(
        deployment: Deployment, staff: Client, receiver: ReceiverProcess) -> None:
    append_changes(deployment, updates(1, 2))
    answer = staff.post(ENDPOINTS + "add/", {"url": receiver.url("x"), "event_types": ["bounty.updated"],
                                             "enabled": "on"})
    assert answer.status_code == 200, answer.content.decode()[:2000]
    assert "no-store" in answer["Cache-Control"]
    [secret] = secrets_shown(answer.content.decode())
    endpoint = Endpoint.objects.get()
    assert endpoint.secret == secret
    assert (endpoint.position_seq, endpoint.position_digest) == (2, head_position(deployment.pk).digest)
    assert endpoint.event_types == ["bounty.updated"]
    for page in (ENDPOINTS, f"{ENDPOINTS}{endpoint.pk}/change/"):
        shown = staff.get(page)
        assert shown.status_code == 200
        assert secret not in shown.content.decode()


def test_staff_without_the_endpoint_permissions_see_no_endpoint(deployment: Deployment) -> None:
    user = User.objects.create_user("moderator", "m@example.com", "pw", is_staff=True)
    client = Client()
    client.force_login(user)
    assert client.get(ENDPOINTS).status_code == 403
    assert client.post(ENDPOINTS + "add/", {"url": "https://8.8.8.8/"}).status_code == 403


def test_a_rotated_secret_signs_beside_the_old_one_and_a_test_event_verifies_with_both(
        deployment: Deployment, staff: Client, receiver: ReceiverProcess) -> None:
    [old] = secrets_shown(staff.post(ENDPOINTS + "add/", {"url": receiver.url("r"), "enabled": "on"}).content.decode())
    endpoint = Endpoint.objects.get()
    rotated = staff.post(ENDPOINTS, {"action": "rotate_secret", "_selected_action": [endpoint.pk]})
    [new] = secrets_shown(rotated.content.decode())
    assert new != old
    staff.post(ENDPOINTS, {"action": "send_test_event", "_selected_action": [endpoint.pk]})
    [delivery] = receiver.deliveries("r")
    assert len(delivery["headers"]["webhook-signature"].split(" ")) == 2
    for secret in (old, new):
        message = Webhook(secret).verify(delivery["body"], delivery["headers"])
        assert message["type"] == "webhook.test" and message["payload"]["endpoint"] == endpoint.pk
    attempt = DeliveryAttempt.objects.get(endpoint=endpoint)
    assert (attempt.type, attempt.status, attempt.outcome, attempt.response_head) == ("webhook.test", 200,
                                                                                      "delivered", "ok")


def test_replay_from_a_position_sends_every_change_after_it_again(
        deployment: Deployment, staff: Client, receiver: ReceiverProcess, workers: Any) -> None:
    staff.post(ENDPOINTS + "add/", {"url": receiver.url("p"), "enabled": "on"})
    endpoint = Endpoint.objects.get()
    positions = [append_changes(deployment, updates(n)) for n in (1, 2, 3)]
    workers()
    wait_until(lambda: len(receiver.deliveries("p")) == 3, what="three deliveries")
    form = {"url": receiver.url("p"), "enabled": "on", "replay_from": str(positions[0])}
    assert staff.post(f"{ENDPOINTS}{endpoint.pk}/change/", form).status_code == 302
    bodies = wait_until(lambda: len(d := receiver.deliveries("p")) == 5 and d, what="the replay")
    assert [json.loads(d["body"])["payload"]["id"] for d in bodies] == [1, 2, 3, 2, 3]
    refused = staff.post(f"{ENDPOINTS}{endpoint.pk}/change/", {**form, "replay_from": "7.abc"}, follow=True)
    assert "Not replayed: &#x27;7.abc&#x27; is not a position the service hands out" in refused.content.decode()
