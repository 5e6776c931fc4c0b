"""Golden vectors: every helper's calldata equals web3.py's encoding against the committed ABI."""

from __future__ import annotations

from functools import cache
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from web3 import Web3
from web3.contract import Contract

from bounty_client import Deployment, TransactionBuilder
from contracts.artifacts import bounty_abi, usdc_abi
from tests.client.conftest import CHAIN_ID, CONTRACT, DEPLOYMENT, USDC

HASH = "0x" + "5a" * 32
URI = 'data:application/json,{"title":"Fix the bug ✓ 🐛"}'
RECIPIENT = "0x70997970C51812dc3A010C7d01b50e0d17dc79C8"


@cache
def _contract(abi_name: str) -> type[Contract]:
    abi = bounty_abi() if abi_name == "BountyBoard" else usdc_abi()
    return Web3().eth.contract(abi=abi)


def expected_data(abi_name: str, function: str, args: list[Any]) -> str:
    return str(_contract(abi_name).encode_abi(function, args=args))


# (helper call, ABI, function, the arguments as web3.py takes them, target)
VECTORS = [
    (lambda b: b.approve_usdc(102_500_000), "TestUSDC", "approve", [CONTRACT, 102_500_000], USDC),
    (
        lambda b: b.create_bounty(metadata_uri=URI, metadata_hash=HASH, reward_amount=100_000_000, duration=86_400),
        "BountyBoard", "createBounty", [URI, bytes.fromhex(HASH[2:]), 100_000_000, 86_400], CONTRACT,
    ),
    (
        lambda b: b.submit(bounty_id=7, metadata_uri=URI, metadata_hash=HASH),
        "BountyBoard", "submit", [7, URI, bytes.fromhex(HASH[2:])], CONTRACT,
    ),
    (
        lambda b: b.dispute(submission_id=11, metadata_uri="ipfs://bafy", metadata_hash=HASH),
        "BountyBoard", "dispute", [11, "ipfs://bafy", bytes.fromhex(HASH[2:])], CONTRACT,
    ),
    (lambda b: b.resolve_dispute(3, True), "BountyBoard", "resolveDispute", [3, True], CONTRACT),
    (lambda b: b.resolve_dispute(4, False), "BountyBoard", "resolveDispute", [4, False], CONTRACT),
    (lambda b: b.finalize(2), "BountyBoard", "finalize", [2], CONTRACT),
    (lambda b: b.advance_review_cursor(2), "BountyBoard", "advanceReviewCursor", [2], CONTRACT),
    (lambda b: b.refund_expired(5), "BountyBoard", "refundExpired", [5], CONTRACT),
    (lambda b: b.refund_submission_bond(9), "BountyBoard", "refundSubmissionBond", [9], CONTRACT),
    (lambda b: b.cancel_resolved_dispute(12), "BountyBoard", "cancelResolvedDispute", [12], CONTRACT),
    (lambda b: b.withdraw(), "BountyBoard", "withdraw", [], CONTRACT),
    (lambda b: b.withdraw_to(RECIPIENT.lower()), "BountyBoard", "withdrawTo", [RECIPIENT], CONTRACT),
]


@pytest.mark.parametrize(("call", "abi_name", "function", "args", "target"), VECTORS, ids=[v[2] for v in VECTORS])
def test_it_encodes_every_helper_like_web3(builder, call, abi_name, function, args, target):
    assert call(builder) == {
        "chainId": CHAIN_ID,
        "to": target,
        "data": expected_data(abi_name, function, args),
        "value": "0x0",
    }


def test_it_covers_every_state_changing_call_a_user_makes():
    user_calls = {item["name"] for item in bounty_abi() if item["type"] == "function"
                  and item["stateMutability"] == "nonpayable"} - {
        "setGrout", "setParameters", "setArbiter", "setFeeRecipient", "transferOwnership",
    }
    assert user_calls == {v[2] for v in VECTORS} - {"approve"}


def test_approve_usdc_targets_the_token_with_the_contract_as_spender(builder):
    tx = builder.approve_usdc(1)
    assert tx["to"] == USDC
    assert tx["data"][2:10] == "095ea7b3"
    assert tx["data"][10:74] == "0" * 24 + CONTRACT[2:].lower()


def test_it_accepts_decimal_strings_bytes_and_any_address_case(builder):
    as_strings = builder.create_bounty(
        metadata_uri=URI, metadata_hash=bytes.fromhex(HASH[2:]), reward_amount="100000000", duration="86400"
    )
    assert as_strings == builder.create_bounty(
        metadata_uri=URI, metadata_hash=HASH.upper().replace("0X", "0x"), reward_amount=100_000_000, duration=86_400
    )
    assert builder.withdraw_to(RECIPIENT.upper().replace("0X", "0x")) == builder.withdraw_to(RECIPIENT)


def test_the_builder_checksums_the_configured_addresses():
    builder = TransactionBuilder(Deployment(CHAIN_ID, CONTRACT.lower(), USDC.lower()))
    assert builder.finalize(1)["to"] == CONTRACT
    assert builder.approve_usdc(1)["to"] == USDC


uint256 = st.integers(min_value=0, max_value=2**256 - 1)
uint64 = st.integers(min_value=0, max_value=2**64 - 1)
bytes32 = st.binary(min_size=32, max_size=32)
text = st.text()


# web3.py's encoder is slow on its first calls; a per-example deadline would make this flaky.
@settings(deadline=None)
@given(uri=text, digest=bytes32, reward=uint256, duration=uint64)
def test_create_bounty_matches_web3_for_any_input(uri, digest, reward, duration):
    builder = TransactionBuilder(DEPLOYMENT)
    tx = builder.create_bounty(metadata_uri=uri, metadata_hash=digest, reward_amount=reward, duration=duration)
    assert tx["data"] == expected_data("BountyBoard", "createBounty", [uri, digest, reward, duration])


@settings(deadline=None)
@given(entity_id=uint256, uri=text, digest=bytes32)
def test_submit_and_dispute_match_web3_for_any_input(entity_id, uri, digest):
    builder = TransactionBuilder(DEPLOYMENT)
    submit = builder.submit(bounty_id=entity_id, metadata_uri=uri, metadata_hash=digest)
    dispute = builder.dispute(submission_id=entity_id, metadata_uri=uri, metadata_hash="0x" + digest.hex())
    assert submit["data"] == expected_data("BountyBoard", "submit", [entity_id, uri, digest])
    assert dispute["data"] == expected_data("BountyBoard", "dispute", [entity_id, uri, digest])
