"""Both clients' metadata URI parsers against extremes: nesting far past the bound, sizes around
it, invalid UTF-8, odd percent escapes, huge base64. Each gives only its documented result (a JSON
value or None/null, never an exception), and the two give the same one: hypothesis drives the
Python parser, and a seeded corpus of extremes goes through both, the TypeScript one compiled
from clients/typescript/src by esbuild and run by node."""

from __future__ import annotations

import base64
import json
import math
import random
import subprocess
from pathlib import Path
from typing import Any
from urllib.parse import quote

from hypothesis import given
from hypothesis import strategies as st

from bounty_client import MAX_INLINE_JSON_BYTES, MAX_INLINE_JSON_DEPTH, canonical_json, parse_metadata_uri
from tests.client.test_metadata import _random_value

TYPESCRIPT_CLIENT = Path(__file__).resolve().parents[2] / "clients" / "typescript"
MAX = MAX_INLINE_JSON_BYTES

# node compiles src/metadata.ts (esbuild, in memory), reads a JSON array of URIs on stdin and
# answers, for each, what parseMetadataUri returned or what it threw.
NODE_SCRIPT = r"""
import { build } from "esbuild";
import { readFileSync } from "node:fs";
const built = await build({ entryPoints: ["src/metadata.ts"], bundle: true, format: "esm", platform: "node",
                            write: false, logLevel: "warning" });
const code = Buffer.from(built.outputFiles[0].text).toString("base64");
const { parseMetadataUri } = await import(`data:text/javascript;base64,${code}`);
const answers = JSON.parse(readFileSync(0, "utf8")).map((uri) => {
  try {
    return { value: parseMetadataUri(uri) };
  } catch (error) {
    return { threw: String(error) };
  }
});
process.stdout.write(JSON.stringify(answers));
"""

PREFIXES = ["data:application/json,", "data:application/json;base64,", "data:application/json;charset=utf-8,",
            "DATA:Application/JSON;Charset=UTF-8;BASE64,", "data:application/json\u00a0;base64\ufeff,",
            "data:application/json;base64", "data:text/plain,", "data:,", "ipfs://"]
ODD_ESCAPES = ["%", "%4", "%zz", "%%41", "%C3", "%C3%28", "%ED%A0%80", "%F4%90%80%80", "%C0%AF", "%00", "%EF%BB%BF",
               "%5B", "%5D", "%7B", "%22", "%5C", "%2", "%3D", "%20", "%E2%80%A8"]
PIECES = ["[", "]", "{", "}", '{"a":', '"', "\\", '\\"', ",", ":", "1", " ", "\u00e9", "\U0001f600", "\ud800",
          "\udc00", "\ufeff", "\x00", "\x1c", "null", "1e400", "NaN", "-0", "9007199254740993"]


def is_json_value(value: Any, depth: int = 0) -> bool:
    """Whether `value` is what parse_metadata_uri documents: a JSON value, nested at most the bound."""
    if value is None or isinstance(value, bool | int | float | str):
        return True
    if depth >= MAX_INLINE_JSON_DEPTH:
        return False
    if isinstance(value, list):
        return all(is_json_value(item, depth + 1) for item in value)
    return isinstance(value, dict) and all(isinstance(key, str) and is_json_value(item, depth + 1)
                                           for key, item in value.items())


def b64(text: str) -> str:
    return base64.b64encode(text.encode("utf-8", "surrogatepass")).decode()


def deep(rng: random.Random) -> str:
    depth = rng.choice([MAX_INLINE_JSON_DEPTH - 1, MAX_INLINE_JSON_DEPTH, MAX_INLINE_JSON_DEPTH + 1, 1_000, 50_000,
                        rng.randrange(70_000)])
    opener = rng.choice(["[", '{"a":', '["]",'])
    closer = {"[": "]", '{"a":': "}", '["]",': "]"}[opener]
    return opener * depth + rng.choice(["1", '"x"', "", '"[[[[']) + closer * rng.choice([depth, 0, depth - 1])


