"""The OpenAPI schema's `webhooks` (records.api.schema.add_webhooks): a POST per type the service
sends endpoints, each with the Standard Webhooks headers, and each body the service makes (by the
worker's and the admin's own code) valid against its webhook's schema. (tests/api/test_schema.py
keeps clients/openapi.json what the server generates; tests/client/test_webhook_verification.py
verifies the deliveries with both clients.)"""

from __future__ import annotations

import json
from typing import Any

import pytest
from django.test import Client
from jsonschema import Draft202012Validator  # type: ignore[import-untyped]  # jsonschema ships no types

from records.api.schema import RESYNC_REASONS, WEBHOOK_TEST_TYPE
from records.changes import MessageType
from records.history import Position
from records.models import Bounty, Deployment, Dispute, Submission
from records.representation import record_json
from records.selectors import Change
from tests.api import helpers as h
from webhooks import endpoints
from webhooks.delivery import Outcome, Request
from webhooks.models import Endpoint
from webhooks.worker import Event

DIGEST = "3f9a" * 8


@pytest.fixture
def schema(api: Client) -> dict[str, Any]:
    document: dict[str, Any] = json.loads(api.get("/api/schema/?format=json").content)
    return document


def body_schema(schema: dict[str, Any], type_: str) -> Draft202012Validator:
    """A validator of the body of the webhook `type_`, its $refs resolved in the schema."""
    pointer = f"#/webhooks/{type_}/post/requestBody/content/application~1json/schema"
    return Draft202012Validator({"$ref": pointer, "webhooks": schema["webhooks"], "components": schema["components"]})


def test_it_is_openapi_3_1_with_a_webhook_per_type_and_the_test_event(schema: dict[str, Any]) -> None:
    assert schema["openapi"] == "3.1.0"
    assert list(schema["webhooks"]) == [*MessageType.values, WEBHOOK_TEST_TYPE]
    assert WEBHOOK_TEST_TYPE == endpoints.TEST_TYPE


@pytest.mark.parametrize("type_", [*MessageType.values, WEBHOOK_TEST_TYPE])
def test_each_webhook_is_a_post_with_the_standard_webhooks_headers_and_its_own_type(
        schema: dict[str, Any], type_: str) -> None:
    (method,) = schema["webhooks"][type_]
    operation = schema["webhooks"][type_][method]
    assert method == "post"
    headers = [schema["components"]["parameters"][ref["$ref"].rsplit("/", 1)[1]] for ref in operation["parameters"]]
    assert [(header["name"], header["in"], header["required"]) for header in headers] == [
        ("webhook-id", "header", True), ("webhook-timestamp", "header", True), ("webhook-signature", "header", True)]
    body = operation["requestBody"]["content"]["application/json"]["schema"]
    assert body["required"] == ["type", "payload", "seq", "position"]
    assert body["properties"]["type"]["enum"] == [type_]
    assert set(operation["responses"]) == {"2XX", "410", "default"}


@pytest.mark.django_db
def test_every_body_the_service_sends_is_valid_against_its_webhook(
        schema: dict[str, Any], active: Deployment, monkeypatch: pytest.MonkeyPatch) -> None:
    tree = h.make_tree(active)
    records: dict[str, Bounty | Submission | Dispute] = {
        "bounty": tree.bounty, "submission": tree.submissions[0], "dispute": tree.disputes[0]}
    bodies: list[tuple[str, bytes]] = []
    for type_ in MessageType.values:
        if type_ == MessageType.RESYNC:
            payload: Any = {"from_block": 10, "to_block": 900}
        else:
            payload = record_json(records[type_.partition(".")[0]], chain_id=active.chain_id,
                                  contract_address=active.contract_address)
        bodies.append((type_, Event.of(Change(42, type_, payload, DIGEST)).body))
    bodies += [(MessageType.RESYNC, Event.resync(Position(90, DIGEST), reason).body) for reason in RESYNC_REASONS]

    class Sender:  # the admin's test event, as send_test makes it, kept instead of sent
        async def send(self, request: Request) -> Outcome:
            bodies.append((WEBHOOK_TEST_TYPE, request.body))
            return Outcome(204, 0.0, "delivered")

        async def close(self) -> None:
            pass

    monkeypatch.setattr(endpoints, "Sender", Sender)
    endpoints.send_test(Endpoint.objects.create(url="https://hooks.example/x", secret="whsec_AAAA"))

    for type_, body in bodies:
        errors = [error.message for error in body_schema(schema, type_).iter_errors(json.loads(body))]
        assert not errors, (type_, body, errors)
    assert {type_ for type_, _ in bodies} == {*MessageType.values, WEBHOOK_TEST_TYPE}


def test_a_body_of_another_type_or_shape_is_not_valid(schema: dict[str, Any]) -> None:
    created = {"type": "bounty.created", "payload": {"id": 1}, "seq": 1, "position": "1.x"}
    assert not body_schema(schema, "dispute.created").is_valid(created)  # the type, and the record's fields
    assert not body_schema(schema, "resync").is_valid({**created, "type": "resync", "payload": {"reason": "later"}})
    assert not body_schema(schema, WEBHOOK_TEST_TYPE).is_valid(
        {"type": WEBHOOK_TEST_TYPE, "payload": {"endpoint": 1, "sent_at": "now"}, "seq": 1, "position": None})
