"""What the OpenAPI schema says about the read routes, and about the webhooks' deliveries.

The serializers here only describe the JSON the views produce (records.representation builds
it); `add_common_responses` adds what every counted route shares: rate-limit headers, the 304,
405 and 429 answers, and ETag / Cache-Control on success. `add_webhooks` adds the OpenAPI 3.1
`webhooks`: what the webhooks app POSTs to endpoints (docs/api.md, Webhooks).
"""

from __future__ import annotations

from typing import Any, cast

from drf_spectacular.utils import (
    OpenApiParameter,
    OpenApiResponse,
    PolymorphicProxySerializer,
    extend_schema,
    extend_schema_view,
)
from rest_framework import serializers

from records.api.filters import ADDRESS_PATTERN
from records.changes import MessageType
from records.kinds import BOUNTY, BY_NAME, DISPUTE, SUBMISSION, Kind, RecordKind
from records.models import BountyStatus, DisputeStatus, SubmissionStatus


def _amount(what: str) -> serializers.CharField:
    return serializers.CharField(help_text=f"{what}, USDC base units, as an exact decimal string")


def _address(what: str) -> serializers.CharField:
    return serializers.CharField(help_text=f"{what}, EIP-55 checksummed")


class _RecordSerializer(serializers.Serializer[Any]):
    chain_id = serializers.IntegerField(help_text="deployment chain ID")
    contract_address = _address("deployment contract address")
    metadata_uri = serializers.CharField()
    metadata_hash = serializers.CharField(help_text="0x + 64 lowercase hex digits")
    tx_hash = serializers.CharField(help_text="source transaction hash, 0x + 64 lowercase hex digits")
    block_number = serializers.IntegerField(help_text="source block number")
    log_index = serializers.IntegerField(help_text="source log index")
    created_at = serializers.DateTimeField(help_text="RFC 3339 UTC: timestamp of the block that created the record")


class BountySerializer(_RecordSerializer):
    id = serializers.IntegerField(help_text="bounty ID (unique per deployment)")
    prompt = serializers.CharField(help_text="holds the same value as metadata_uri")
    bounty_amount = _amount("reward")
    fee_amount = _amount("post fee")
    bond_amount = _amount("submission bond")
    duration = serializers.IntegerField(help_text="seconds")
    status = serializers.ChoiceField(choices=BountyStatus.choices)
    poster = _address("poster")
    deadline = serializers.DateTimeField()
    challenge_window = serializers.IntegerField(help_text="review window, seconds")


class BountyRowSerializer(BountySerializer):
    submission_count = serializers.IntegerField()


class SubmissionSerializer(_RecordSerializer):
    id = serializers.IntegerField(help_text="submission ID (unique per deployment)")
    bounty_id = serializers.IntegerField()
    tile_id = _address("submitter")
    content = serializers.CharField(help_text="holds the same value as metadata_uri")
    bond_amount = _amount("submission bond")
    review_deadline = serializers.DateTimeField()
    status = serializers.ChoiceField(choices=SubmissionStatus.choices)
    claimant = _address("submitter")


class SubmissionRowSerializer(SubmissionSerializer):
    dispute_count = serializers.IntegerField()


class DisputeSerializer(_RecordSerializer):
    id = serializers.IntegerField(help_text="dispute ID (unique per deployment)")
    bounty_id = serializers.IntegerField()
    submission_id = serializers.IntegerField()
    challenger_id = _address("challenger (a whitelisted grout)")
    reason = serializers.CharField(help_text="holds the same value as metadata_uri")
    bond_amount = _amount("dispute bond")
    status = serializers.ChoiceField(choices=DisputeStatus.choices)


def _page(name: str, row: type[serializers.Serializer[Any]]) -> type[serializers.Serializer[Any]]:
    """The page object of a list; its schema component is `name` (drf-spectacular drops the class
    name's `Serializer`)."""
    return type(f"{name}Serializer", (serializers.Serializer,), {
        "items": row(many=True),
        "total": serializers.IntegerField(help_text="matching records across all pages"),
        "limit": serializers.IntegerField(),
        "cursor": serializers.CharField(allow_null=True, help_text="offset this page read from, or null"),
        "next_cursor": serializers.CharField(allow_null=True, help_text="offset of the next page, or null"),
        "__doc__": f"A page of {name.removesuffix('Page').lower()} records.",
    })


