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
import enum
import json
import math
import re
from collections.abc import Mapping, Sequence
from itertools import accumulate
from typing import Any, Final, Literal, TypeAlias

from bounty_client.abi import keccak256

MAX_SAFE_INTEGER: Final = 2**53 - 1
DATA_URI_PREFIX: Final = "data:application/json,"
MAX_INLINE_JSON_BYTES: Final = 64 * 1024
"""The most UTF-8 bytes of JSON text an inline metadata URI is read for, once decoded (percent
escapes or base64 undone): past it, `parse_metadata_uri` reads the URI as not inline JSON."""
MAX_INLINE_JSON_DEPTH: Final = 64
"""The deepest nesting of arrays and objects read as inline metadata (`[]` is 1 deep). Metadata
is a flat document; 64 keeps every recursive reader of the value (`json`'s scanner,
`canonical_json`, `json.dumps` with an indent, a template rendering it deep in a request) far
below Python's recursion limit of 1,000 frames, and JavaScript's `JSON.stringify` below its stack."""


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


# A string (its end optional, so that the scan never backtracks) or a run of anything but brackets
# and quotes: what is left once every match is removed is the brackets outside strings, in order.
_NOT_NESTING: Final = re.compile(r'"[^"\\]*(?:\\.[^"\\]*)*"?|[^"\[\]{}]+', re.DOTALL)
_NESTING: Final = {"[": 1, "{": 1, "]": -1, "}": -1}


def nests_deeper_than(text: str | bytes | bytearray, limit: int) -> bool:
    """Whether arrays and objects in `text` nest deeper than `limit`, found in one pass without
    parsing: exact for JSON; for anything else it counts at least as deep as a parser would go
    before failing. Bytes are read as Latin-1, one character a byte: the brackets, quotes and
    backslashes it looks for are ASCII, so any encoding of JSON (or bytes that are none) scans
    alike. The one scanner of the server and the clients (the indexer's node answers use it too)."""
    if not isinstance(text, str):
        text = bytes(text).decode("latin-1")
    brackets = _NOT_NESTING.sub("", text)
    if brackets.count("[") + brackets.count("{") <= limit:
        return False
    return max(accumulate(map(_NESTING.__getitem__, brackets))) > limit


def parse_json(text: str) -> JsonValue:
    """Parses JSON text as JavaScript's `JSON.parse` does: `NaN` and `Infinity` are refused,
    and an integer beyond +-(2**53 - 1) is read as the float JavaScript would hold, so that
    `canonical_json` gives what JavaScript gives for the same text.

    Raises `ValueError` for text that is not JSON, and for arrays and objects nested deeper than
    `MAX_INLINE_JSON_DEPTH` (checked before parsing, so that no depth reaches Python's recursion
    limit).
    """
    if nests_deeper_than(text, MAX_INLINE_JSON_DEPTH):
        raise ValueError(f"arrays and objects nest deeper than {MAX_INLINE_JSON_DEPTH}")
    parsed: JsonValue = json.loads(text, parse_constant=_refuse_constant, parse_int=_parse_int)
    return parsed


# What JavaScript's String.prototype.trim() strips (Python's str.strip() strips other characters).
_JS_WHITESPACE: Final = "\t\n\v\f\r \u00a0\u1680\u2000\u2001\u2002\u2003\u2004\u2005\u2006\u2007\u2008\u2009\u200a" \
                        "\u2028\u2029\u202f\u205f\u3000\ufeff"
