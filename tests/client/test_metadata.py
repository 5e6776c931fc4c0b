"""Canonical JSON against JavaScript's JSON.stringify (run by node), data URIs and hashes."""

from __future__ import annotations

import base64
import json
import math
import random
import subprocess
from pathlib import Path
from typing import Any
from urllib.parse import quote

import pytest
from hypothesis import given
from hypothesis import strategies as st
from web3 import Web3

from bounty_client import (
    UNDEFINED,
    canonical_json,
    metadata_hash,
    metadata_to_data_uri,
    parse_json,
    parse_metadata_uri,
)

PROJECT_DIR = Path(__file__).resolve().parents[2]

# Markers for values that JSON text cannot carry to node: {MARK: "undefined" | "NaN" | ...}.
MARK = "\u0000js"

# node sorts keys with the default Array.prototype.sort (UTF-16 code units), builds the
# key-sorted value, and answers the UTF-8 bytes of JSON.stringify and their keccak256
# (js-sha3, from the project's npm packages).
NODE_SCRIPT = r"""
const { keccak256 } = require("js-sha3");
const marked = v => v !== null && typeof v === "object" && !Array.isArray(v)
  && Object.keys(v).length === 1 && Object.prototype.hasOwnProperty.call(v, "\u0000js");
const special = { undefined: undefined, NaN: NaN, Infinity: Infinity, "-Infinity": -Infinity };
const revive = v => Array.isArray(v) ? v.map(revive)
  : marked(v) ? special[v["\u0000js"]]
  : v !== null && typeof v === "object"
    ? Object.fromEntries(Object.entries(v).map(([k, x]) => [k, revive(x)])) : v;
const sortKeys = v => Array.isArray(v) ? v.map(sortKeys)
  : v !== null && typeof v === "object"
    ? Object.fromEntries(Object.keys(v).sort().map(k => [k, sortKeys(v[k])])) : v;
const cases = JSON.parse(require("fs").readFileSync(0, "utf8")).map(revive);
process.stdout.write(JSON.stringify(cases.map(c => {
  const bytes = Buffer.from(JSON.stringify(sortKeys(c)), "utf8");
  return { json: bytes.toString("base64"), hash: "0x" + keccak256(bytes) };
})));
"""


