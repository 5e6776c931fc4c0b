"""Metadata documents: canonical JSON, inline `data:` URIs and their keccak256 hashes.

Canonical JSON is byte for byte what JavaScript's `JSON.stringify` gives for the value with
its object keys sorted:

- no whitespace; non-ASCII characters are kept as they are (UTF-8 once encoded); `"`, `\\`
  and control characters are escaped as `JSON.stringify` does, and so are lone surrogates;
- object keys in the order of JavaScript's default `Array.prototype.sort()`, which compares
  UTF-16 code units (not code points, as Python's `sorted()` does: the two disagree between a
  character above U+FFFF, such as an emoji, and one in U+E000-U+FFFF), except that keys which
  JavaScript treats as array indices (`"0"`, `"7"`, `"42"`: canonical decimals below
  2**32 - 1) come first, in numeric order, because a JavaScript object always lists them so;
- `None` is `null`; `UNDEFINED` plays JavaScript's `undefined`: an object member whose value is
  `UNDEFINED` is left out, and in an array it becomes `null`;
- floats are formatted as JavaScript formats numbers (`1e+21`, `1e-7`, `0.1`, `-0` as `0`,
  `NaN` and infinities as `null`); ints must lie within +-(2**53 - 1), the integers that a
  JavaScript number holds exactly (pass larger amounts as decimal strings).
"""

from __future__ import annotations

import base64
import binascii
import contextlib
import enum
import json
import math
import re
from collections.abc import Mapping, Sequence
from typing import Any, Final, Literal, TypeAlias
from urllib.parse import unquote

from bounty_client.abi import keccak256

MAX_SAFE_INTEGER: Final = 2**53 - 1
DATA_URI_PREFIX: Final = "data:application/json,"


class Undefined(enum.Enum):
    """The type of `UNDEFINED`."""

    UNDEFINED = "UNDEFINED"

    def __repr__(self) -> str:
        return "UNDEFINED"


UNDEFINED: Final = Undefined.UNDEFINED
"""JavaScript's `undefined`: an object member with this value is left out of canonical JSON."""

JsonValue: TypeAlias = bool | int | float | str | list["JsonValue"] | dict[str, "JsonValue"] | None
"""A parsed JSON value."""

JsonInput: TypeAlias = (
    bool
    | int
    | float
    | str
    | Literal[Undefined.UNDEFINED]
    | Sequence["JsonInput"]
    | Mapping[str, "JsonInput"]
    | None
)
"""What `canonical_json` accepts: JSON values (lists or tuples, mappings with string keys),
with `UNDEFINED` allowed inside objects and arrays."""

_ESCAPES: Final = {
    '"': '\\"',
    "\\": "\\\\",
    "\b": "\\b",
    "\f": "\\f",
    "\n": "\\n",
    "\r": "\\r",
    "\t": "\\t",
}
# A surrogate pair held as two code points is one character to JavaScript (whose strings are
# UTF-16): it is written as that character. Only a lone surrogate is escaped.
_SURROGATE_PAIR: Final = re.compile("[\ud800-\udbff][\udc00-\udfff]")
_TO_ESCAPE: Final = re.compile(f'({_SURROGATE_PAIR.pattern})|["\\\\\x00-\x1f\ud800-\udfff]')
_ARRAY_INDEX: Final = re.compile(r"0|[1-9][0-9]{0,9}")
_MAX_ARRAY_INDEX: Final = 2**32 - 2


def _join_pair(pair: str) -> str:
    return chr(0x10000 + ((ord(pair[0]) - 0xD800) << 10) + (ord(pair[1]) - 0xDC00))


def _escape(match: re.Match[str]) -> str:
    pair = match.group(1)
    if pair is not None:
        return _join_pair(pair)
    char = match.group()
    return _ESCAPES.get(char) or f"\\u{ord(char):04x}"


def _utf16_code_units(text: str) -> bytes:
    """`text` as JavaScript holds it: UTF-16 code units, big-endian, so that comparing the bytes
    compares the code units. A character above U+FFFF becomes its surrogate pair, a surrogate
    held as a code point (paired or lone) stays that code unit."""
    return text.encode("utf-16-be", "surrogatepass")


def _quote(text: str) -> str:
    return '"' + _TO_ESCAPE.sub(_escape, text) + '"'


def _js_number(number: float) -> str:
    """ECMAScript Number::toString for a finite float (shortest round-trip digits, like repr)."""
    if number == 0:
        return "0"
    sign = "-" if number < 0 else ""
    mantissa, _, power = repr(abs(number)).partition("e")
    whole, _, fraction = mantissa.partition(".")
    significant = (whole + fraction).lstrip("0")
    digits = significant.rstrip("0")
    # The value is 0.<digits> * 10**point: k = len(digits) and n = point in ECMAScript's
    # Number::toString, whose cases follow.
    point = int(power or "0") - len(fraction) + len(significant)
    if len(digits) <= point <= 21:
        text = digits + "0" * (point - len(digits))
    elif 0 < point <= 21:
        text = digits[:point] + "." + digits[point:]
    elif -6 < point <= 0:
        text = "0." + "0" * -point + digits
    else:
        head = digits[0] + ("." + digits[1:] if len(digits) > 1 else "")
        text = f"{head}e{'+' if point - 1 >= 0 else '-'}{abs(point - 1)}"
    return sign + text


