"""Test helpers for a real anvil chain with the reference contracts deployed."""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache, cached_property
from typing import Any

from eth_abi.abi import decode as abi_decode
from web3 import Web3
from web3.contract import Contract
from web3.logs import DISCARD
from web3.types import TxReceipt

from contracts.artifacts import bounty_abi, load_artifact
from contracts.devchain import DevDeployment, bounty_contract, usdc_contract

USDC = 10**6


@dataclass(frozen=True)
class Revert:
    """A decoded custom error: its name and arguments."""

    name: str
    args: tuple[Any, ...]


@cache
def _errors_by_selector() -> dict[bytes, tuple[str, list[str]]]:
    errors: dict[bytes, tuple[str, list[str]]] = {}
    for contract in ("BountyBoard", "TestUSDC"):
        for item in load_artifact(contract)["abi"]:
            if item["type"] == "error":
                types = [arg["type"] for arg in item["inputs"]]
                selector = Web3.keccak(text=f"{item['name']}({','.join(types)})")[:4]
                errors[selector] = (item["name"], types)
    return errors


def _innermost_revert(frame: dict[str, Any]) -> str:
    """The revert data of the frame that raised it (a token's error bubbles up unchanged)."""
    return str(frame.get("output", "0x"))


def decode_revert(data: str) -> Revert:
    raw = bytes.fromhex(data.removeprefix("0x"))
    name, types = _errors_by_selector()[raw[:4]]
    return Revert(name, tuple(abi_decode(types, raw[4:])))


@dataclass
class Chain:
    """The deployed contracts on anvil, with helpers to act as the dev accounts."""

    w3: Web3
    deployment: DevDeployment

    @cached_property
    def board(self) -> Contract:
        return bounty_contract(self.w3, self.deployment.contract_address)

    @cached_property
    def usdc(self) -> Contract:
        return usdc_contract(self.w3, self.deployment.usdc_address)

    def account(self, index: int) -> str:
        return self.deployment.accounts[index]

    def send(self, call: Any, sender: str) -> TxReceipt:
        """Mines `call` from `sender`; fails the test if it reverts."""
        receipt = self.w3.eth.wait_for_transaction_receipt(call.transact({"from": sender}))
        assert receipt["status"] == 1, f"transaction reverted: {receipt}"
        return receipt

    def revert_of(self, call: Any, sender: str, *, at: int | None = None) -> Revert:
        """Mines `call` from `sender` (in a block with timestamp `at`, if given), asserts that the
        transaction failed, and returns the custom error it reverted with, read from its trace."""
        if at is not None:
            self.set_next_timestamp(at)
        tx_hash = call.transact({"from": sender, "gas": 3_000_000})
        receipt = self.w3.eth.wait_for_transaction_receipt(tx_hash)
        assert receipt["status"] == 0, "the transaction did not revert"
        trace = self.w3.provider.make_request(
            "debug_traceTransaction", [tx_hash.to_0x_hex(), {"tracer": "callTracer"}]  # type: ignore[arg-type]
        )["result"]
        return decode_revert(_innermost_revert(trace))

    def events(self, receipt: TxReceipt, name: str) -> list[dict[str, Any]]:
        board_events = {item["name"] for item in bounty_abi() if item["type"] == "event"}
        contract = self.board if name in board_events else self.usdc
        processed = getattr(contract.events, name)().process_receipt(receipt, errors=DISCARD)
        return [dict(event["args"]) for event in processed]

    def timestamp(self) -> int:
        return int(self.w3.eth.get_block("latest")["timestamp"])

    def set_next_timestamp(self, timestamp: int) -> None:
        """The next mined block gets exactly this timestamp. Gas estimates still run against the
        latest block, so a call that is valid only at this time needs a fixed gas limit
        (`revert_of` sets one; tests/contracts/scenario.py has `send_at`)."""
        self.w3.provider.make_request("evm_setNextBlockTimestamp", [timestamp])  # type: ignore[arg-type]

    def mine(self, timestamp: int | None = None) -> None:
        params = [] if timestamp is None else [timestamp]
        self.w3.provider.make_request("evm_mine", params)  # type: ignore[arg-type]
