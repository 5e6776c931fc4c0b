"""The errors the client raises: one hierarchy under `BountyClientError`."""

from __future__ import annotations

from collections.abc import Sequence


class BountyClientError(Exception):
    """Base class of every error raised by `bounty_client`."""


class ValidationError(BountyClientError, ValueError):
    """An input does not fit the contract's ABI type; the message is one of the spec's texts.

    The messages are exactly `invalid address`, `bytes32 value must be 32 bytes`,
    `number must be a safe uint` and `uint{bits} value out of range`.
    """


class ConfigurationError(BountyClientError):
    """The deployment (chain ID, contract and token address) could not be determined.

    `missing` names the environment variables whose absence is the problem (empty when the
    problem is another one, such as an invalid value).
    """

    def __init__(self, message: str, missing: Sequence[str] = ()) -> None:
        super().__init__(message)
        self.missing = tuple(missing)


class ResponseError(BountyClientError):
    """The read service answered with a body that is not of the shape the spec describes."""


class RequestFailedError(BountyClientError):
    """The read service answered with a non-OK HTTP status.

    The message is exactly the spec's `request failed: <status>`; the rest is in attributes:

    - `status`: the HTTP status (`404`);
    - `detail`: the message of the service's error body `{"detail": "<message>"}`
      (`"bounty 7 not found"`), or None when the body is not of that shape
      (say, a proxy's HTML page);
    - `url`: the URL that was requested, with its query.
    """

    def __init__(self, status: int, detail: str | None = None, url: str | None = None) -> None:
        super().__init__(f"request failed: {status}")
        self.status = status
        self.detail = detail
        self.url = url

    @property
    def status_code(self) -> int:
        """The same as `status`, under httpx's name for it."""
        return self.status


class WebhookVerificationError(BountyClientError):
    """A webhook delivery that cannot be trusted (`verify_webhook`): a header missing, a timestamp
    too far from now, no signature that matches, a body that is not UTF-8, or a secret that is not
    `whsec_` and base64. The message says which."""