BountyPageSerializer = _page("BountyPage", BountyRowSerializer)
SubmissionPageSerializer = _page("SubmissionPage", SubmissionRowSerializer)
DisputePageSerializer = _page("DisputePage", DisputeSerializer)


class BountyOverviewSerializer(serializers.Serializer[Any]):
    bounty = BountyRowSerializer()
    submissions = SubmissionRowSerializer(many=True)
    disputes = DisputeSerializer(many=True)


class SubmissionOverviewSerializer(serializers.Serializer[Any]):
    submission = SubmissionRowSerializer()
    bounty = BountyRowSerializer(allow_null=True)
    disputes = DisputeSerializer(many=True)


class DisputeOverviewSerializer(serializers.Serializer[Any]):
    dispute = DisputeSerializer()
    submission = SubmissionRowSerializer(allow_null=True)
    bounty = BountyRowSerializer(allow_null=True)
    sibling_disputes = DisputeSerializer(many=True, help_text="the other disputes of the same submission")


class ErrorSerializer(serializers.Serializer[Any]):
    detail = serializers.CharField()


class HealthDeploymentSerializer(serializers.Serializer[Any]):
    chain_id = serializers.IntegerField()
    contract_address = serializers.CharField(allow_null=True)
    usdc_address = serializers.CharField(allow_null=True)


class HealthBackfillSerializer(serializers.Serializer[Any]):
    from_block = serializers.IntegerField()
    to_block = serializers.IntegerField(help_text="the safe head the backfill runs to")
    done_blocks = serializers.IntegerField()
    total_blocks = serializers.IntegerField()
    percent = serializers.FloatField()


class HealthIndexerProcessSerializer(serializers.Serializer[Any]):
    name = serializers.CharField(help_text="host name and process ID")
    role = serializers.ChoiceField(choices=["writer", "standby"],
                                   help_text="writer: holds the deployment's writer lock; standby: waits for it")
    last_seen = serializers.DateTimeField()


class HealthIndexerSerializer(serializers.Serializer[Any]):
    enabled = serializers.BooleanField(help_text="an RPC URL is configured")
    running = serializers.BooleanField(help_text="the indexer's heartbeat is recent")
    synced = serializers.BooleanField(help_text="within the lag threshold of the safe head")
    start_block = serializers.IntegerField(
        allow_null=True, help_text="the first block indexed: BOUNTY_START_BLOCK, or when it is unset the contract's "
                                   "deployment block as the indexer found it on the chain; null until found")
    start_block_found = serializers.BooleanField(
        help_text="start_block was found on the chain (BOUNTY_START_BLOCK unset), not configured")
    last_indexed_block = serializers.IntegerField(allow_null=True)
    head_block = serializers.IntegerField(allow_null=True)
    lag_blocks = serializers.IntegerField(allow_null=True)
    confirmations = serializers.IntegerField(
        help_text="how deep a block must be before it is indexed; with a block tag, how deep the tagged block was")
    confirmations_tag = serializers.ChoiceField(
        choices=["safe", "finalized"], allow_null=True,
        help_text="the block tag the indexer indexes up to (BOUNTY_CONFIRMATIONS), or null for a number of blocks")
    rate_limited = serializers.BooleanField(
        help_text="the node refused the indexer's requests for their rate lately: it slows down and goes on")
    rpc_calls_per_block = serializers.FloatField(
        allow_null=True, help_text="JSON-RPC calls the indexer makes per new block while it follows the head, over "
                                   "the last minutes; null until measured")
    rpc_calls_per_day = serializers.FloatField(
        allow_null=True, help_text="JSON-RPC calls a day at the indexer's rate of the last minutes; null until "
                                   "measured")
    rpc_calls_by_phase = serializers.DictField(
        child=serializers.IntegerField(),
        help_text="the running writer's JSON-RPC calls since it started, by the phase that made them: startup (the "
                  "start-up checks), historical (ranges), realtime (following the head), reread (the second reading "
                  "of the blocks near the head); empty while no indexer runs")
    block_rhythm_seconds = serializers.FloatField(
        allow_null=True, help_text="the block time (this machine's seconds) the running indexer's polls have borne "
                                   "out: it asks for the head when the next block is due; null while it trusts no "
                                   "rhythm and asks every BOUNTY_INDEXER_POLL_MS (a developer's chain, after a burst, "
                                   "a moved clock or a halt, until about ten blocks bear a rhythm out again)")
    block_rhythm_since = serializers.DateTimeField(
        allow_null=True, help_text="since when the running indexer trusts that rhythm; null while it trusts none")
    node_unreachable_since = serializers.DateTimeField(
        allow_null=True, help_text="the node has not answered the running indexer since then (it keeps asking, and "
                                   "status is degraded); null while it answers")
    node_unreachable_seconds = serializers.IntegerField(
        allow_null=True, help_text="how long the node has not answered the running indexer; null while it answers")
    node_last_asked_at = serializers.DateTimeField(
        allow_null=True, help_text="when the indexer last sent the node a request; null before the first")
    node_last_asked_seconds = serializers.IntegerField(
        allow_null=True, help_text="how long ago the indexer last sent the node a request; null before the first")
    node_ask_overdue = serializers.BooleanField(
        help_text="the running indexer has not asked the node for longer than BOUNTY_INDEXER_MAX_WAIT_MS plus "
                  "the tries of a poll the node does not answer (3 x BOUNTY_RPC_TIMEOUT_SECONDS, plus 3 s) allow "
                  "(it should never happen; status is degraded)")
    last_heartbeat = serializers.DateTimeField(allow_null=True)
    indexes = serializers.ChoiceField(
        choices=["ready", "deferred", "building"],
        help_text="the search and sort indexes: deferred while a bulk backfill runs (answers stay correct, only "
                  "slower), then building, then ready")
    backfill = HealthBackfillSerializer(allow_null=True, help_text="the backfill under way; null when caught up")
    processes = HealthIndexerProcessSerializer(
        many=True, help_text="the deployment's indexer processes seen within the heartbeat, the writer first")


