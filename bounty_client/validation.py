"""Checks that turn caller input into ABI values, with the spec's exact error messages.

Unsigned integers are accepted as `int` (any size), as a string of decimal digits, or as a
`float` holding a safe integer (integral, 0 to 2^53-1: what JavaScript calls a safe integer),
then range-checked against the ABI width. Everything else is refused with
`number must be a safe uint`: a non-integral float or one above 2^53-1 (it may already have
lost digits: pass an int or a decimal string), a `bool`, a negative number, and any other
string or type.
"""

from __future__ import annotations

import re
from typing import TypeAlias

from bounty_client.abi import keccak256
from bounty_client.errors import ValidationError

Uint: TypeAlias = int | str
"""A uint input: an `int` or a string of decimal digits."""

Bytes32: TypeAlias = str | bytes
"""A bytes32 input: `0x` followed by 64 hex digits (any case), or 32 raw bytes."""

INVALID_ADDRESS = "invalid address"
INVALID_BYTES32 = "bytes32 value must be 32 bytes"
UNSAFE_UINT = "number must be a safe uint"
MAX_SAFE_INTEGER = 2**53 - 1

_DECIMAL = re.compile(r"[0-9]+")
_ADDRESS = re.compile(r"0x[0-9a-fA-F]{40}")
_BYTES32 = re.compile(r"0x[0-9a-fA-F]{64}")


def uint_out_of_range(bits: int) -> str:
    """The message for a uint that does not fit `uint{bits}`."""
    return f"uint{bits} value out of range"


def validate_uint(value: object, bits: int = 256) -> int:
    """`value` as an int in `0 .. 2**bits - 1`.

    Raises `ValidationError("number must be a safe uint")` for a float that is not an integer
    in 0 .. 2^53-1, a bool, a negative number or anything that is neither a number nor a
    decimal string, and
    `ValidationError("uint{bits} value out of range")` for a number too large for the width.
    """
    if isinstance(value, str):
        if not _DECIMAL.fullmatch(value):
            raise ValidationError(UNSAFE_UINT)
        # Checked before int() so that a huge string cannot hit int()'s digit limit.
        if len(value.lstrip("0")) > len(str(1 << bits)):
            raise ValidationError(uint_out_of_range(bits))
        number = int(value)
    elif isinstance(value, int) and not isinstance(value, bool):
        number = int(value)
        if number < 0:
            raise ValidationError(UNSAFE_UINT)
    elif isinstance(value, float):
        if not (value.is_integer() and 0 <= value <= MAX_SAFE_INTEGER):
            raise ValidationError(UNSAFE_UINT)
        number = int(value)
    else:
        raise ValidationError(UNSAFE_UINT)
    if number >> bits:
        raise ValidationError(uint_out_of_range(bits))
    return number


def to_checksum_address(value: str) -> str:
    """The EIP-55 mixed-case form of a `0x` + 40 hex digit address given in any case."""
    if not _ADDRESS.fullmatch(value):
        raise ValidationError(INVALID_ADDRESS)
    lower = value[2:].lower()
    digest = keccak256(lower.encode("ascii")).hex()
    return "0x" + "".join(
        char.upper() if int(nibble, 16) >= 8 else char for char, nibble in zip(lower, digest, strict=False)
    )


def validate_address(value: object) -> str:
    """`value` as an EIP-55 checksummed address.

    Any letter case is accepted (the checksum of mixed-case input is not enforced); anything
    other than a string of `0x` and 40 hex digits raises `ValidationError("invalid address")`.
    """
    if not isinstance(value, str):
        raise ValidationError(INVALID_ADDRESS)
    return to_checksum_address(value)


def validate_bytes32(value: object) -> bytes:
    """`value` as 32 bytes: accepts `0x` + 64 hex digits (any case) or a 32-byte `bytes`.

    Anything else raises `ValidationError("bytes32 value must be 32 bytes")`.
    """
    if isinstance(value, bytes | bytearray) and len(value) == 32:
        return bytes(value)
    if isinstance(value, str) and _BYTES32.fullmatch(value):
        return bytes.fromhex(value[2:])
    raise ValidationError(INVALID_BYTES32)


def validate_text(value: object, name: str) -> str:
    """`value` if it is a string that UTF-8 can encode (the ABI encodes strings as UTF-8).

    Otherwise raises `ValidationError("<name> must be a string")`.
    """
    if not isinstance(value, str):
        raise ValidationError(f"{name} must be a string")
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        raise ValidationError(f"{name} must be a string") from None
    return value


def validate_bool(value: object, name: str) -> bool:
    """`value` if it is a bool; otherwise `ValidationError("<name> must be a bool")`."""
    if not isinstance(value, bool):
        raise ValidationError(f"{name} must be a bool")
    return value
