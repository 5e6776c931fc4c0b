"""bounty_client: unsigned transactions, metadata helpers, quotes, a read client, a websocket
watcher and webhook verification for the bounty contract and its read service. See README.md
beside this file for usage."""

from bounty_client._version import __version__
from bounty_client.deployment import DEFAULT_CHAIN_ID, Deployment, deployment_from_env, deployment_from_health
from bounty_client.errors import (
    BountyClientError,
    ConfigurationError,
    RequestFailedError,
    ResponseError,
    ValidationError,
    WebhookVerificationError,
)
from bounty_client.events import Backoff, EventFold, LiveEvent, Snapshot, events_url, watch_events
from bounty_client.metadata import (
    MAX_INLINE_JSON_BYTES,
    MAX_INLINE_JSON_DEPTH,
    UNDEFINED,
    JsonInput,
    JsonValue,
    canonical_json,
    metadata_hash,
    metadata_to_data_uri,
    parse_json,
    parse_metadata_uri,
)
from bounty_client.quote import CreateQuote, QuoteConfig, quote_create_amount
from bounty_client.read import ReadClient
from bounty_client.schema import (
    BountyOverview,
    BountyRecord,
    DisputeOverview,
    DisputeRecord,
    Health,
    Page,
    SubmissionOverview,
    SubmissionRecord,
)
from bounty_client.transactions import TransactionBuilder, UnsignedTransaction
from bounty_client.validation import validate_address, validate_bytes32, validate_uint
from bounty_client.webhooks import (
    ResyncAfterBackfill,
    ResyncOfEndpoint,
    WebhookEvent,
    WebhookPayload,
    WebhookTest,
    verify_webhook,
)

__all__ = [
    "DEFAULT_CHAIN_ID",
    "MAX_INLINE_JSON_BYTES",
    "MAX_INLINE_JSON_DEPTH",
    "UNDEFINED",
    "Backoff",
    "BountyClientError",
    "BountyOverview",
    "BountyRecord",
    "ConfigurationError",
    "CreateQuote",
    "Deployment",
    "DisputeOverview",
    "DisputeRecord",
    "EventFold",
    "Health",
    "JsonInput",
    "JsonValue",
    "LiveEvent",
    "Page",
    "QuoteConfig",
    "ReadClient",
    "RequestFailedError",
    "ResponseError",
    "ResyncAfterBackfill",
    "ResyncOfEndpoint",
    "Snapshot",
    "SubmissionOverview",
    "SubmissionRecord",
    "TransactionBuilder",
    "UnsignedTransaction",
    "ValidationError",
    "WebhookEvent",
    "WebhookPayload",
    "WebhookTest",
    "WebhookVerificationError",
    "__version__",
    "canonical_json",
    "deployment_from_env",
    "deployment_from_health",
    "events_url",
    "metadata_hash",
    "metadata_to_data_uri",
    "parse_json",
    "parse_metadata_uri",
    "quote_create_amount",
    "validate_address",
    "validate_bytes32",
    "validate_uint",
    "verify_webhook",
    "watch_events",
]
