"""The spec's validation messages, on the inputs section 13 assigns them to, and properties of
the uint, address and bytes32 checks."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from web3 import Web3

from bounty_client import Deployment, TransactionBuilder, ValidationError
from bounty_client.validation import validate_address, validate_bytes32, validate_uint
from tests.client.conftest import CHAIN_ID, CONTRACT, USDC, exactly

HASH = "0x" + "11" * 32
URI = "ipfs://bafy"

UNSAFE = "number must be a safe uint"
ADDRESS = "invalid address"
BYTES32 = "bytes32 value must be 32 bytes"


def _uint_calls(value: Any) -> dict[str, tuple[int, Callable[[TransactionBuilder], Any]]]:
    """Every helper input that is a uint, each called with `value`: {name: (width, call)}."""
    calls = [
        ("approve_usdc.amount", 256, lambda b: b.approve_usdc(value)),
        ("create_bounty.reward_amount", 256,
         lambda b: b.create_bounty(metadata_uri=URI, metadata_hash=HASH, reward_amount=value, duration=1)),
        ("create_bounty.duration", 64,
         lambda b: b.create_bounty(metadata_uri=URI, metadata_hash=HASH, reward_amount=1, duration=value)),
        ("submit.bounty_id", 256, lambda b: b.submit(bounty_id=value, metadata_uri=URI, metadata_hash=HASH)),
        ("dispute.submission_id", 256,
         lambda b: b.dispute(submission_id=value, metadata_uri=URI, metadata_hash=HASH)),
        ("resolve_dispute.dispute_id", 256, lambda b: b.resolve_dispute(value, True)),
        ("finalize.bounty_id", 256, lambda b: b.finalize(value)),
        ("advance_review_cursor.bounty_id", 256, lambda b: b.advance_review_cursor(value)),
        ("refund_expired.bounty_id", 256, lambda b: b.refund_expired(value)),
        ("refund_submission_bond.submission_id", 256, lambda b: b.refund_submission_bond(value)),
        ("cancel_resolved_dispute.dispute_id", 256, lambda b: b.cancel_resolved_dispute(value)),
    ]
    return {name: (bits, call) for name, bits, call in calls}


UINT_WIDTHS = {name: bits for name, (bits, _) in _uint_calls(0).items()}


@pytest.mark.parametrize("name", UINT_WIDTHS)
@pytest.mark.parametrize(
    "value",
    [0.5, -1.0, float(2**53), 1e300, float("nan"), float("inf"), True, False, -1, "-1", "1.5", "1e3", "0x10", " 1",
     "", None, [1]],
    ids=repr,
)
def test_a_uint_input_refuses_a_number_that_is_not_a_safe_uint(builder, name, value):
    _, call = _uint_calls(value)[name]
    with pytest.raises(ValidationError, match=exactly(UNSAFE)):
        call(builder)


@pytest.mark.parametrize(("name", "bits"), UINT_WIDTHS.items())
def test_a_uint_input_refuses_a_value_wider_than_its_abi_type(builder, name, bits):
    for value in (2**bits, str(2**bits), "9" * 5000):
        _, call = _uint_calls(value)[name]
        with pytest.raises(ValidationError, match=exactly(f"uint{bits} value out of range")):
            call(builder)
    _, widest = _uint_calls(2**bits - 1)[name]
    assert widest(builder)["data"].startswith("0x")


@pytest.mark.parametrize(
    "value",
    ["0x" + "a" * 39, "0x" + "a" * 41, "a" * 40, "0X" + "a" * 40, "0x" + "g" * 40, "", None, 1, b"\x11" * 20,
     " 0x" + "a" * 40],
    ids=repr,
)
def test_withdraw_to_refuses_an_invalid_address(builder, value):
    with pytest.raises(ValidationError, match=exactly(ADDRESS)):
        builder.withdraw_to(value)


@pytest.mark.parametrize("field", ["chain_id", "contract_address", "usdc_address"])
def test_a_deployment_refuses_invalid_values(field):
    values: dict[str, Any] = {"chain_id": CHAIN_ID, "contract_address": CONTRACT, "usdc_address": USDC}
    values[field] = 1.5 if field == "chain_id" else "0x1234"
    with pytest.raises(ValidationError, match=exactly(UNSAFE if field == "chain_id" else ADDRESS)):
        Deployment(**values)


def _hash_calls(value: Any) -> dict[str, Callable[[TransactionBuilder], Any]]:
    return {
        "create_bounty": lambda b: b.create_bounty(metadata_uri=URI, metadata_hash=value, reward_amount=1, duration=1),
        "submit": lambda b: b.submit(bounty_id=1, metadata_uri=URI, metadata_hash=value),
        "dispute": lambda b: b.dispute(submission_id=1, metadata_uri=URI, metadata_hash=value),
    }


@pytest.mark.parametrize("helper", ["create_bounty", "submit", "dispute"])
@pytest.mark.parametrize(
    "value",
    ["0x" + "ab" * 31, "0x" + "ab" * 33, "ab" * 32, "0x" + "zz" * 32, b"\x01" * 31, b"\x01" * 33, "", None, 5],
    ids=repr,
)
def test_a_metadata_hash_must_be_32_bytes(builder, helper, value):
    with pytest.raises(ValidationError, match=exactly(BYTES32)):
        _hash_calls(value)[helper](builder)


@pytest.mark.parametrize("helper", ["create_bounty", "submit", "dispute"])
@pytest.mark.parametrize("value", [None, 7, b"ipfs://x", "\ud800"], ids=repr)
def test_a_metadata_uri_must_be_a_string(builder, helper, value):
    calls = {
        "create_bounty": lambda b: b.create_bounty(metadata_uri=value, metadata_hash=HASH, reward_amount=1, duration=1),
        "submit": lambda b: b.submit(bounty_id=1, metadata_uri=value, metadata_hash=HASH),
        "dispute": lambda b: b.dispute(submission_id=1, metadata_uri=value, metadata_hash=HASH),
    }
    with pytest.raises(ValidationError, match=exactly("metadata_uri must be a string")):
        calls[helper](builder)


@pytest.mark.parametrize("value", [1, 0, "true", None])
def test_resolve_dispute_needs_a_bool_verdict(builder, value):
    with pytest.raises(ValidationError, match=exactly("upheld must be a bool")):
        builder.resolve_dispute(1, value)


# ---------------------------------------------------------------- properties

widths = st.integers(min_value=1, max_value=32).map(lambda n: n * 8)


@given(data=st.data(), bits=widths)
def test_every_int_and_decimal_string_in_range_is_accepted(data, bits):
    value = data.draw(st.integers(min_value=0, max_value=2**bits - 1))
    assert validate_uint(value, bits) == value
    assert validate_uint(str(value), bits) == value
    assert validate_uint("000" + str(value), bits) == value


@given(data=st.data(), bits=widths)
def test_every_value_above_the_width_is_out_of_range(data, bits):
    value = data.draw(st.integers(min_value=2**bits, max_value=2**300))
    for given_as in (value, str(value)):
        with pytest.raises(ValidationError, match=exactly(f"uint{bits} value out of range")):
            validate_uint(given_as, bits)


unsafe_floats = st.floats().filter(lambda f: not (f.is_integer() and 0 <= f <= 2**53 - 1))


@given(value=st.integers(max_value=-1) | unsafe_floats | st.booleans(), bits=widths)
def test_negative_numbers_unsafe_floats_and_bools_are_never_safe_uints(value, bits):
    with pytest.raises(ValidationError, match=exactly(UNSAFE)):
        validate_uint(value, bits)


@given(value=st.integers(min_value=0, max_value=2**53 - 1))
def test_a_float_holding_a_safe_integer_is_that_integer(value):
    assert validate_uint(float(value), 64) == value


def test_the_largest_safe_float_is_accepted_and_the_next_one_refused():
    assert validate_uint(float(2**53 - 1)) == 2**53 - 1
    with pytest.raises(ValidationError, match=exactly(UNSAFE)):
        validate_uint(float(2**53))


@given(text=st.text().filter(lambda s: not (s.isascii() and s.isdigit())))
def test_a_string_that_is_not_decimal_digits_is_not_a_safe_uint(text):
    with pytest.raises(ValidationError, match=exactly(UNSAFE)):
        validate_uint(text)


@given(raw=st.binary(min_size=20, max_size=20), cases=st.lists(st.booleans(), min_size=40, max_size=40))
def test_any_case_of_an_address_gives_its_eip55_checksum(raw, cases):
    hex_digits = "".join(c.upper() if upper else c for c, upper in zip(raw.hex(), cases, strict=True))
    assert validate_address("0x" + hex_digits) == Web3.to_checksum_address(raw)


@given(text=st.text(alphabet="0123456789abcdefABCDEFxX", max_size=44))
def test_an_address_is_exactly_0x_and_40_hex_digits(text):
    valid = len(text) == 42 and text.startswith("0x") and "x" not in text[2:].lower()
    if valid:
        assert validate_address(text).lower() == text.lower()
    else:
        with pytest.raises(ValidationError, match=exactly(ADDRESS)):
            validate_address(text)


@given(raw=st.binary(min_size=32, max_size=32), upper=st.booleans())
def test_bytes32_accepts_32_bytes_as_bytes_or_hex_in_any_case(raw, upper):
    hex_text = raw.hex().upper() if upper else raw.hex()
    assert validate_bytes32("0x" + hex_text) == raw
    assert validate_bytes32(raw) == raw
    assert validate_bytes32(bytearray(raw)) == raw


@given(raw=st.binary(max_size=64).filter(lambda b: len(b) != 32))
def test_bytes32_refuses_every_other_length(raw):
    for value in (raw, "0x" + raw.hex()):
        with pytest.raises(ValidationError, match=exactly(BYTES32)):
            validate_bytes32(value)
