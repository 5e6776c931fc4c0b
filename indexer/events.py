"""Decoding of the bounty contract's record events from raw JSON-RPC logs.

The record events have fixed layouts (32-byte words and at most one dynamic `string`), so each
event's data is read word by word by readers prepared once from the committed ABI: about a
tenth of what eth-abi costs, which was itself a tenth of web3's `process_log`. The readers
accept and refuse exactly what `eth_abi.decode(types, data, strict=False)` does (the Solidity
decoder's leniency: a string cut short reads as the bytes that are there), which
tests/indexer/test_fast_decoder.py checks against eth-abi on real and fuzzed logs. Strings are
decoded as UTF-8 with replacement, and NUL characters are replaced too (PostgreSQL text cannot
hold them), so that no metadata a caller chose can stop the indexer.
"""

from __future__ import annotations

import operator
import re
import sys
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, get_args

from eth_utils.crypto import keccak

from contracts.artifacts import bounty_abi
from indexer.errors import IndexerError


class _Positional:
    """Pickled as its class and its field values: decoded events cross from the reader process
    (indexer.pipeline.ReadAhead) by the ten thousand, and the default for frozen slotted dataclasses
    (a state dict, set field by field) costs several times more."""

    __slots__ = ()
    _values: Callable[[Any], tuple[Any, ...]]  # the field values in order, in one call (operator.attrgetter)

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if cls.__slots__:  # the dataclass with slots, which replaces the class it was made from
            getter = operator.attrgetter(*cls.__slots__)
            cls._values = (lambda record: (getter(record),)) if len(cls.__slots__) == 1 else getter

    def __reduce__(self) -> tuple[type[Any], tuple[Any, ...]]:
        return type(self), type(self)._values(self)


@dataclass(frozen=True, slots=True)
class LogRef(_Positional):
    """Where a log sits on the chain: its identity for exactly-once application."""

    block_number: int
    block_hash: str
    tx_hash: str
    log_index: int


@dataclass(frozen=True, slots=True)
class BountyCreated(_Positional):
    log: LogRef
    bounty_id: int
    poster: str
    reward_amount: int
    fee_amount: int
    bond_amount: int
    duration: int
    deadline: int
    challenge_window: int
    metadata_uri: str
    metadata_hash: str


@dataclass(frozen=True, slots=True)
class SubmissionCreated(_Positional):
    log: LogRef
    submission_id: int
    bounty_id: int
    claimant: str
    bond_amount: int
    review_deadline: int
    metadata_uri: str
    metadata_hash: str


@dataclass(frozen=True, slots=True)
class DisputeCreated(_Positional):
    log: LogRef
    dispute_id: int
    submission_id: int
    challenger: str
    bounty_id: int
    bond_amount: int
    metadata_uri: str
    metadata_hash: str


@dataclass(frozen=True, slots=True)
class DisputeResolved(_Positional):
    log: LogRef
    dispute_id: int
    submission_id: int
    upheld: bool
    submission_status: int


@dataclass(frozen=True, slots=True)
class DisputeCancelled(_Positional):
    log: LogRef
    dispute_id: int
    submission_id: int


@dataclass(frozen=True, slots=True)
class BountyFinalized(_Positional):
    log: LogRef
    bounty_id: int
    submission_id: int
    claimant: str
    payout: int


@dataclass(frozen=True, slots=True)
class BountyRefunded(_Positional):
    log: LogRef
    bounty_id: int
    poster: str
    amount: int


@dataclass(frozen=True, slots=True)
class SubmissionRefunded(_Positional):
    log: LogRef
    submission_id: int
    bounty_id: int
    claimant: str
    amount: int


RecordEvent = (
    BountyCreated
    | SubmissionCreated
    | DisputeCreated
    | DisputeResolved
    | DisputeCancelled
    | BountyFinalized
    | BountyRefunded
    | SubmissionRefunded
)
_EVENT_CLASSES: dict[str, type[Any]] = {cls.__name__: cls for cls in get_args(RecordEvent)}
EVENT_TYPES: tuple[str, ...] = tuple(_EVENT_CLASSES)  # the record events' names, as the metrics label them


class UndecodableLog(ValueError):
    """A log with a record event's topic whose body does not decode."""


def _snake(name: str) -> str:
    return re.sub(r"(?<!^)(?=[A-Z])", "_", name).lower()


_HASH = re.compile(r"0x[0-9a-f]{64}")


def _log_hash(raw: dict[str, Any], key: str) -> str:
    """The log's blockHash or transactionHash, lowercase, checked here once so that the ledger
    stores it as it is; IndexerError (not a log to skip: the node's answer is wrong) otherwise."""
    value = raw[key]
    text = value.lower() if isinstance(value, str) else ""
    if not _HASH.fullmatch(text):
        raise IndexerError(f"the node answered a log with {key} {value!r}, not a 32-byte hash")
    return text


def _text(raw: bytes) -> str:
    return raw.decode("utf-8", errors="replace").replace("\x00", "\ufffd")


def _topic_value(abi_type: str, topic: str) -> Any:
    raw = bytes.fromhex(topic[2:])
    if abi_type == "address":
        return "0x" + raw[-20:].hex()
    if abi_type.startswith("uint"):
        return int.from_bytes(raw, "big")
    if abi_type == "bytes32":
        return "0x" + raw.hex()
    raise UndecodableLog(f"indexed {abi_type} is not supported")


