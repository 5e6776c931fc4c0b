"""verify_webhook (bounty_client.webhooks) and the TypeScript client's verifyWebhook on deliveries
the service makes: POSTed by its own sender (webhooks.delivery) to a receiver on loopback, or
signed by its own signing (webhooks.signing) where a delivery must be old or changed. Both clients
must give the same event, or refuse with the same error and message. The Standard Webhooks library
itself, with nothing of the clients around it, checks the service's signatures too."""

from __future__ import annotations

import asyncio
import base64
import json
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from ipaddress import IPv4Network
from typing import Any, cast

import pytest
import standardwebhooks
from pytest_django.fixtures import Settings

from bounty_client import (
    BountyClientError,
    ResponseError,
    WebhookEvent,
    WebhookVerificationError,
    verify_webhook,
)
from records.changes import MessageType
from records.history import Position
from records.selectors import Change
from tests.client.conftest import bounty_record, exactly
from tests.client.typescript_build import exclusive_build
from tests.servers import PROJECT_DIR
from webhooks.delivery import USER_AGENT, Request, Sender
from webhooks.endpoints import send_test
from webhooks.models import Endpoint
from webhooks.signing import new_secret, signature_header
from webhooks.worker import Event

CLIENT = PROJECT_DIR / "clients" / "typescript"
DIGEST = "3f9a" * 8
NO_MATCH = "no signature matches: the body or its headers were changed, or the secret is not this endpoint's"
TOO_OLD = "webhook-timestamp is more than 5 minutes old: a replayed delivery, or this machine's clock is wrong"
TOO_NEW = "webhook-timestamp is more than 5 minutes ahead: this machine's clock is wrong"


@dataclass(frozen=True)
class Delivery:
    headers: dict[str, str]
    body: bytes

    def changed(self, *, body: bytes | None = None, **headers: str) -> Delivery:
        return Delivery({**self.headers, **{name.replace("_", "-"): value for name, value in headers.items()}},
                        self.body if body is None else body)


class Receiver:
    """An endpoint on loopback: it keeps every POST and answers 204."""

    def __init__(self) -> None:
        self.received: list[Delivery] = []
        received = self.received

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers["content-length"]))
                received.append(Delivery({name.lower(): value for name, value in self.headers.items()}, body))
                self.send_response(204)
                self.end_headers()

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/hooks"

    def deliver(self, event: Event, secrets: list[str], endpoint: int = 3) -> Delivery:
        """`event` as the worker sends it to endpoint `endpoint` with `secrets`, as received."""

        async def send() -> None:
            sender = Sender()
            try:
                outcome = await sender.send(Request(self.url, f"msg_{endpoint}_{event.id_part}", event.body, secrets))
            finally:
                await sender.close()
            assert outcome.delivered, outcome

        asyncio.run(send())
        return self.received[-1]


@pytest.fixture
def receiver(settings: Settings) -> Iterator[Receiver]:
    settings.BOUNTY_WEBHOOKS_ALLOWED_NETWORKS = [IPv4Network("127.0.0.0/8")]
    settings.OUTBOUND_PROXIES = {}
    receiver = Receiver()
    thread = threading.Thread(target=receiver.server.serve_forever, daemon=True)
    thread.start()
    yield receiver
    receiver.server.shutdown()
    receiver.server.server_close()


def change(type_: str, payload: Any, seq: int = 42) -> Event:
    return Event.of(Change(seq, type_, payload, DIGEST))


def signed(secrets: list[str], body: bytes, timestamp: int, webhook_id: str = "msg_3_42_3f9a3f9a3f9a3f9a") -> Delivery:
    """A delivery signed by the service's signing, at `timestamp`."""
    return Delivery({"webhook-id": webhook_id, "webhook-timestamp": str(timestamp),
                     "webhook-signature": signature_header(secrets, webhook_id, timestamp, body)}, body)


