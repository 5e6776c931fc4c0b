"""Webhooks: verifying a delivery of the read service and reading its envelope (docs/api.md,
Webhooks).

The service POSTs every change to the endpoints registered in its admin, in the Standard Webhooks
format (standardwebhooks.com): the body is the websocket's live message (`type`, `payload`, `seq`,
`position`), signed in the `webhook-signature` header with the endpoint's secret. `verify_webhook`
checks the signature and the timestamp with the Standard Webhooks library (the `standardwebhooks`
package: `pip install "./bounty_client[webhooks]"`, imported only when a delivery is verified),
then reads the envelope. The TypeScript client's `verifyWebhook` does the same, with the same
messages.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Literal, TypedDict, TypeGuard, cast

from bounty_client.errors import ResponseError, WebhookVerificationError
from bounty_client.metadata import MAX_INLINE_JSON_DEPTH, nests_deeper_than, parse_json
from bounty_client.schema import BountyRecord, DisputeRecord, SubmissionRecord

_HEADERS = ("webhook-id", "webhook-timestamp", "webhook-signature")
TOLERANCE_SECONDS = 300  # how far webhook-timestamp may be from now: the Standard Webhooks libraries' 5 minutes
_RESYNC = "resync"
_TEST = "webhook.test"
_ABSENT = object()  # a member the body lacks

# The Standard Webhooks library's refusals (standardwebhooks 1.x), said as this client says them.
# tests/client/test_webhook_verification.py fails if an upgrade changes one of its texts.
_TOO_OLD = f"webhook-timestamp is more than {TOLERANCE_SECONDS // 60} minutes old: a replayed delivery, or this " \
           "machine's clock is wrong"
_TOO_NEW = f"webhook-timestamp is more than {TOLERANCE_SECONDS // 60} minutes ahead: this machine's clock is wrong"
_NOT_A_TIME = "webhook-timestamp is not a number of seconds"
_NO_MATCH = "no signature matches: the body or its headers were changed, or the secret is not this endpoint's"
_LIBRARY_REFUSALS = {
    "Message timestamp too old": _TOO_OLD,
    "Message timestamp too new": _TOO_NEW,
    "Invalid Signature Headers": _NOT_A_TIME,
    "No matching signature found": _NO_MATCH,
}


class ResyncAfterBackfill(TypedDict):
    """`resync` after a bulk backfill of blocks `from_block` to `to_block`."""

    from_block: int
    to_block: int


class ResyncOfEndpoint(TypedDict):
    """`resync` of an endpoint whose position this history does not hold: `position` is the newest."""

    reason: Literal["history_changed", "pruned", "deployment_changed"]
    position: str


class WebhookTest(TypedDict):
    """The test event staff send from the admin."""

    endpoint: int
    sent_at: str


Record = BountyRecord | SubmissionRecord | DisputeRecord
WebhookPayload = Record | ResyncAfterBackfill | ResyncOfEndpoint | WebhookTest


@dataclass(frozen=True, slots=True)
class WebhookEvent:
    """A verified delivery: its envelope, the websocket's live message, and its headers' ID and time.

    - A record's change (`bounty.created`, `dispute.resolved`, `submission.removed`, …): `payload`
      is the record as it was right after the change; `*.removed` deletes it, every other type
      replaces it. `seq` numbers the change and `position` is the place after it.
    - `resync`: read the records anew (`ReadClient`); the changes after `position` follow.
      `payload` is a `ResyncAfterBackfill` or a `ResyncOfEndpoint`.
    - `webhook.test`: sent from the admin; `payload` is a `WebhookTest`, `seq` and `position` None.

    `webhook_id` is the same on every retry of one change to one endpoint: keep the IDs already
    handled and skip a repeat. `timestamp` is this attempt's time (UTC).
    """

    type: str
    payload: WebhookPayload
    seq: int | None
    position: str | None
    webhook_id: str
    timestamp: datetime

    @property
    def kind(self) -> str | None:
        """The record kind of a change (`bounty`, `submission` or `dispute`); None for `resync` and
        `webhook.test`."""
        return None if self.type in (_RESYNC, _TEST) else self.type.partition(".")[0]

    @property
    def removed(self) -> bool:
        """Whether the record is gone (`bounty.removed` and the like)."""
        return self.kind is not None and self.type.endswith(".removed")

    @property
    def resync(self) -> bool:
        """Whether this is `resync`: read the records anew."""
        return self.type == _RESYNC

    @property
    def test(self) -> bool:
        """Whether this is the admin's `webhook.test`."""
        return self.type == _TEST


