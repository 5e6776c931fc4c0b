"""Webhook deliveries on the wire: a worker process (`manage.py run_webhooks`) sends a receiver
process exactly what the websocket would send, in order, signed so that the Standard Webhooks
library verifies it, and keeps at it through failures, restarts and another history."""

from __future__ import annotations

import json
import signal
import time
from datetime import timedelta
from typing import Any

import pytest
from django.utils import timezone
from standardwebhooks.webhooks import Webhook

from indexer.changelog import prune_change_log
from records.changes import MessageType
from records.models import Deployment
from records.selectors import changes_between, head_position
from records.ws.feed import read_changes
from tests.history import append_changes, replace_history, updates
from tests.webhooks.conftest import ReceiverProcess, register, wait_until
from webhooks import endpoints
from webhooks.models import DeliveryAttempt, Endpoint

pytestmark = pytest.mark.django_db(transaction=True)


def verified(endpoint: Endpoint, delivery: dict[str, Any]) -> dict[str, Any]:
    """The delivery's envelope, once the Standard Webhooks library has verified its signature."""
    message: dict[str, Any] = Webhook(endpoint.secret).verify(delivery["body"], delivery["headers"])
    return message


def websocket_texts(deployment: Deployment, first: int, last: int) -> list[str]:
    """What the websocket sends for the changes first..last: its live messages' texts."""
    return [text.decode() for _, text, _ in read_changes(deployment.pk, first, last)]


def delivered_bodies(receiver: ReceiverProcess, name: str, count: int, timeout: float = 20) -> list[str]:
    found = wait_until(lambda: (d := receiver.deliveries(name)) and len(d) >= count and d, timeout,
                       f"{count} deliveries to {name}")
    return [delivery["body"] for delivery in found]


def test_an_endpoint_is_sent_every_change_after_its_registration_in_order_as_the_websocket_sends_it(
        deployment: Deployment, receiver: ReceiverProcess, workers: Any) -> None:
    append_changes(deployment, updates(1, 2))  # before the endpoint: not sent
    endpoint = register(receiver.url("a"))
    first = head_position(deployment.pk).seq + 1
    workers()
    last = append_changes(deployment, updates(3, 4, 5)).seq
    append_changes(deployment, updates(6, text="later"))
    deliveries = wait_until(lambda: len(d := receiver.deliveries("a")) >= 4 and d, what="4 deliveries")
    assert [d["body"] for d in deliveries] == websocket_texts(deployment, first, last + 1)
    messages = [verified(endpoint, delivery) for delivery in deliveries]
    assert [m["seq"] for m in messages] == list(range(first, last + 2))
    assert {d["headers"]["webhook-id"] for d in deliveries} == {
        f"msg_{endpoint.pk}_{m['seq']}_{m['position'].split('.')[1][:16]}" for m in messages}
    wait_until(lambda: Endpoint.objects.get(pk=endpoint.pk).position_seq == last + 1, what="the position written")
    time.sleep(0.3)
    assert len(receiver.deliveries("a")) == 4  # nothing twice


def test_a_failing_endpoint_is_sent_the_same_change_again_until_it_answers_and_delays_no_other(
        deployment: Deployment, receiver: ReceiverProcess, workers: Any) -> None:
    failing, healthy = register(receiver.url("failing")), register(receiver.url("healthy"))
    receiver.behave("failing", status=500, retry_after=1)
    workers()
    append_changes(deployment, updates(1, 2, 3))
    assert len(delivered_bodies(receiver, "healthy", 3)) == 3
    tries = wait_until(lambda: len(d := receiver.deliveries("failing")) >= 2 and d, what="a retry")
    assert len({d["headers"]["webhook-id"] for d in tries}) == 1  # the same change, the same id
    assert tries[1]["arrived"] - tries[0]["arrived"] >= 0.9  # Retry-After: 1 honoured
    receiver.behave("failing", status=200)
    bodies = wait_until(lambda: len(d := [x for x in receiver.deliveries("failing") if x["status"] == 200]) >= 3
                        and d, what="the failing endpoint's recovery")
    assert [json.loads(d["body"])["payload"]["id"] for d in bodies] == [1, 2, 3]
    attempts = DeliveryAttempt.objects.filter(endpoint=failing).order_by("number")
    wait_until(lambda: attempts.filter(outcome="delivered").count() == 3, what="the attempts written")
    assert attempts[0].status == 500 and attempts[0].outcome == "answered 500"
    assert [a.outcome for a in attempts][-3:] == ["delivered"] * 3
    assert not DeliveryAttempt.objects.filter(endpoint=healthy).exclude(outcome="delivered").exists()


def test_410_gone_disables_an_endpoint_and_reenabled_it_goes_on_from_its_position(
        deployment: Deployment, receiver: ReceiverProcess, workers: Any) -> None:
    endpoint = register(receiver.url("gone"))
    receiver.behave("gone", status=410)
    workers()
    append_changes(deployment, updates(1, 2))
    wait_until(lambda: not Endpoint.objects.get(pk=endpoint.pk).enabled, what="the endpoint disabled")
    assert Endpoint.objects.get(pk=endpoint.pk).disabled_reason == "the endpoint answered 410 Gone"
    append_changes(deployment, updates(3))
    time.sleep(0.5)
    assert len(receiver.deliveries("gone")) == 1  # nothing while disabled
    receiver.behave("gone", status=200)
    endpoints.enable(Endpoint.objects.get(pk=endpoint.pk))
    bodies = wait_until(lambda: len(d := [x for x in receiver.deliveries("gone") if x["status"] == 200]) >= 3
                        and d, what="delivery after re-enabling")
    assert [json.loads(d["body"])["payload"]["id"] for d in bodies] == [1, 2, 3]