_ESCAPE_RUN: Final = re.compile(r"(?:%[0-9A-Fa-f]{2})+")
_STRAY_PERCENT: Final = re.compile(r"%(?![0-9A-Fa-f]{2})")
_BASE64: Final = re.compile(r"[A-Za-z0-9+/]*={0,2}")
# The longest base64 of MAX_INLINE_JSON_BYTES, padded.
_MAX_BASE64_CHARS: Final = 4 * -(-MAX_INLINE_JSON_BYTES // 3)
# A percent escape is three characters for one byte: a payload more than three times as long as
# a bound cannot be within it once decoded, and is not decoded at all.
_ESCAPE_CHARS: Final = 3


def _decode_uri_component(text: str) -> str | None:
    """`text` with its percent escapes decoded as JavaScript's `decodeURIComponent` decodes them,
    or None where it throws: a `%` not followed by two hex digits, escapes that are not UTF-8."""
    if _STRAY_PERCENT.search(text):
        return None
    try:
        return _ESCAPE_RUN.sub(lambda run: bytes.fromhex(run.group().replace("%", "")).decode("utf-8"), text)
    except UnicodeDecodeError:
        return None


def _within_bytes(text: str) -> bool:
    """Whether `text` is at most MAX_INLINE_JSON_BYTES in UTF-8 (a lone surrogate counts 3, as in
    JavaScript); never encodes more than that many characters."""
    return len(text) <= MAX_INLINE_JSON_BYTES and len(text.encode("utf-8", "surrogatepass")) <= MAX_INLINE_JSON_BYTES


def _base64_text(payload: str) -> str | None:
    """The UTF-8 text held by the base64 `payload` (percent escapes and surrounding whitespace
    allowed), or None: not base64, not UTF-8 (a byte order mark is kept, and is not JSON), or
    more than MAX_INLINE_JSON_BYTES, which is known from the lengths before anything is decoded."""
    if len(payload) > _ESCAPE_CHARS * _MAX_BASE64_CHARS:
        return None
    encoded = _decode_uri_component(payload)
    if encoded is None:
        return None
    encoded = encoded.strip(_JS_WHITESPACE)
    padded = encoded + "=" * (-len(encoded) % 4)
    if len(padded) > _MAX_BASE64_CHARS or not _BASE64.fullmatch(padded):
        return None
    if len(padded) // 4 * 3 - padded.count("=") > MAX_INLINE_JSON_BYTES:
        return None
    try:
        return base64.b64decode(padded).decode("utf-8")
    except (binascii.Error, UnicodeDecodeError):
        return None


def _inline_texts(payload: str) -> list[str]:
    """The texts a raw or percent-encoded payload may hold, each within MAX_INLINE_JSON_BYTES."""
    texts = [payload]
    if "%" in payload and len(payload) <= _ESCAPE_CHARS * MAX_INLINE_JSON_BYTES:
        decoded = _decode_uri_component(payload)
        if decoded is not None:
            texts.append(decoded)
    return [text for text in texts if _within_bytes(text)]


def parse_metadata_uri(uri: object) -> JsonValue | None:
    """The JSON value held inline by a `data:application/json` URI, or None; never raises.

    Accepts the raw form that `metadata_to_data_uri` makes (`data:application/json,{...}`), the
    percent-encoded form (`data:application/json,%7B...`, decoded as JavaScript's
    `decodeURIComponent` does) and the base64 form (`data:application/json;base64,...`); media
    type parameters such as `;charset=utf-8` are allowed. Returns None for anything else: another
    scheme or media type (an `ipfs://` or `https://` URI is not inline), a payload that is not
    valid JSON, JSON text of more than `MAX_INLINE_JSON_BYTES` (64 KiB, in UTF-8, once decoded)
    or nested deeper than `MAX_INLINE_JSON_DEPTH` (64), or a non-string. A payload too long to
    hold 64 KiB once decoded is not decoded at all. The TypeScript client's `parseMetadataUri`
    gives the same answers (clients/test-vectors.json holds both to them).
    """
    if not isinstance(uri, str) or uri[:5].lower() != "data:":
        return None
    header, comma, payload = uri[5:].partition(",")
    if not comma:
        return None
    parameters = [part.strip(_JS_WHITESPACE).lower() for part in header.split(";")]
    if parameters[0] != "application/json":
        return None
    if parameters[-1] == "base64" and len(parameters) > 1:
        text = _base64_text(payload)
        texts = [] if text is None else [text]
    else:
        texts = _inline_texts(payload)
    for text in texts:
        try:
            return parse_json(text)
        except ValueError:
            continue
    return None