# ---------------------------------------------------------------------------- what both clients make of it


def python_outcome(secret: str, delivery: Delivery) -> dict[str, Any]:
    try:
        event = verify_webhook(secret, delivery.headers, delivery.body)
    except BountyClientError as error:
        return {"error": type(error).__name__, "message": str(error)}
    return {"event": {"type": event.type, "payload": event.payload, "seq": event.seq, "position": event.position,
                      "webhookId": event.webhook_id, "timestamp": event.timestamp.timestamp()}}


TYPESCRIPT = """
import { readFileSync } from "node:fs";
const { verifyWebhook } = await import(process.argv[1]);
const outcomes = JSON.parse(readFileSync(0, "utf8")).map(({ secret, headers, body }) => {
  try {
    const { timestamp, ...event } = verifyWebhook(secret, headers, Buffer.from(body, "base64"));
    return { event: { ...event, timestamp: timestamp.getTime() / 1000 } };
  } catch (error) {
    return { error: error.name, message: error.message };
  }
});
console.log(JSON.stringify(outcomes));
"""


TypeScriptVerify = Callable[[list[tuple[str, Delivery]]], list[dict[str, Any]]]


@pytest.fixture
def typescript_outcomes() -> Iterator[TypeScriptVerify]:
    """What the TypeScript client's `verifyWebhook`, built now, makes of each (secret, delivery)."""
    with exclusive_build():  # dist/ stays as built until the test ends
        built = subprocess.run(["npm", "run", "build", "--silent"], cwd=CLIENT, capture_output=True, text=True,
                               timeout=300, check=False)
        assert built.returncode == 0, built.stdout + built.stderr

        def verify(cases: list[tuple[str, Delivery]]) -> list[dict[str, Any]]:
            given = [{"secret": secret, "headers": delivery.headers, "body": base64.b64encode(delivery.body).decode()}
                     for secret, delivery in cases]
            ran = subprocess.run(["node", "--input-type=module", "-e", TYPESCRIPT,
                                  (CLIENT / "dist" / "webhooks.js").as_uri()],
                                 input=json.dumps(given), capture_output=True, text=True, timeout=60, check=False)
            assert ran.returncode == 0, ran.stderr
            outcomes: list[dict[str, Any]] = json.loads(ran.stdout)
            return outcomes

        yield verify


