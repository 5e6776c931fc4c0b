"""Unsigned transactions for the bounty contract and its USDC token.

Every helper validates its input, encodes the call with eth-abi and returns
`{"chainId": int, "to": "0x…", "data": "0x…", "value": "0x0"}`: `to` is EIP-55 checksummed and
`value` is always zero, so the dict can be handed as is to web3.py's `send_transaction`
(with a `from`) or to any wallet's `eth_sendTransaction`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, TypedDict

from bounty_client.abi import encode_call
from bounty_client.deployment import Deployment, deployment_from_env
from bounty_client.read import DEFAULT_TIMEOUT, ReadClient
from bounty_client.validation import (
    Bytes32,
    Uint,
    validate_address,
    validate_bool,
    validate_bytes32,
    validate_text,
    validate_uint,
)


class UnsignedTransaction(TypedDict):
    """An unsigned transaction in the spec's shape (the key names are the JSON-RPC ones)."""

    chainId: int
    to: str
    data: str
    value: str


class TransactionBuilder:
    """Builds the unsigned transactions of one deployment.

    Make one from the service (`TransactionBuilder.from_service(base_url)` reads `/health`), from
    the environment (`TransactionBuilder.from_env()`), or from a `Deployment`.
    """

    def __init__(self, deployment: Deployment) -> None:
        """A builder for `deployment`."""
        self.deployment = deployment

    @classmethod
    def from_service(cls, base_url: str, *, timeout: float = DEFAULT_TIMEOUT) -> TransactionBuilder:
        """A builder for the active deployment that the read service at `base_url` reports
        in its `/health` body."""
        with ReadClient(base_url, timeout=timeout) as client:
            return cls(client.deployment())

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> TransactionBuilder:
        """A builder for the deployment named by `BOUNTY_CHAIN_ID`, `BOUNTY_CONTRACT_ADDRESS` and
        `BOUNTY_USDC_ADDRESS` (see `deployment_from_env`)."""
        return cls(deployment_from_env(environ))

    def _transaction(self, to: str, name: str, types: Sequence[str], args: Sequence[Any]) -> UnsignedTransaction:
        return {
            "chainId": self.deployment.chain_id,
            "to": to,
            "data": encode_call(name, types, args),
            "value": "0x0",
        }

    def _call(self, name: str, types: Sequence[str], args: Sequence[Any]) -> UnsignedTransaction:
        return self._transaction(self.deployment.contract_address, name, types, args)

    def approve_usdc(self, amount: Uint) -> UnsignedTransaction:
        """USDC `approve(contract, amount)`: lets the bounty contract pull `amount` base units.

        Send it before `create_bounty` (reward + post fee, see `quote_create_amount`), `submit`
        (the bounty's submission bond) or `dispute` (the dispute bond).
        """
        return self._transaction(
            self.deployment.usdc_address,
            "approve",
            ["address", "uint256"],
            [self.deployment.contract_address, validate_uint(amount, 256)],
        )

    def create_bounty(
        self, *, metadata_uri: str, metadata_hash: Bytes32, reward_amount: Uint, duration: Uint
    ) -> UnsignedTransaction:
        """`createBounty(string,bytes32,uint256,uint64)`: posts a bounty of `reward_amount` USDC
        base units, open for `duration` seconds. The contract pulls reward plus post fee."""
        return self._call(
            "createBounty",
            ["string", "bytes32", "uint256", "uint64"],
            [
                validate_text(metadata_uri, "metadata_uri"),
                validate_bytes32(metadata_hash),
                validate_uint(reward_amount, 256),
                validate_uint(duration, 64),
            ],
        )

    def submit(self, *, bounty_id: Uint, metadata_uri: str, metadata_hash: Bytes32) -> UnsignedTransaction:
        """`submit(uint256,string,bytes32)`: submits work to a bounty. The contract pulls the
        bounty's submission bond."""
        return self._call(
            "submit",
            ["uint256", "string", "bytes32"],
            [
                validate_uint(bounty_id, 256),
                validate_text(metadata_uri, "metadata_uri"),
                validate_bytes32(metadata_hash),
            ],
        )

    def dispute(self, *, submission_id: Uint, metadata_uri: str, metadata_hash: Bytes32) -> UnsignedTransaction:
        """`dispute(uint256,string,bytes32)`: disputes a submission (whitelisted grouts only).
        The contract pulls the dispute bond."""
        return self._call(
            "dispute",
            ["uint256", "string", "bytes32"],
            [
                validate_uint(submission_id, 256),
                validate_text(metadata_uri, "metadata_uri"),
                validate_bytes32(metadata_hash),
            ],
        )

    def resolve_dispute(self, dispute_id: Uint, upheld: bool) -> UnsignedTransaction:
        """`resolveDispute(uint256,bool)`: the arbiter's decision on a pending dispute."""
        return self._call(
            "resolveDispute",
            ["uint256", "bool"],
            [validate_uint(dispute_id, 256), validate_bool(upheld, "upheld")],
        )

    def finalize(self, bounty_id: Uint) -> UnsignedTransaction:
        """`finalize(uint256)`: accepts the submission at the bounty's review cursor once its
        review window has passed."""
        return self._call("finalize", ["uint256"], [validate_uint(bounty_id, 256)])

    def advance_review_cursor(self, bounty_id: Uint) -> UnsignedTransaction:
        """`advanceReviewCursor(uint256)`: moves the bounty's review cursor past rejected
        submissions."""
        return self._call("advanceReviewCursor", ["uint256"], [validate_uint(bounty_id, 256)])

    def refund_expired(self, bounty_id: Uint) -> UnsignedTransaction:
        """`refundExpired(uint256)`: returns the reward of an expired bounty nobody can still
        win to its poster."""
        return self._call("refundExpired", ["uint256"], [validate_uint(bounty_id, 256)])

    def refund_submission_bond(self, submission_id: Uint) -> UnsignedTransaction:
        """`refundSubmissionBond(uint256)`: returns the bond of a submission still `submitted`
        once its bounty is closed."""
        return self._call("refundSubmissionBond", ["uint256"], [validate_uint(submission_id, 256)])

    def cancel_resolved_dispute(self, dispute_id: Uint) -> UnsignedTransaction:
        """`cancelResolvedDispute(uint256)`: cancels a pending dispute whose submission was
        already rejected through another dispute."""
        return self._call("cancelResolvedDispute", ["uint256"], [validate_uint(dispute_id, 256)])

    def withdraw(self) -> UnsignedTransaction:
        """`withdraw()`: pays the sender's credited balance to the sender."""
        return self._call("withdraw", [], [])

    def withdraw_to(self, recipient: str) -> UnsignedTransaction:
        """`withdrawTo(address)`: pays the sender's credited balance to `recipient`."""
        return self._call("withdrawTo", ["address"], [validate_address(recipient)])
