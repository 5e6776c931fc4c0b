"""The errors the client raises: one hierarchy under `BountyClientError`."""

from __future__ import annotations


class BountyClientError(Exception):
    """Base class of every error raised by `bounty_client`."""


class ValidationError(BountyClientError, ValueError):
    """An input does not fit the contract's ABI type; the message is one of the spec's texts.

    The messages are exactly `invalid address`, `bytes32 value must be 32 bytes`,
    `number must be a safe uint` and `uint{bits} value out of range`.
    """


class ConfigurationError(BountyClientError):
    """The deployment (chain ID, contract and token address) could not be determined."""


class ResponseError(BountyClientError):
    """The read service answered with a body that is not of the shape the spec describes."""


class RequestFailedError(BountyClientError):
    """The read service answered with a non-OK HTTP status: `request failed: <status>`."""

    def __init__(self, status_code: int) -> None:
        super().__init__(f"request failed: {status_code}")
        self.status_code = status_code