@pytest.mark.django_db
def test_both_clients_verify_what_the_service_sends_and_refuse_the_same_with_the_same_message(
        receiver: Receiver, typescript_outcomes: TypeScriptVerify) -> None:
    secret, previous, stranger = new_secret(), new_secret(), new_secret()
    created = receiver.deliver(change(MessageType.BOUNTY_CREATED, bounty_record(7)), [secret])
    rotated = receiver.deliver(change(MessageType.BOUNTY_UPDATED, bounty_record(7), seq=43), [secret, previous])
    backfill = receiver.deliver(change(MessageType.RESYNC, {"from_block": 5, "to_block": 900}, seq=44), [secret])
    pruned = receiver.deliver(Event.resync(Position(90, DIGEST), "pruned"), [secret])
    endpoint = Endpoint.objects.create(url=receiver.url, secret=secret)
    assert send_test(endpoint).delivered
    tested = receiver.received[-1]
    now = int(time.time())
    cases = [
        (secret, created), (secret, rotated), (previous, rotated), (secret, backfill), (secret, pruned),
        (secret, tested),
        (secret, created.changed(body=created.body.replace(b'"id":7', b'"id":8'))),  # tampered
        (stranger, created), (stranger, rotated),  # a wrong secret
        (secret, created.changed(webhook_id="msg_3_43_3f9a3f9a3f9a3f9a")),  # another delivery's ID
        (secret, signed([secret], created.body, now - 400)),  # old
        (secret, signed([secret], created.body, now + 400)),  # ahead
        (secret, signed([secret], created.body, now - 240)),  # old, within the tolerance
        (secret, Delivery({"webhook-timestamp": str(now)}, created.body)),
        (secret, signed([secret], b"[42]", now)),  # signed, but no envelope
    ]
    python = [python_outcome(verifying, delivery) for verifying, delivery in cases]
    assert typescript_outcomes(cases) == python

    record = {"type": "bounty.created", "payload": bounty_record(7), "seq": 42, "position": f"42.{DIGEST}",
              "webhookId": "msg_3_42_3f9a3f9a3f9a3f9a", "timestamp": float(created.headers["webhook-timestamp"])}
    assert python[0] == {"event": record}
    assert python[1]["event"]["type"] == python[2]["event"]["type"] == "bounty.updated"
    assert python[3]["event"]["payload"] == {"from_block": 5, "to_block": 900}
    assert python[4]["event"] | {"timestamp": None} == {
        "type": "resync", "payload": {"reason": "pruned", "position": f"90.{DIGEST}"}, "seq": 90,
        "position": f"90.{DIGEST}", "webhookId": f"msg_3_resync_90_{DIGEST[:16]}", "timestamp": None}
    test_event = python[5]["event"]
    assert (test_event["type"], test_event["seq"], test_event["position"]) == ("webhook.test", None, None)
    assert test_event["payload"]["endpoint"] == endpoint.pk
    assert test_event["webhookId"].startswith(f"msg_{endpoint.pk}_test_")
    refusal = {"error": "WebhookVerificationError"}
    assert python[6:10] == [refusal | {"message": NO_MATCH}] * 4
    assert python[10:12] == [refusal | {"message": TOO_OLD}, refusal | {"message": TOO_NEW}]
    assert "event" in python[12]
    assert python[13] == refusal | {"message": "missing header: webhook-id, webhook-signature"}
    assert python[14] == {"error": "ResponseError", "message": "webhook: the body is not a JSON object"}


def test_the_service_sends_the_documented_headers(receiver: Receiver) -> None:
    delivered = receiver.deliver(change(MessageType.BOUNTY_CREATED, bounty_record(7)), [new_secret(), new_secret()])
    assert delivered.headers["content-type"] == "application/json"
    assert delivered.headers["user-agent"] == USER_AGENT == "bounty-read-service-webhooks/1"
    assert delivered.headers["webhook-id"] == "msg_3_42_3f9a3f9a3f9a3f9a"
    assert abs(int(delivered.headers["webhook-timestamp"]) - time.time()) < 60
    assert [part.partition(",")[0] for part in delivered.headers["webhook-signature"].split(" ")] == ["v1", "v1"]
    assert json.loads(delivered.body) == {"type": "bounty.created", "payload": bounty_record(7), "seq": 42,
                                          "position": f"42.{DIGEST}"}


def test_the_standard_webhooks_library_alone_verifies_the_services_signatures(receiver: Receiver) -> None:
    secret, previous = new_secret(), new_secret()
    for secrets in ([secret], [secret, previous]):
        delivered = receiver.deliver(change(MessageType.DISPUTE_CREATED, {"id": 2}), secrets)
        for verifying in secrets:
            parsed = standardwebhooks.Webhook(verifying).verify(delivered.body, delivered.headers)
            assert parsed == json.loads(delivered.body)
        with pytest.raises(standardwebhooks.WebhookVerificationError):
            standardwebhooks.Webhook(new_secret()).verify(delivered.body, delivered.headers)


# ---------------------------------------------------------------------------- the Python client alone


@pytest.fixture
def secret() -> str:
    return new_secret()


@pytest.fixture
def delivery(secret: str) -> Delivery:
    return signed([secret], change(MessageType.SUBMISSION_REMOVED, {"id": 5, "bounty_id": 1}).body, int(time.time()))