def _to_wire(value: Any) -> Any:
    if value is UNDEFINED:
        return {MARK: "undefined"}
    if isinstance(value, float) and not math.isfinite(value):
        return {MARK: "NaN" if math.isnan(value) else ("Infinity" if value > 0 else "-Infinity")}
    if isinstance(value, dict):
        return {key: _to_wire(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [_to_wire(item) for item in value]
    return value


def javascript_stringify(cases: list[Any]) -> list[tuple[bytes, str]]:
    """JSON.stringify of each key-sorted case, as UTF-8 bytes, and its keccak256, computed by node."""
    wire = json.dumps([_to_wire(case) for case in cases], ensure_ascii=True, allow_nan=False)
    result = subprocess.run(
        ["node", "-e", NODE_SCRIPT], input=wire.encode("ascii"), capture_output=True, check=True, timeout=60,
        cwd=PROJECT_DIR,
    )
    return [(base64.b64decode(item["json"]), item["hash"]) for item in json.loads(result.stdout)]


HANDWRITTEN: list[Any] = [
    {"b": 1, "a": 2, "c": {"z": [3, 2, 1], "y": None}},
    {"é": "ü", "e": "ß", "z": "日本語", "A": "Ω"},
    {"\U0001f600": "astral key", "\uffff": "last BMP", "\ue000": "private use", "a": "😀 in a value 𝄞"},
    {"quote": '"', "backslash": "\\", "controls": "\b\f\n\r\t\u0000\u001f\u007f", "slash": "/",
     "separators": "\u2028\u2029", "lone": "\ud800 and \udfff", "pair": "\ud83d\ude00"},
    {"10": "ten", "2": "two", "0": "zero", "01": "leading zero", "-1": "minus", "b": 1, "1.5": "x",
     "4294967294": "largest index", "4294967295": "not an index", "A": 0},
    {"ints": [0, 1, -1, 42, 2**53 - 1, -(2**53 - 1)]},
    {"floats": [1.5, 0.1, -0.0, 0.0, 1e21, 1e20, 1e-7, 1e-6, 123.456, -2.5e-10, 5e-324,
                1.7976931348623157e308, 100.0, 0.000001234, 1 / 3, 2.0**70]},
    {"not finite": [math.nan, math.inf, -math.inf], "also": math.nan},
    {"gone": UNDEFINED, "kept": None, "nested": {"gone": UNDEFINED}, "array": [UNDEFINED, 1]},
    {"deep": [[[{"x": [{}], "y": []}]]], "empty": {}, "list": [], "string": ""},
    {"bools": [True, False], "__proto__": "own key", "constructor": 1},
    [3, {"b": 2, "a": 1}, "x"],
    "just a string",
    12.5,
    None,
    True,
    ("tuple", "as", "array"),
]


def _random_string(rng: random.Random) -> str:
    pools = ["abcXYZ019 ", "\"\\/\b\f\n\r\t\x00\x1f\x7f", "éüßΩж日本", "\U0001f600\U0001d11e\U00010000\U0010ffff",
             "\ud800\udbff\udc00\udfff", "\u2028\u2029\ufeff\uffff\ue000"]
    return "".join(rng.choice(rng.choice(pools)) for _ in range(rng.randint(0, 8)))


def _random_number(rng: random.Random) -> int | float:
    kind = rng.randrange(5)
    if kind == 0:
        return rng.randint(-(2**53 - 1), 2**53 - 1)
    if kind == 1:
        return rng.randint(-1000, 1000)
    if kind == 2:
        return rng.uniform(-1e3, 1e3)
    if kind == 3:
        return rng.choice([-1, 1]) * rng.random() * 10.0 ** rng.randint(-30, 30)
    return rng.choice([-1, 1]) * 10.0 ** rng.randint(-325, 308)


def _random_value(rng: random.Random, depth: int) -> Any:
    kind = rng.randrange(8 if depth < 4 else 5)
    if kind == 0:
        return rng.choice([None, True, False])
    if kind in (1, 2):
        return _random_number(rng)
    if kind in (3, 4):
        return _random_string(rng)
    if kind == 5:
        return [_random_value(rng, depth + 1) for _ in range(rng.randint(0, 4))]
    return {
        rng.choice([_random_string(rng), str(rng.randint(0, 20))]): _random_value(rng, depth + 1)
        for _ in range(rng.randint(0, 5))
    }


# Keys that UTF-16 code units (JavaScript's default sort) and code points (Python's sorted())
# order differently: a character above U+FFFF is a surrogate pair, D800-DBFF, to JavaScript,
# so it sorts before U+E000-U+FFFF and before a lone low surrogate (DC00-DFFF), although its
# code point is larger. Array-index keys still come first, as in every JavaScript object.
KEY_ORDER_VECTORS: list[tuple[Any, str]] = [
    ({"\ue000": 1, "\U0001f600": 2}, '{"\U0001f600":2,"\ue000":1}'),
    ({"\uffff": 1, "\U0001f600": 2, "\ue000": 3, "a": 4, "\ud7ff": 5},
     '{"a":4,"\ud7ff":5,"\U0001f600":2,"\ue000":3,"\uffff":1}'),
    ({"\U0001f600": 1, "\U0001d11e": 2, "\U00010000": 3, "\U0010ffff": 4, "\ufb01": 5},
     '{"\U00010000":3,"\U0001d11e":2,"\U0001f600":1,"\U0010ffff":4,"\ufb01":5}'),
    ({"x\uff01": 1, "x\U0001f600y": 2, "x": 3, "x\U0001f600": 4},
     '{"x":3,"x\U0001f600":4,"x\U0001f600y":2,"x\uff01":1}'),
    # F601 is wrong here: ruff takes two different lone surrogates for one key.
    ({"\udc00": "lone low", "\U0001f600": "pair", "\ud800": "lone high"},  # noqa: F601
     '{"\\ud800":"lone high","\U0001f600":"pair","\\udc00":"lone low"}'),
    ({"outer": {"\uffff": [{"\ue000": 1, "\U0001f600": 2}], "\U0001f389": None}, "\ufeff": True},
     '{"outer":{"\U0001f389":null,"\uffff":[{"\U0001f600":2,"\ue000":1}]},"\ufeff":true}'),
    ({"\ue000": 0, "7": 0, "\U0001f600": 0, "10": 0}, '{"7":0,"10":0,"\U0001f600":0,"\ue000":0}'),
]


@pytest.mark.parametrize(("value", "expected"), KEY_ORDER_VECTORS)
def test_keys_sort_by_utf16_code_units_as_javascripts_default_sort(value, expected):
    assert canonical_json(value) == expected
    assert metadata_hash(value) == "0x" + Web3.keccak(expected.encode("utf-8")).hex()


def test_key_order_vectors_equal_node_byte_for_byte_with_the_same_hash():
    values = [value for value, _ in KEY_ORDER_VECTORS]
    for value, (javascript, javascript_hash) in zip(values, javascript_stringify(values), strict=True):
        assert canonical_json(value).encode("utf-8") == javascript, value
        assert metadata_hash(value) == javascript_hash, value


def test_canonical_json_is_byte_equal_to_javascript_for_a_corpus():
    rng = random.Random(13)
    corpus = HANDWRITTEN + [{"case": _random_value(rng, 0)} for _ in range(400)]
    expected = javascript_stringify(corpus)
    for case, (javascript, javascript_hash) in zip(corpus, expected, strict=True):
        assert canonical_json(case).encode("utf-8") == javascript, case
        assert metadata_hash(case) == javascript_hash, case


def test_canonical_json_examples():
    assert canonical_json({"b": [1, 2.5, "x"], "a": {"d": None, "c": True}}) == (
        '{"a":{"c":true,"d":null},"b":[1,2.5,"x"]}'
    )
    assert canonical_json({"é": "日本"}) == '{"é":"日本"}'
    assert canonical_json({"10": 0, "9": 0, "a": 0, "1a": 0}) == '{"9":0,"10":0,"1a":0,"a":0}'
    assert canonical_json([1e21, 1e-7, -0.0, 0.1]) == "[1e+21,1e-7,0,0.1]"


def test_undefined_is_left_out_of_objects_and_is_null_in_arrays():
    assert canonical_json({"a": UNDEFINED, "b": None}) == '{"b":null}'
    assert canonical_json([UNDEFINED]) == "[null]"
    with pytest.raises(TypeError):
        canonical_json(UNDEFINED)


@pytest.mark.parametrize("value", [2**53, -(2**53), 10**30])
def test_canonical_json_refuses_integers_javascript_cannot_hold(value):
    with pytest.raises(ValueError, match="pass it as a string"):
        canonical_json({"amount": value})


@pytest.mark.parametrize("value", [{1: "int key"}, {"set": {1, 2}}, b"bytes", object(), {"b": b"x"}])
def test_canonical_json_refuses_values_without_a_json_form(value):
    with pytest.raises(TypeError):
        canonical_json(value)


def test_metadata_to_data_uri_holds_the_canonical_json_unencoded():
    assert metadata_to_data_uri({"title": "Fix #1 ✓", "a": 1}) == 'data:application/json,{"a":1,"title":"Fix #1 ✓"}'


def test_metadata_hash_is_the_keccak256_of_the_canonical_utf8_bytes():
    metadata = {"title": "Fix 🐛", "reward": "100000000", "tags": ["a", "b"]}
    assert metadata_hash(metadata) == Web3.keccak(text=canonical_json(metadata)).to_0x_hex()
    assert metadata_hash(metadata) == metadata_hash(dict(reversed(list(metadata.items()))))
    assert metadata_hash({}) == "0x" + Web3.keccak(b"{}").hex()


METADATA: dict[str, Any] = {"title": "Ünïcode 😀", "text": "50% off & more, #1?", "n": 1}


@pytest.mark.parametrize(
    "uri",
    [
        metadata_to_data_uri(METADATA),
        "data:application/json," + quote(canonical_json(METADATA), safe=""),
        "data:application/json;base64," + base64.b64encode(canonical_json(METADATA).encode()).decode(),
        "data:application/json;base64," + base64.b64encode(canonical_json(METADATA).encode()).decode().rstrip("="),
        "data:application/json;charset=utf-8," + canonical_json(METADATA),
        "DATA:Application/JSON;charset=UTF-8;base64," + base64.b64encode(canonical_json(METADATA).encode()).decode(),
        'data:application/json, {"n": 1, "text": "50% off & more, #1?", "title": "Ünïcode 😀"} ',
    ],
    ids=["raw", "percent-encoded", "base64", "base64-unpadded", "charset", "case", "whitespace"],
)
def test_parse_metadata_uri_reads_every_inline_form(uri):
    assert parse_metadata_uri(uri) == METADATA


@pytest.mark.parametrize(
    "uri",
    [
        "ipfs://bafybeigdyrzt5sfp7udm7hu76uh7y26nf3efuylqabf3oclgtqy55fbzdi",
        "https://example.com/m.json",
        "data:text/plain,{}",
        "data:application/json",
        "data:application/json,{not json",
        "data:application/json,NaN",
        'data:application/json,{"a":Infinity}',
        "data:application/json;base64,!!!",
        "data:application/json;base64," + base64.b64encode(b"\xff\xfe").decode(),
        "data:application/json,%FF",
        "",
        None,
        42,
    ],
)
def test_parse_metadata_uri_returns_none_for_anything_else(uri):
    assert parse_metadata_uri(uri) is None


def test_parse_json_reads_numbers_as_javascript_does():
    assert parse_json("[9007199254740991, 9007199254740993, 1e400, -0]") == [2**53 - 1, 2.0**53, math.inf, 0]
    assert canonical_json(parse_json("[9007199254740993, 1e400]")) == "[9007199254740992,null]"
    with pytest.raises(ValueError, match="NaN is not JSON"):
        parse_json("[NaN]")


def test_a_percent_sign_in_raw_json_is_read_raw():
    assert parse_metadata_uri('data:application/json,{"p":"%41"}') == {"p": "%41"}


json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**53 - 1), 2**53 - 1) | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=6), inner, max_size=4),
    max_leaves=12,
)


@given(value=json_values)
def test_a_data_uri_parses_back_to_its_metadata(value):
    assert parse_metadata_uri(metadata_to_data_uri(value)) == value


@given(value=json_values)
def test_canonical_json_parses_back_to_the_same_value_and_is_a_fixed_point(value):
    text = canonical_json(value)
    assert parse_json(text) == value
    assert canonical_json(parse_json(text)) == text
