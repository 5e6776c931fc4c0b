"""Keccak-256 and contract-call encoding (eth-abi for the arguments, pycryptodome for hashes)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from Crypto.Hash import keccak
from eth_abi.abi import encode


def keccak256(data: bytes) -> bytes:
    """The Keccak-256 digest of `data` (Ethereum's hash, not NIST SHA3-256)."""
    return keccak.new(digest_bits=256, data=data).digest()


def function_selector(signature: str) -> bytes:
    """The 4-byte selector of a canonical function signature such as `"withdrawTo(address)"`."""
    return keccak256(signature.encode("ascii"))[:4]


def encode_call(name: str, types: Sequence[str], args: Sequence[Any]) -> str:
    """The `0x`-prefixed calldata of `name(types...)` called with already validated `args`."""
    selector = function_selector(f"{name}({','.join(types)})")
    return "0x" + (selector + encode(list(types), list(args))).hex()