class HealthRedisSerializer(serializers.Serializer[Any]):
    status = serializers.ChoiceField(
        choices=["ok", "unreachable", "not_configured"],
        help_text="unreachable: reads go on from the database without the response cache, rate limits and "
                  "websocket caps are counted per process, websocket feeds poll the change log (status is degraded)")
    unreachable_since = serializers.DateTimeField(
        allow_null=True, help_text="this process has not reached Redis since then; null while it answers")
    unreachable_seconds = serializers.IntegerField(
        allow_null=True, help_text="how long this process has not reached Redis; null while it answers")


class HealthReplicaSerializer(serializers.Serializer[Any]):
    name = serializers.CharField(help_text="replica1, replica2, ... in the order of DATABASE_REPLICA_URLS")
    host = serializers.CharField(help_text="host:port/database, without credentials")
    status = serializers.ChoiceField(
        choices=["in_use", "set_aside"],
        help_text="set_aside: reads go to the other replicas or the primary until a check finds it well (status "
                  "is degraded)")
    reason = serializers.CharField(allow_null=True, help_text="why it is set aside; null while in use")
    lag_seconds = serializers.FloatField(
        allow_null=True, help_text="how far it was behind the primary at its last check; null before one")
    checked_at = serializers.DateTimeField(allow_null=True, help_text="its last check that it answered")


class HealthWebhookWorkerSerializer(serializers.Serializer[Any]):
    name = serializers.CharField(help_text="the run_webhooks process: host name and process ID")
    last_seen = serializers.DateTimeField()


class HealthWebhooksSerializer(serializers.Serializer[Any]):
    endpoints = serializers.IntegerField(help_text="webhook endpoints enabled")
    disabled = serializers.IntegerField(help_text="webhook endpoints disabled (by staff, a 410, or failing too long)")
    retrying = serializers.IntegerField(help_text="enabled endpoints waiting to be sent a change again")
    failing_since = serializers.DateTimeField(
        allow_null=True, help_text="the longest-failing enabled endpoint's first failure; null when none fails")
    workers = HealthWebhookWorkerSerializer(many=True, help_text="the delivery workers seen within the heartbeat")
    running = serializers.BooleanField(
        help_text="false when endpoints are enabled but no delivery worker runs (status is degraded)")


