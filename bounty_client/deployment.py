"""Which deployment (chain, bounty contract, USDC token) the client talks to.

A deployment comes from the read service's `/health` body (see `ReadClient.deployment` and
`TransactionBuilder.from_service`), from the environment (`deployment_from_env`), or from
explicit values.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from bounty_client.errors import ConfigurationError, ValidationError
from bounty_client.validation import validate_address, validate_uint

DEFAULT_CHAIN_ID = 91342
"""The chain ID of the active deployment (a test chain)."""

ENV_CHAIN_ID = "BOUNTY_CHAIN_ID"
ENV_CONTRACT_ADDRESS = "BOUNTY_CONTRACT_ADDRESS"
ENV_USDC_ADDRESS = "BOUNTY_USDC_ADDRESS"


@dataclass(frozen=True)
class Deployment:
    """One deployment of the bounty contract: chain ID, contract address, USDC token address.

    Addresses are given in any letter case and stored EIP-55 checksummed; a bad value raises
    `ValidationError` with the spec's message.
    """

    chain_id: int
    contract_address: str
    usdc_address: str

    def __post_init__(self) -> None:
        object.__setattr__(self, "chain_id", validate_uint(self.chain_id, 64))
        object.__setattr__(self, "contract_address", validate_address(self.contract_address))
        object.__setattr__(self, "usdc_address", validate_address(self.usdc_address))


def deployment_from_env(environ: Mapping[str, str] | None = None) -> Deployment:
    """The deployment named by `BOUNTY_CHAIN_ID` (default 91342), `BOUNTY_CONTRACT_ADDRESS` and
    `BOUNTY_USDC_ADDRESS` in `environ` (default: `os.environ`).

    Raises `ConfigurationError` naming every missing (also in its `missing`) or invalid variable.
    """
    env = os.environ if environ is None else environ
    missing = [name for name in (ENV_CONTRACT_ADDRESS, ENV_USDC_ADDRESS) if not env.get(name)]
    if missing:
        raise ConfigurationError(f"missing environment variables: {', '.join(missing)}", missing)
    checks: dict[str, Callable[[str], Any]] = {
        ENV_CHAIN_ID: lambda raw: validate_uint(raw, 64),
        ENV_CONTRACT_ADDRESS: validate_address,
        ENV_USDC_ADDRESS: validate_address,
    }
    values: dict[str, Any] = {}
    problems: list[str] = []
    for name, check in checks.items():
        raw = env.get(name) or str(DEFAULT_CHAIN_ID)  # only the chain ID can be absent here
        try:
            values[name] = check(raw.strip())
        except ValidationError as error:
            problems.append(f"{name}: {error}")
    if problems:
        raise ConfigurationError("; ".join(problems))
    return Deployment(values[ENV_CHAIN_ID], values[ENV_CONTRACT_ADDRESS], values[ENV_USDC_ADDRESS])


def deployment_from_health(body: object) -> Deployment:
    """The deployment in a `/health` body: `{"deployment": {chain_id, contract_address,
    usdc_address}, ...}`. Raises `ConfigurationError` when it is missing or malformed."""
    section: Any = body.get("deployment") if isinstance(body, dict) else None
    if not isinstance(section, dict):
        raise ConfigurationError("the /health body has no deployment object")
    try:
        # Deployment validates every value (a missing one is None) and checksums the addresses.
        values: dict[str, Any] = {
            name: section.get(name) for name in ("chain_id", "contract_address", "usdc_address")
        }
        return Deployment(**values)
    except ValidationError as error:
        raise ConfigurationError(f"the /health body has an invalid deployment: {error}") from None
