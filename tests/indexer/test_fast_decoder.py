"""The word-by-word decoder of `indexer.events` against eth-abi: the same event for every log
eth-abi decodes (with `strict=False`, as the Solidity decoder reads), UndecodableLog for every
log it refuses, on the chain's real logs and on generated and mangled ones."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest
from eth_abi.abi import decode as abi_decode
from eth_abi.abi import encode as abi_encode
from eth_abi.exceptions import DecodingError
from eth_utils.crypto import keccak
from hypothesis import example, given, settings
from hypothesis import strategies as st

from contracts.artifacts import bounty_abi
from contracts.demo import seed_demo_activity
from indexer.events import RECORD_EVENT_TOPICS, LogRef, UndecodableLog, decode_log
from tests.chain import Chain
from tests.indexer.test_events import create_bounty, raw_logs

EVENTS = {item["name"]: item for item in bounty_abi() if item["type"] == "event"}
TOPIC_OF = {name: "0x" + keccak(text=f"{name}({','.join(i['type'] for i in item['inputs'])})").hex()
            for name, item in EVENTS.items()}
RECORD_EVENTS = sorted(name for name, topic in TOPIC_OF.items() if topic in RECORD_EVENT_TOPICS)
WORD = 32
# BountyCreated's eight head words with the string's offset pointing right after them.
STRING_HEAD = bytes(WORD * 6) + (WORD * 8).to_bytes(WORD, "big") + bytes(WORD)


def _data_inputs(name: str) -> list[dict[str, Any]]:
    return [i for i in EVENTS[name]["inputs"] if not i["indexed"]]


def eth_abi_fields(raw: dict[str, Any]) -> dict[str, Any] | None:
    """The data fields as eth-abi decodes them, in decode_log's terms; None where it refuses."""
    name = next(n for n, topic in TOPIC_OF.items() if topic == raw["topics"][0])
    inputs = _data_inputs(name)
    try:
        values = abi_decode(["bytes" if i["type"] == "string" else i["type"] for i in inputs],
                            bytes.fromhex(raw["data"][2:]), strict=False)
    except (DecodingError, ValueError, OverflowError):
        return None
    fields = {}
    for item, value in zip(inputs, values, strict=True):
        if item["type"] == "string":
            value = value.decode("utf-8", errors="replace").replace("\x00", "\ufffd")
        elif item["type"] == "bytes32":
            value = "0x" + value.hex()
        elif item["type"] == "address":
            value = value.lower()
        fields[item["name"]] = value
    return fields


def fast_fields(raw: dict[str, Any]) -> dict[str, Any] | None:
    """The data fields as decode_log reads them, under their ABI names; None where it refuses."""
    try:
        event = decode_log(raw)
    except UndecodableLog:
        return None
    names = {i["name"] for i in _data_inputs(type(event).__name__)}
    values = {_camel(f.name): getattr(event, f.name) for f in dataclasses.fields(event) if f.name != "log"}
    return {name: value for name, value in values.items() if name in names}


def _camel(name: str) -> str:
    first, *rest = name.split("_")
    return first + "".join(part.title() for part in rest)


def log_of(name: str, data: bytes) -> dict[str, Any]:
    indexed = [i for i in EVENTS[name]["inputs"] if i["indexed"]]
    return {
        "address": "0x" + "ab" * 20,
        "topics": [TOPIC_OF[name], *("0x" + f"{n + 1:064x}" for n in range(len(indexed)))],
        "data": "0x" + data.hex(),
        "blockNumber": "0x7",
        "blockHash": "0x" + "CD" * 32,
        "transactionHash": "0x" + "EF" * 32,
        "logIndex": "0x2",
        "removed": False,
    }


def assert_decoded_as_eth_abi_does(raw: dict[str, Any]) -> None:
    assert fast_fields(raw) == eth_abi_fields(raw)