class HealthSerializer(serializers.Serializer[Any]):
    status = serializers.ChoiceField(choices=["ok", "degraded", "error"])
    version = serializers.CharField()
    deployment = HealthDeploymentSerializer()
    indexer = HealthIndexerSerializer()
    redis = HealthRedisSerializer(help_text="Redis (REDIS_URL) as the answering web process reaches it")
    replicas = HealthReplicaSerializer(
        many=True, allow_null=True,
        help_text="the read replicas (DATABASE_REPLICA_URLS) as the answering web process checks them; null without")
    webhooks = HealthWebhooksSerializer(help_text="the webhook endpoints and their delivery workers (run_webhooks)")


QUALIFIER_PARAMETERS = [
    OpenApiParameter("chain_id", {"type": "integer", "minimum": 0}, description="deployment chain ID; send with "
                     "contract_address, or leave both out for the active deployment (one alone is a 400)"),
    OpenApiParameter("contract_address", str, pattern=ADDRESS_PATTERN,
                     description="deployment contract address (any letter case)"),
]


_QUALIFIED = "One record, or an overview, of a qualified deployment."
RECORD_ID = OpenApiParameter("record_id", int, OpenApiParameter.PATH, description="the record's on-chain ID")


# Each kind's serializers, by the kind's name (records.kinds): (the page object, one record, the
# overview, the overview's summary). The list's component is `<one record's component>List`.
RECORD_SCHEMAS: dict[Kind, tuple[type[serializers.Serializer[Any]], type[serializers.Serializer[Any]],
                                  type[serializers.Serializer[Any]], str]] = {
    BOUNTY.name: (BountyPageSerializer, BountySerializer, BountyOverviewSerializer,
                  "A bounty, its submissions and their disputes"),
    SUBMISSION.name: (SubmissionPageSerializer, SubmissionSerializer, SubmissionOverviewSerializer,
                      "A submission, its bounty and its disputes"),
    DISPUTE.name: (DisputePageSerializer, DisputeSerializer, DisputeOverviewSerializer,
                   "A dispute with its submission, bounty, siblings"),
}


def record_schema(viewset: Any) -> Any:
    """A record viewset's operations, by its kind (and the filters that always ask for a page).
    The list's parameters come from its filter backends and its pagination class
    (records.api.filters, records.api.pagination)."""
    kind: RecordKind = viewset.kind
    page, plain, overview, overview_summary = RECORD_SCHEMAS[kind.name]
    resource, noun = kind.resource, kind.name
    always = "".join(f" `/{resource}?{name}=` always answers a page object." for name in viewset.always_paged_by)
    return extend_schema_view(
        list=extend_schema(
            operation_id=f"{resource}_list",
            summary=f"List {resource}",
            description=("An unpaged array when none of limit, cursor and q is sent (with a Content-Length), "
                         "otherwise a page "
                         f"object.{always}"),
            responses={
                200: PolymorphicProxySerializer(component_name=f"{plain.__name__.removesuffix('Serializer')}List",
                                                serializers=[plain(many=True), page], resource_type_field_name=None,
                                                many=False),
                400: ErrorSerializer,
                503: OpenApiResponse(ErrorSerializer, description=(
                    "an unpaged array the server could not read in time (BOUNTY_HTTP_MAX_STREAMS, "
                    "BOUNTY_HTTP_LIST_WAIT_SECONDS) or has no room to send (BOUNTY_SPOOL_MAX_BYTES); pages are not "
                    "limited so")),
            },
        ),
        retrieve=extend_schema(operation_id=f"{noun}_get", summary=f"One {noun}", description=_QUALIFIED,
                               parameters=[RECORD_ID, *QUALIFIER_PARAMETERS],
                               responses={200: plain, 400: ErrorSerializer, 404: ErrorSerializer}),
        overview=extend_schema(operation_id=f"{noun}_overview", summary=overview_summary, description=_QUALIFIED,
                               parameters=[RECORD_ID, *QUALIFIER_PARAMETERS],
                               responses={200: overview, 400: ErrorSerializer, 404: ErrorSerializer}),
    )(viewset)


