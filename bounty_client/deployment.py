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

MAX_CHAIN_ID = 2**53 - 1
"""The largest chain ID a `/health` body may name: the largest integer a JavaScript number holds."""

ENV_CHAIN_ID = "BOUNTY_CHAIN_ID"
ENV_CONTRACT_ADDRESS = "BOUNTY_CONTRACT_ADDRESS"
ENV_USDC_ADDRESS = "BOUNTY_USDC_ADDRESS"

_INVALID_DEPLOYMENT = "the /health body has an invalid deployment"


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
    usdc_address}, ...}`, held to the rule both clients share (clients/test-vectors.json).

    Raises `ConfigurationError` when the body has no deployment object, when either address is
    missing or null (the service has no active deployment), when `chain_id` is not an integer
    from 1 to 2^53-1 (0 is no chain; above 2^53-1 a JavaScript number, hence the TypeScript
    client and most wallets, cannot hold it exactly), or when an address is malformed.
    """
    section: Any = body.get("deployment") if isinstance(body, dict) else None
    if not isinstance(section, dict):
        raise ConfigurationError("the /health body has no deployment object")
    contract_address, usdc_address = section.get("contract_address"), section.get("usdc_address")
    if contract_address is None or usdc_address is None:
        raise ConfigurationError("the /health body names no active deployment (contract_address or usdc_address "
                                 "is null)")
    chain_id = section.get("chain_id")
    if type(chain_id) is not int or not 1 <= chain_id <= MAX_CHAIN_ID:  # also refuses a bool, a float, a string
        raise ConfigurationError(f"{_INVALID_DEPLOYMENT}: chain_id must be an integer from 1 to 2^53-1")
    try:
        # Deployment checks the addresses and checksums them.
        return Deployment(chain_id, contract_address, usdc_address)
    except ValidationError as error:
        raise ConfigurationError(f"{_INVALID_DEPLOYMENT}: {error}") from None