# A reader takes the data and the start of a field's head word (checked to lie within the data)
# and returns the field's value, or raises UndecodableLog.
_Reader = Callable[[bytes, int], Any]


def _uint_reader(bits: int) -> _Reader:
    bound = 1 << bits

    def read(data: bytes, at: int) -> int:
        value = int.from_bytes(data[at : at + 32], "big")
        if value >= bound:
            raise UndecodableLog(f"uint{bits} value has non-zero padding")
        return value

    return read


def _read_address(data: bytes, at: int) -> str:
    if any(data[at : at + 12]):
        raise UndecodableLog("address has non-zero padding")
    return "0x" + data[at + 12 : at + 32].hex()


def _read_bool(data: bytes, at: int) -> bool:
    value = int.from_bytes(data[at : at + 32], "big")
    if value > 1:
        raise UndecodableLog("bool is neither 0 nor 1")
    return value == 1


def _read_bytes32(data: bytes, at: int) -> str:
    return "0x" + data[at : at + 32].hex()


def _string_reader(head_size: int) -> _Reader:
    def read(data: bytes, at: int) -> str:
        offset = int.from_bytes(data[at : at + 32], "big")
        if offset < head_size or offset >= len(data):
            raise UndecodableLog("string offset points outside the data")
        if offset + 32 > len(data):
            raise UndecodableLog("string length lies beyond the data")
        length = int.from_bytes(data[offset : offset + 32], "big")
        if -(-length // 32) * 32 > sys.maxsize:  # eth-abi cannot read that much either
            raise UndecodableLog("string length is absurd")
        return _text(data[offset + 32 : offset + 32 + length])

    return read


def _reader(abi_type: str, head_size: int) -> _Reader:
    if abi_type == "string":
        return _string_reader(head_size)
    if abi_type == "address":
        return _read_address
    if abi_type == "bool":
        return _read_bool
    if abi_type == "bytes32":
        return _read_bytes32
    if match := re.fullmatch(r"uint(\d+)", abi_type):
        return _uint_reader(int(match.group(1)))
    raise RuntimeError(f"the record events' data holds a {abi_type}, which the decoder does not read")


@dataclass(frozen=True)
class _EventSpec:
    cls: type[Any]
    indexed: list[tuple[str, str]]  # (field, abi type) in topic order
    data: list[tuple[str, _Reader]]  # (field, reader) in data order

    def decode(self, raw: dict[str, Any]) -> RecordEvent:
        topics: list[str] = raw["topics"]
        if len(topics) != len(self.indexed) + 1:
            raise UndecodableLog(f"{self.cls.__name__} needs {len(self.indexed) + 1} topics, got {len(topics)}")
        values = {name: _topic_value(t, topic) for (name, t), topic in zip(self.indexed, topics[1:], strict=True)}
        try:
            data = bytes.fromhex(raw["data"][2:])
        except ValueError as exc:
            raise UndecodableLog(f"{self.cls.__name__} data is not hex: {exc}") from exc
        if len(data) < 32 * len(self.data):
            raise UndecodableLog(f"{self.cls.__name__} data is {len(data)} bytes, too short for its fields")
        for at, (name, read) in enumerate(self.data):
            values[name] = read(data, 32 * at)
        ref = LogRef(
            block_number=int(raw["blockNumber"], 16),
            block_hash=_log_hash(raw, "blockHash"),
            tx_hash=_log_hash(raw, "transactionHash"),
            log_index=int(raw["logIndex"], 16),
        )
        event: RecordEvent = self.cls(log=ref, **values)
        return event


def _abi_type(item: dict[str, Any]) -> str:
    # Enums appear as uint8 in the ABI; internalType keeps their Solidity name.
    return str(item["type"])


def _build_specs() -> dict[str, _EventSpec]:
    specs: dict[str, _EventSpec] = {}
    for item in bounty_abi():
        if item["type"] != "event" or item["name"] not in _EVENT_CLASSES:
            continue
        inputs = item["inputs"]
        signature = f"{item['name']}({','.join(_abi_type(i) for i in inputs)})"
        topic0 = "0x" + keccak(text=signature).hex()
        data = [i for i in inputs if not i["indexed"]]
        specs[topic0] = _EventSpec(
            cls=_EVENT_CLASSES[item["name"]],
            indexed=[(_snake(i["name"]), _abi_type(i)) for i in inputs if i["indexed"]],
            data=[(_snake(i["name"]), _reader(_abi_type(i), 32 * len(data))) for i in data],
        )
    missing = set(_EVENT_CLASSES) - {spec.cls.__name__ for spec in specs.values()}
    if missing:
        raise RuntimeError(f"the committed ABI lacks the events {sorted(missing)}")
    return specs


_SPECS = _build_specs()
RECORD_EVENT_TOPICS: list[str] = sorted(_SPECS)


def decode_log(raw: dict[str, Any]) -> RecordEvent:
    """Decodes one raw log of a record event; UndecodableLog if its body is malformed."""
    topics = raw.get("topics") or []
    spec = _SPECS.get(topics[0].lower()) if topics else None
    if spec is None:
        raise UndecodableLog(f"not a record event: topic {topics[:1]}")
    return spec.decode(raw)