_RATE_HEADERS = {
    "X-RateLimit-Limit": {"schema": {"type": "integer"}, "description": "requests allowed per window"},
    "X-RateLimit-Remaining": {"schema": {"type": "integer"}, "description": "requests left in this window"},
    "X-RateLimit-Reset": {"schema": {"type": "integer"}, "description": "Unix time when the window resets"},
}
_TAG_HEADERS = {
    "ETag": {"schema": {"type": "string"}, "description": 'weak, W/"..."'},
    "Cache-Control": {"schema": {"type": "string"}, "description": "public, no-cache"},
}
_ERROR = {"application/json": {"schema": {"$ref": "#/components/schemas/Error"}}}


def add_common_responses(result: dict[str, Any], generator: Any, request: Any, public: bool) -> dict[str, Any]:
    """Adds the rate-limit headers and the 304 / 405 / 429 answers to every counted route."""
    for path, operations in result.get("paths", {}).items():
        for method, operation in operations.items():
            if method != "get":
                continue
            responses = operation.setdefault("responses", {})
            if path == "/health":
                responses.setdefault("503", {"description": "the database is unreachable", "content": _ERROR})
                continue
            if "200" in responses:
                responses["200"].setdefault("headers", {}).update(_TAG_HEADERS)
            responses.setdefault("304", {"description": "If-None-Match matched the current ETag (weak "
                                         "comparison, a list or *); no body, no Content-Type",
                                         "headers": dict(_TAG_HEADERS)})
            responses.setdefault("405", {"description": "any method but GET, HEAD, OPTIONS", "content": _ERROR})
            responses.setdefault("429", {
                "description": "rate limit exceeded", "content": _ERROR,
                "headers": {"Retry-After": {"schema": {"type": "integer"}, "description": "seconds, at least 1"}},
            })
            if "503" in responses:
                responses["503"].setdefault("headers", {})["Retry-After"] = {"schema": {"type": "integer"},
                                                                             "description": "seconds"}
            for response in responses.values():
                response.setdefault("headers", {}).update(_RATE_HEADERS)
    return result


# ---------------------------------------------------------------------------- webhooks
# The deliveries the service POSTs to webhook endpoints (docs/api.md, Webhooks), as OpenAPI 3.1
# `webhooks`: one per type, each body the websocket's live-message envelope. They are written
# here rather than through drf-spectacular's WEBHOOKS setting, which documents no request
# headers and builds the components before the webhooks' own.

WEBHOOK_TEST_TYPE = "webhook.test"  # webhooks.endpoints sends it from the admin
RESYNC_REASONS = ("history_changed", "pruned", "deployment_changed")  # webhooks.worker's
_WEBHOOK_HEADERS = {
    "WebhookId": {
        "name": "webhook-id", "in": "header", "required": True, "schema": {"type": "string"},
        "description": "the delivery's ID, the same on every retry of one change to one endpoint: the receiver's "
                       "idempotency key (opaque; `msg_` and the endpoint and change today)",
    },
    "WebhookTimestamp": {
        "name": "webhook-timestamp", "in": "header", "required": True, "schema": {"type": "string"},
        "description": "Unix time of this attempt, in seconds; receivers refuse one more than 5 minutes away",
    },
    "WebhookSignature": {
        "name": "webhook-signature", "in": "header", "required": True, "schema": {"type": "string"},
        "description": "`v1,` and the base64 HMAC-SHA256 of `<webhook-id>.<webhook-timestamp>.<body>`, keyed "
                       "with the endpoint's secret (the base64 after `whsec_`); during a secret's rotation, one "
                       "signature per secret, separated by a space (Standard Webhooks)",
    },
}
_WEBHOOK_PAYLOADS = {
    "ResyncAfterBackfill": {
        "type": "object", "description": "A bulk backfill of blocks `from_block` to `to_block` changed records "
                                         "without a change each: read the records anew.",
        "properties": {"from_block": {"type": "integer"}, "to_block": {"type": "integer"}},
        "required": ["from_block", "to_block"],
    },
    "ResyncOfEndpoint": {
        "type": "object", "description": "The endpoint's position is of another history (a restore, a failover), "
                                         "of another deployment, or pruned: read the records anew; changes "
                                         "after `position` follow.",
        "properties": {"reason": {"enum": list(RESYNC_REASONS), "type": "string"},
                       "position": {"type": "string", "description": "the newest position, the event's own"}},
        "required": ["reason", "position"],
    },
    "WebhookTest": {
        "type": "object", "description": "A test event sent from the admin.",
        "properties": {"endpoint": {"type": "integer", "description": "the endpoint's ID"},
                       "sent_at": {"type": "string", "format": "date-time"}},
        "required": ["endpoint", "sent_at"],
    },
}
_WEBHOOK_RESPONSES = {
    "2XX": {"description": "received: the endpoint is sent the next change"},
    "410": {"description": "Gone: the endpoint is disabled (staff may enable it again; it resumes where it was)"},
    "default": {"description": "any other answer, or none within BOUNTY_WEBHOOKS_TIMEOUT_SECONDS: the same "
                           "delivery (the same webhook-id) is sent again with a growing delay, longer if "
                           "Retry-After asks (up to BOUNTY_WEBHOOKS_MAX_RETRY_AFTER_SECONDS); failing for "
                           "BOUNTY_WEBHOOKS_DISABLE_AFTER_HOURS disables the endpoint"},
}