def _is_array_index(key: str) -> bool:
    return _ARRAY_INDEX.fullmatch(key) is not None and int(key) <= _MAX_ARRAY_INDEX


def _property_order(keys: list[str]) -> list[str]:
    indexes = sorted((key for key in keys if _is_array_index(key)), key=int)
    return indexes + sorted((key for key in keys if not _is_array_index(key)), key=_utf16_code_units)


def _write(value: object, out: list[str]) -> None:
    if value is None:
        out.append("null")
    elif value is True:
        out.append("true")
    elif value is False:
        out.append("false")
    elif isinstance(value, str):
        out.append(_quote(value))
    elif isinstance(value, int):
        if abs(value) > MAX_SAFE_INTEGER:
            raise ValueError(f"integer {value} is not a safe JSON number: pass it as a string")
        out.append(str(int(value)))
    elif isinstance(value, float):
        out.append(_js_number(value) if math.isfinite(value) else "null")
    elif isinstance(value, Mapping):
        members: dict[str, object] = {}
        for key, member in value.items():
            if not isinstance(key, str):
                raise TypeError(f"object keys must be strings, not {type(key).__name__}")
            if member is not UNDEFINED:
                members[key] = member
        out.append("{")
        for position, key in enumerate(_property_order(list(members))):
            if position:
                out.append(",")
            out.append(_quote(key))
            out.append(":")
            _write(members[key], out)
        out.append("}")
    elif isinstance(value, Sequence) and not isinstance(value, bytes | bytearray):
        out.append("[")
        for position, item in enumerate(value):
            if position:
                out.append(",")
            _write(None if item is UNDEFINED else item, out)
        out.append("]")
    else:
        raise TypeError(f"{type(value).__name__} has no canonical JSON form")


def canonical_json(value: JsonInput) -> str:
    """The canonical JSON text of `value` (see the module documentation for the rules).

    Raises `TypeError` for a value with no JSON form (including a top-level `UNDEFINED`,
    for which `JSON.stringify` returns no text) and `ValueError` for an int outside
    +-(2**53 - 1).
    """
    if value is UNDEFINED:
        raise TypeError("UNDEFINED has no canonical JSON form")
    out: list[str] = []
    _write(value, out)
    return "".join(out)


def metadata_to_data_uri(metadata: JsonInput) -> str:
    """`data:application/json,` followed by the canonical JSON of `metadata`, unencoded."""
    return DATA_URI_PREFIX + canonical_json(metadata)


def metadata_hash(metadata: JsonInput) -> str:
    """The keccak256 hash of the UTF-8 bytes of the canonical JSON of `metadata`, as `0x` and
    64 lowercase hex digits (the contract's `bytes32 metadataHash`)."""
    return "0x" + keccak256(canonical_json(metadata).encode("utf-8")).hex()


def _refuse_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


def _parse_int(text: str) -> int | float:
    if len(text) <= len(str(-MAX_SAFE_INTEGER)):
        number = int(text)
        if abs(number) <= MAX_SAFE_INTEGER:
            return number
    return float(text)


def parse_json(text: str) -> JsonValue:
    """Parses JSON text as JavaScript's `JSON.parse` does: `NaN` and `Infinity` are refused,
    and an integer beyond +-(2**53 - 1) is read as the float JavaScript would hold, so that
    `canonical_json` gives what JavaScript gives for the same text.

    Raises `ValueError` for text that is not JSON.
    """
    parsed: JsonValue = json.loads(text, parse_constant=_refuse_constant, parse_int=_parse_int)
    return parsed


def parse_metadata_uri(uri: object) -> JsonValue | None:
    """The JSON value held inline by a `data:application/json` URI, or None.

    Accepts the raw form that `metadata_to_data_uri` makes (`data:application/json,{...}`), the
    percent-encoded form (`data:application/json,%7B...`) and the base64 form
    (`data:application/json;base64,...`); media type parameters such as `;charset=utf-8` are
    allowed. Returns None for anything else: another scheme or media type (an `ipfs://` or
    `https://` URI is not inline), a payload that is not valid JSON, or a non-string.
    """
    if not isinstance(uri, str) or uri[:5].lower() != "data:":
        return None
    header, comma, payload = uri[5:].partition(",")
    if not comma:
        return None
    parameters = [part.strip().lower() for part in header.split(";")]
    if parameters[0] != "application/json":
        return None
    if parameters[-1] == "base64" and len(parameters) > 1:
        try:
            encoded = unquote(payload).strip()
            texts = [base64.b64decode(encoded + "=" * (-len(encoded) % 4), validate=True).decode("utf-8")]
        except (binascii.Error, ValueError):
            return None
    else:
        texts = [payload]
        with contextlib.suppress(UnicodeDecodeError):
            texts.append(unquote(payload, errors="strict"))
    for text in texts:
        try:
            return parse_json(text)
        except ValueError:
            continue
    return None
