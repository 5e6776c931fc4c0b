"""The Python client against clients/test-vectors.json, the vectors the TypeScript client is held
to as well (clients/typescript/test/vectors.test.ts): calldata of every helper, every validation
message, canonical JSON and hashes, parsed metadata URIs, and quotes."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from bounty_client import metadata
from bounty_client.deployment import Deployment
from bounty_client.errors import ValidationError
from bounty_client.quote import QuoteConfig, quote_create_amount
from bounty_client.transactions import TransactionBuilder, UnsignedTransaction

VECTORS = json.loads((Path(__file__).resolve().parents[2] / "clients" / "test-vectors.json").read_text("utf-8"))
DEPLOYMENT = VECTORS["deployment"]
BUILDER = TransactionBuilder(Deployment(DEPLOYMENT["chainId"], DEPLOYMENT["contractAddress"],
                                        DEPLOYMENT["usdcAddress"]))


def _snake(name: str) -> str:
    return re.sub(r"[A-Z]", lambda match: "_" + match.group().lower(), name)


def _value(value: Any) -> Any:
    """A vector's argument as Python takes it: {"bigint": "..."} is an int, object keys snake_case."""
    if isinstance(value, dict) and set(value) == {"bigint"}:
        return int(value["bigint"])
    if isinstance(value, dict):
        return {_snake(key): _value(member) for key, member in value.items()}
    return value


def _call(name: str, args: list[Any]) -> UnsignedTransaction:
    method = getattr(BUILDER, _snake(name))
    values = [_value(arg) for arg in args]
    if len(values) == 1 and isinstance(values[0], dict):
        return method(**values[0])  # type: ignore[no-any-return]
    return method(*values)  # type: ignore[no-any-return]


def _id(case: dict[str, Any]) -> str:
    return f"{case['call']}({json.dumps(case['args'], ensure_ascii=False)[1:-1][:60]})"


@pytest.mark.parametrize("case", VECTORS["transactions"], ids=_id)
def test_each_helper_gives_the_vectors_transaction(case: dict[str, Any]) -> None:
    assert _call(case["call"], case["args"]) == case["expected"]


@pytest.mark.parametrize("case", VECTORS["validation"], ids=_id)
def test_each_bad_input_gives_the_vectors_message(case: dict[str, Any]) -> None:
    with pytest.raises(ValidationError) as raised:
        _call(case["call"], case["args"])
    assert str(raised.value) == case["error"]


@pytest.mark.parametrize("case", VECTORS["canonicalJson"], ids=lambda case: case["json"][:40])
def test_canonical_json_its_hash_and_data_uri_match_the_vectors(case: dict[str, Any]) -> None:
    value = metadata.parse_json(case["json"])
    assert metadata.canonical_json(value) == case["canonical"]
    assert metadata.metadata_hash(value) == case["hash"]
    assert metadata.metadata_to_data_uri(value) == case["dataUri"]


@pytest.mark.parametrize("case", VECTORS["parseMetadataUri"], ids=lambda case: case["uri"][:40])
def test_parsing_a_metadata_uri_matches_the_vectors(case: dict[str, Any]) -> None:
    assert metadata.parse_metadata_uri(case["uri"]) == case["value"]


@pytest.mark.parametrize("case", VECTORS["quotes"], ids=lambda case: str(case["rewardAmount"])[:20])
def test_quotes_match_the_vectors(case: dict[str, Any]) -> None:
    rates = case.get("config")
    config = QuoteConfig(post_fee_bps=rates["postFeeBps"], submission_bond_bps=rates["submissionBondBps"]) if rates \
        else None
    if "error" in case:
        with pytest.raises(ValidationError) as raised:
            quote_create_amount(case["rewardAmount"], config)
        assert str(raised.value) == case["error"]
        return
    quote = quote_create_amount(case["rewardAmount"], config)
    assert {name: str(getattr(quote, _snake(name))) for name in case["expected"]} == case["expected"]


def test_the_vectors_cover_every_helper_and_message() -> None:
    calls = {case["call"] for case in VECTORS["transactions"]}
    assert calls == {"approveUsdc", "createBounty", "submit", "dispute", "finalize", "advanceReviewCursor",
                     "refundExpired", "refundSubmissionBond", "cancelResolvedDispute", "withdraw", "withdrawTo",
                     "resolveDispute"}
    messages = {case["error"] for case in VECTORS["validation"]}
    assert {"invalid address", "bytes32 value must be 32 bytes", "number must be a safe uint",
            "uint256 value out of range", "uint64 value out of range"} <= messages