def _envelope(type_: str, payload: dict[str, Any], seq: dict[str, Any], position: dict[str, Any]) -> dict[str, Any]:
    return {
        "type": "object",
        "properties": {"type": {"type": "string", "enum": [type_]}, "payload": payload, "seq": seq,
                       "position": position},
        "required": ["type", "payload", "seq", "position"],
    }


def _webhook_body(type_: str) -> tuple[str, dict[str, Any]]:
    """A webhook's description and the schema of its body."""
    seq = {"type": "integer", "description": "the change's number in the change log"}
    position = {"type": "string", "description": "the place in the service's history after this change"}
    if type_ == WEBHOOK_TEST_TYPE:
        return ("A test event, sent from the admin: not a change, and never sent again.",
                _envelope(type_, {"$ref": "#/components/schemas/WebhookTest"}, {"type": "null"}, {"type": "null"}))
    if type_ == MessageType.RESYNC:
        return ("Records changed without a change each (a bulk backfill), or the endpoint's position is not one "
                "this history holds: read the records anew (GET /bounties, /submissions, /disputes); the changes "
                "after `position` follow. Sent whatever the endpoint's filters.",
                _envelope(type_, {"oneOf": [{"$ref": "#/components/schemas/ResyncAfterBackfill"},
                                            {"$ref": "#/components/schemas/ResyncOfEndpoint"}]}, seq, position))
    kind = BY_NAME[cast(Kind, type_.partition(".")[0])]
    record = RECORD_SCHEMAS[kind.name][1].__name__.removesuffix("Serializer")
    return (f"A change of the change log: the {kind.name} as it was right after it, as `GET /{kind.resource}/"
            "{record_id}` gives it (the API reference's websocket Messages say when each type is sent).",
            _envelope(type_, {"$ref": f"#/components/schemas/{record}"}, seq, position))


def add_webhooks(result: dict[str, Any], generator: Any, request: Any, public: bool) -> dict[str, Any]:
    """Adds the webhook deliveries: a POST per type of change, and the test event."""
    components = result.setdefault("components", {})
    components["schemas"] = dict(sorted({**components.get("schemas", {}), **_WEBHOOK_PAYLOADS}.items()))
    components["parameters"] = {**components.get("parameters", {}), **_WEBHOOK_HEADERS}
    webhooks = result.setdefault("webhooks", {})
    for type_ in [*MessageType.values, WEBHOOK_TEST_TYPE]:
        description, body = _webhook_body(type_)
        webhooks[type_] = {"post": {
            "operationId": "webhook_" + type_.replace(".", "_"),
            "summary": type_,
            "description": description,
            "parameters": [{"$ref": f"#/components/parameters/{name}"} for name in _WEBHOOK_HEADERS],
            "requestBody": {"required": True, "content": {"application/json": {"schema": body}}},
            "responses": {status: dict(response) for status, response in _WEBHOOK_RESPONSES.items()},
        }}
    return result