def sized(rng: random.Random) -> str:
    """JSON text around the size bound, in UTF-8 bytes, with characters of 1 to 4 bytes."""
    filler = rng.choice(["a", "\u00e9", "\u20ac", "\U0001f600", "\ud800"])
    per = len(filler.encode("utf-8", "surrogatepass"))
    count = (MAX - 4) // per + rng.randint(-2, 2)
    return '["' + filler * count + '"]' + " " * rng.randint(0, 3)


def noise(rng: random.Random) -> str:
    return "".join(rng.choice(rng.choice([PIECES, ODD_ESCAPES])) for _ in range(rng.randint(0, 40)))


def huge_base64(rng: random.Random) -> str:
    alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"
    body = "".join(rng.choice(alphabet) for _ in range(64)) * rng.choice([1_365, 1_366, 4_200])
    return body + "=" * rng.randint(0, 3)


def extreme_uris(seed: int, count: int) -> list[str]:
    """`count` URIs: a prefix, then a payload of one kind of extreme, written raw, percent-encoded,
    base64 or percent-encoded base64."""
    rng = random.Random(seed)
    uris = []
    for _ in range(count):
        kind = rng.randrange(6)
        if kind == 0:
            text = deep(rng)
        elif kind == 1:
            text = sized(rng)
        elif kind == 2:
            text = noise(rng)
        elif kind == 3:
            text = canonical_json(_random_value(rng, 0))
        elif kind == 4:
            uris.append(rng.choice(PREFIXES) + huge_base64(rng))
            continue
        else:
            raw = bytes(rng.randrange(256) for _ in range(rng.randint(1, 40)))
            uris.append(rng.choice(PREFIXES) + rng.choice([base64.b64encode(raw).decode(), quote(raw, safe="")]))
            continue
        form = rng.randrange(4)
        payload = (text, quote(text.encode("utf-8", "surrogatepass"), safe=""), b64(text),
                   quote(b64(text), safe=""))[form]
        prefix = PREFIXES[form // 2] if rng.random() < 0.8 else rng.choice(PREFIXES)
        uris.append(prefix + payload + (rng.choice(ODD_ESCAPES) if rng.random() < 0.1 else ""))
    return uris


def typescript_answers(uris: list[str]) -> list[dict[str, Any]]:
    result = subprocess.run(["node", "--input-type=module", "-e", NODE_SCRIPT], input=json.dumps(uris).encode(),
                            capture_output=True, cwd=TYPESCRIPT_CLIENT, timeout=300)
    assert result.returncode == 0, result.stderr.decode()[-3_000:]
    # JSON.stringify writes a number above 2**53 - 1 in digits; it is the float JavaScript held.
    answers: list[dict[str, Any]] = json.loads(
        result.stdout, parse_int=lambda text: int(text) if abs(int(text)) <= 2**53 - 1 else float(text))
    return answers


def as_javascript_holds_it(value: Any) -> Any:
    """A parsed value as it comes back from node's JSON.stringify: infinities as null."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, list):
        return [as_javascript_holds_it(item) for item in value]
    if isinstance(value, dict):
        return {key: as_javascript_holds_it(item) for key, item in value.items()}
    return value


extremes = st.builds(lambda prefix, parts: prefix + "".join(parts), st.sampled_from(PREFIXES),
                     st.lists(st.sampled_from(PIECES + ODD_ESCAPES) | st.text(max_size=8)
                              | st.builds(str.__mul__, st.sampled_from(["[", "%5B", "W1tb", "{\"a\":", "ICAg"]),
                                          st.integers(0, 70_000)),
                              max_size=6))


@given(uri=extremes)
def test_the_python_parser_answers_any_extreme_with_a_json_value_or_none(uri: str) -> None:
    assert is_json_value(parse_metadata_uri(uri))


def test_both_parsers_answer_the_same_for_a_corpus_of_extremes() -> None:
    uris = extreme_uris(seed=41, count=600)
    for uri, answer in zip(uris, typescript_answers(uris), strict=True):
        value = parse_metadata_uri(uri)
        assert is_json_value(value)
        assert answer == {"value": as_javascript_holds_it(value)}, uri[:300]