def verify_webhook(secret: str, headers: Mapping[str, str], body: bytes | str) -> WebhookEvent:
    """The delivery's event, once its signature and timestamp are verified.

    `secret` is the endpoint's (`whsec_…`, shown in the admin); `headers` the request's (any
    letter case: a dict, Django's `request.headers`, Starlette's, …); `body` the request's body
    exactly as received (bytes, or the text they decode to), before any JSON parsing.

    Raises `WebhookVerificationError` when the delivery cannot be trusted: a header missing, a
    timestamp more than 5 minutes from this machine's clock (the Standard Webhooks tolerance), no
    signature that matches (a changed body, a wrong secret), a body that is not UTF-8, or a secret
    that is not `whsec_` and base64. Answer those with a 4xx. Raises `ResponseError` when the
    signed body is not the documented envelope. Both are `BountyClientError`s.

    Needs the `standardwebhooks` package (`pip install "./bounty_client[webhooks]"`).
    """
    try:
        from standardwebhooks import Webhook
        from standardwebhooks.webhooks import EmptyWebhookSecretError
        from standardwebhooks.webhooks import WebhookVerificationError as Refused
    except ModuleNotFoundError as missing:
        raise ModuleNotFoundError(
            'verify_webhook needs the standardwebhooks package: pip install "./bounty_client[webhooks]" '
            '(or "standardwebhooks>=1.0")', name="standardwebhooks") from missing

    found = {name.lower(): value for name, value in headers.items() if name.lower() in _HEADERS}
    missing_headers = [name for name in _HEADERS if not found.get(name)]
    if missing_headers:
        raise WebhookVerificationError(f"missing header: {', '.join(missing_headers)}")
    try:
        text = body if isinstance(body, str) else bytes(body).decode("utf-8")
    except UnicodeDecodeError:
        raise WebhookVerificationError("the body is not UTF-8") from None
    try:
        webhook = Webhook(secret)
    except (ValueError, EmptyWebhookSecretError, RuntimeError):
        raise WebhookVerificationError("the secret is not a Standard Webhooks secret (whsec_ and base64)") from None
    try:
        webhook.verify(text, found, json_parse=False)
    except Refused as refused:
        raise WebhookVerificationError(_LIBRARY_REFUSALS.get(str(refused), str(refused))) from None
    except ValueError:  # a signature that is not `v1,<base64>`: the library's unpacking or base64 fails
        raise WebhookVerificationError("webhook-signature is not `v1,<base64>` signatures separated by spaces") \
            from None
    return _event(text, found["webhook-id"], int(float(found["webhook-timestamp"])))


def _event(text: str, webhook_id: str, timestamp: int) -> WebhookEvent:
    # Bounded before parsing, as the metadata's JSON is: a deep nesting would reach Python's
    # recursion limit (JavaScript's JSON.parse needs no such bound).
    if nests_deeper_than(text, MAX_INLINE_JSON_DEPTH):
        raise ResponseError(f"webhook: the body's arrays and objects nest deeper than {MAX_INLINE_JSON_DEPTH}")
    try:
        message = parse_json(text)
    except ValueError:
        raise ResponseError("webhook: the body is not JSON") from None
    if not isinstance(message, dict):
        raise ResponseError("webhook: the body is not a JSON object")
    type_, payload = message.get("type"), message.get("payload")
    seq, position = message.get("seq", _ABSENT), message.get("position", _ABSENT)
    if not isinstance(type_, str) or not isinstance(payload, dict):
        raise ResponseError("webhook: the body has no string type and object payload")
    if not (seq is None or _is_int(seq)) or not (position is None or isinstance(position, str)):
        raise ResponseError(f"webhook: a {type_} body's seq is not an integer or null, or its position not a "
                            "string or null")
    return WebhookEvent(type=type_, payload=cast(WebhookPayload, payload), seq=seq, position=position,
                        webhook_id=webhook_id, timestamp=datetime.fromtimestamp(timestamp, UTC))


def _is_int(value: object) -> TypeGuard[int]:
    return isinstance(value, int) and not isinstance(value, bool)