def test_it_decodes_every_real_log_as_eth_abi_does(chain: Chain) -> None:
    seed_demo_activity(chain.w3, chain.deployment)
    for uri in (b"ipfs://\xff\xfe/\xc3(", b"a\x00b", b"", "𝄞 ipfs://émoji".encode(), b"x" * 4_000):
        create_bounty(chain, uri)
    logs = raw_logs(chain)
    assert {type(decode_log(log)).__name__ for log in logs} == set(RECORD_EVENTS)
    for log in logs:
        assert fast_fields(log) is not None
        assert_decoded_as_eth_abi_does(log)
        assert decode_log(log).log == LogRef(block_number=int(log["blockNumber"], 16),
                                             block_hash=log["blockHash"].lower(),
                                             tx_hash=log["transactionHash"].lower(),
                                             log_index=int(log["logIndex"], 16))


def _value(abi_type: str) -> st.SearchStrategy[Any]:
    if abi_type == "string":
        return st.binary(max_size=200)
    if abi_type == "address":
        return st.binary(min_size=20, max_size=20).map(lambda b: "0x" + b.hex())
    if abi_type == "bool":
        return st.booleans()
    if abi_type == "bytes32":
        return st.binary(min_size=32, max_size=32)
    bits = int(abi_type.removeprefix("uint"))
    return st.integers(min_value=0, max_value=2**bits - 1)


@st.composite
def encoded_logs(draw: st.DrawFn) -> dict[str, Any]:
    """A well-formed encoding of a record event, often mangled afterwards."""
    name = draw(st.sampled_from(RECORD_EVENTS))
    inputs = _data_inputs(name)
    types = ["bytes" if i["type"] == "string" else i["type"] for i in inputs]
    data = bytearray(abi_encode(types, [draw(_value(i["type"])) for i in inputs]))
    for _ in range(draw(st.integers(min_value=0, max_value=3))):
        words = max(1, len(data) // WORD)
        at = WORD * draw(st.integers(min_value=0, max_value=words - 1))
        mangle = draw(st.sampled_from(["word", "small", "huge", "byte", "cut", "extend"]))
        if mangle == "word":
            data[at : at + WORD] = draw(st.binary(min_size=WORD, max_size=WORD))
        elif mangle in ("small", "huge"):
            high = 2 * len(data) + 64 if mangle == "small" else 2**256 - 1
            data[at : at + WORD] = draw(st.integers(min_value=0, max_value=high)).to_bytes(WORD, "big")
        elif mangle == "byte" and data:
            data[draw(st.integers(min_value=0, max_value=len(data) - 1))] = draw(st.integers(0, 255))
        elif mangle == "cut":
            del data[draw(st.integers(min_value=0, max_value=len(data))):]
        else:
            data += draw(st.binary(max_size=80))
    return log_of(name, bytes(data))


@settings(max_examples=3_000, deadline=None)
@given(encoded_logs())
def test_it_decodes_generated_and_mangled_logs_as_eth_abi_does(raw: dict[str, Any]) -> None:
    assert_decoded_as_eth_abi_does(raw)


@settings(max_examples=1_000, deadline=None)
@given(st.sampled_from(RECORD_EVENTS), st.binary(max_size=400))
@example("BountyCreated", STRING_HEAD + (100).to_bytes(WORD, "big"))  # a string cut short
@example("BountyCreated", STRING_HEAD + b"\xff" * WORD)  # a string longer than eth-abi can read
@example("DisputeResolved", bytes(WORD) + (2).to_bytes(WORD, "big"))
@example("DisputeResolved", bytes(WORD) + (256).to_bytes(WORD, "big"))
def test_it_decodes_arbitrary_bytes_as_eth_abi_does(name: str, data: bytes) -> None:
    assert_decoded_as_eth_abi_does(log_of(name, data))


@pytest.mark.parametrize("length", [2**63 - 64, 2**63 - 32, 2**63 - 31, 2**64, 2**256 - 1])
def test_it_refuses_a_string_length_eth_abi_cannot_read(length: int) -> None:
    inputs = _data_inputs("SubmissionCreated")
    data = bytearray(abi_encode([i["type"] for i in inputs], [1, 2, "ipfs://x", b"\x01" * 32]))
    data[WORD * 4 : WORD * 5] = length.to_bytes(WORD, "big")
    raw = log_of("SubmissionCreated", bytes(data))
    assert_decoded_as_eth_abi_does(raw)