def test_it_hands_over_the_event_and_the_deliverys_id_and_time(secret: str, delivery: Delivery) -> None:
    shouted = {name.title(): value for name, value in delivery.headers.items()}
    for headers in (delivery.headers, shouted):
        for body in (delivery.body, delivery.body.decode()):
            event = verify_webhook(secret, headers, body)
            assert event == WebhookEvent(
                type="submission.removed", payload=cast(Any, {"id": 5, "bounty_id": 1}),
                seq=42, position=f"42.{DIGEST}", webhook_id=delivery.headers["webhook-id"],
                timestamp=datetime.fromtimestamp(int(delivery.headers["webhook-timestamp"]), UTC))
            assert (event.kind, event.removed, event.resync, event.test) == ("submission", True, False, False)


@pytest.mark.parametrize(("changed", "message"), [
    ({"webhook_timestamp": "soon"}, "webhook-timestamp is not a number of seconds"),
    ({"webhook_signature": "v1"}, "webhook-signature is not `v1,<base64>` signatures separated by spaces"),
    ({"webhook_signature": ""}, "missing header: webhook-signature"),
    ({"body": b'{"type": "\xff"}'}, "the body is not UTF-8"),
], ids=["timestamp", "signature", "empty-signature", "not-utf-8"])
def test_it_refuses_a_malformed_delivery_with_its_reason(secret: str, delivery: Delivery, changed: dict[str, Any],
                                                         message: str) -> None:
    with pytest.raises(WebhookVerificationError, match=exactly(message)):
        verify_webhook(secret, delivery.changed(**changed).headers, delivery.changed(**changed).body)


@pytest.mark.parametrize("secret_given", ["whsec_", "whsec_abcde", ""])
def test_it_refuses_a_secret_that_is_not_one(delivery: Delivery, secret_given: str) -> None:
    with pytest.raises(WebhookVerificationError,
                       match=exactly("the secret is not a Standard Webhooks secret (whsec_ and base64)")):
        verify_webhook(secret_given, delivery.headers, delivery.body)


@pytest.mark.parametrize(("body", "message"), [
    (b"{", "webhook: the body is not JSON"),
    (b"[" * 100_000, "webhook: the body's arrays and objects nest deeper than 64"),
    (b'{"type": "bounty.created", "payload": {}, "seq": NaN, "position": "1.x"}', "webhook: the body is not JSON"),
    (b'{"type": "bounty.created", "payload": [], "seq": 1, "position": "1.x"}',
     "webhook: the body has no string type and object payload"),
    (b'{"type": "bounty.created", "payload": {}, "position": "1.x"}',
     "webhook: a bounty.created body's seq is not an integer or null, or its position not a string or null"),
    (b'{"type": "bounty.created", "payload": {}, "seq": true, "position": "1.x"}',
     "webhook: a bounty.created body's seq is not an integer or null, or its position not a string or null"),
], ids=["truncated", "deep", "nan", "payload", "no-seq", "bool-seq"])
def test_a_signed_body_that_is_not_an_envelope_is_a_response_error(secret: str, body: bytes, message: str) -> None:
    with pytest.raises(ResponseError, match=exactly(message)):
        verify_webhook(secret, signed([secret], body, int(time.time())).headers, body)


def test_importing_the_client_needs_no_standardwebhooks_and_verifying_says_how_to_install_it() -> None:
    script = """
import sys
sys.modules["standardwebhooks"] = None  # as if not installed
import bounty_client
try:
    bounty_client.verify_webhook("whsec_AAAA", {}, b"{}")
except ModuleNotFoundError as error:
    print(error)
"""
    ran = subprocess.run([sys.executable, "-c", script], cwd=PROJECT_DIR, capture_output=True, text=True, timeout=60,
                         check=False)
    assert ran.returncode == 0, ran.stderr
    assert ran.stdout.strip() == ('verify_webhook needs the standardwebhooks package: pip install '
                                  '"./bounty_client[webhooks]" (or "standardwebhooks>=1.0")')