def test_another_history_gets_resync_then_the_new_history(
        deployment: Deployment, receiver: ReceiverProcess, workers: Any) -> None:
    append_changes(deployment, updates(1, 2))  # seqs 1, 2: both histories hold them
    endpoint = register(receiver.url("h"))
    append_changes(deployment, updates(3, 4))  # the first history's seqs 3, 4: the endpoint is at 4 once sent
    workers()
    wait_until(lambda: Endpoint.objects.get(pk=endpoint.pk).position_seq == 4, what="the first history sent")
    replace_history(deployment, 2, updates(30, 40, 50))  # a restore: seqs 3.. are other changes
    new_head = head_position(deployment.pk)
    bodies = delivered_bodies(receiver, "h", 3)
    resync = json.loads(bodies[2])
    assert resync["type"] == MessageType.RESYNC
    assert resync["payload"] == {"reason": "history_changed", "position": str(new_head)}
    assert resync["position"] == str(new_head)
    append_changes(deployment, updates(60))
    after = json.loads(delivered_bodies(receiver, "h", 4)[3])
    assert after["payload"]["id"] == 60 and after["seq"] == new_head.seq + 1
    assert len(receiver.deliveries("h")) == 4  # no change of the new history before the resync's position


def test_a_worker_killed_mid_delivery_leaves_the_change_to_the_next_which_sends_it_again(
        deployment: Deployment, receiver: ReceiverProcess, workers: Any) -> None:
    endpoint = register(receiver.url("k"))
    receiver.behave("k", delay=1.5)
    first = workers()
    append_changes(deployment, updates(1, 2))
    wait_until(lambda: Endpoint.objects.get(pk=endpoint.pk).lease_owner, what="the endpoint leased")
    time.sleep(0.5)  # the first delivery is in flight
    first.process.send_signal(signal.SIGKILL)
    first.process.wait()
    receiver.behave("k", delay=0)
    workers()  # takes the endpoint once the killed worker's lease has ended
    bodies = delivered_bodies(receiver, "k", 3, timeout=30)
    ids = [json.loads(body)["payload"]["id"] for body in bodies]
    assert ids[-2:] == [1, 2] and set(ids) == {1, 2}  # the interrupted one again, then on in order
    webhook_ids = [d["headers"]["webhook-id"] for d in receiver.deliveries("k")]
    assert webhook_ids[0] == webhook_ids[1]  # the receiver can tell it is the same change


def test_sigterm_stops_a_worker_within_a_second_and_hands_its_endpoints_back(
        deployment: Deployment, receiver: ReceiverProcess, workers: Any) -> None:
    endpoint = register(receiver.url("t"))
    receiver.behave("t", delay=5)
    worker = workers()
    append_changes(deployment, updates(1))
    wait_until(lambda: receiver.received("t")["most_in_flight"] or None, what="a delivery in flight", timeout=20)
    started = time.monotonic()
    worker.process.send_signal(signal.SIGTERM)
    assert worker.process.wait(timeout=5) == 0
    assert time.monotonic() - started < 1.5
    row = Endpoint.objects.get(pk=endpoint.pk)
    assert row.lease_owner == "" and row.position_seq == 0  # handed back; the change is sent again
    assert "Traceback" not in worker.text()


def test_two_workers_share_the_endpoints_and_never_send_one_endpoint_two_changes_at_once(
        deployment: Deployment, receiver: ReceiverProcess, workers: Any) -> None:
    names = [f"e{n}" for n in range(12)]
    for name in names:
        register(receiver.url(name))
        receiver.behave(name, delay=0.02)
    workers(), workers()
    for n in range(5):
        append_changes(deployment, updates(n * 3 + 1, n * 3 + 2, n * 3 + 3))
    for name in names:
        bodies = delivered_bodies(receiver, name, 15, timeout=40)
        assert [json.loads(body)["payload"]["id"] for body in bodies] == list(range(1, 16))
        assert receiver.received(name)["most_in_flight"] == 1
    owners = set(DeliveryAttempt.objects.values_list("endpoint_id", flat=True))
    assert len(owners) == 12
    assert len(changes_between(deployment.pk, 1, 100, 100)) == 15


def test_an_endpoint_behind_a_pruned_change_log_gets_resync_then_what_follows(
        deployment: Deployment, receiver: ReceiverProcess, workers: Any) -> None:
    endpoint = register(receiver.url("weeks"))
    Endpoint.objects.filter(pk=endpoint.pk).update(enabled=False)  # down for weeks, disabled
    append_changes(deployment, updates(1, 2, 3))
    pruned = prune_change_log(timezone.now() + timedelta(seconds=1))  # everything but the newest goes
    assert pruned[0].deleted == 2
    workers()
    endpoints.enable(Endpoint.objects.get(pk=endpoint.pk))
    [resync] = [json.loads(body) for body in delivered_bodies(receiver, "weeks", 1)]
    head = head_position(deployment.pk)
    assert resync == {"type": "resync", "payload": {"reason": "pruned", "position": str(head)}, "seq": head.seq,
                      "position": str(head)}
    append_changes(deployment, updates(4))
    after = json.loads(delivered_bodies(receiver, "weeks", 2)[1])
    assert (after["seq"], after["payload"]["id"]) == (head.seq + 1, 4)
