"""How nodes refuse an eth_getLogs request, in their own words: the wordings as data, one line a
provider, each read into one of four kinds the fetcher (indexer.fetch) treats apart.

- `CAP`: a hard cap on the blocks a range may span. Remembered for this node, never asked past
  again. Some providers name it ("limited to a 10,000 range"), some do not ("block range is too
  wide"): then the range is halved and the half is remembered as the cap until a rare probe.
- `TRY_RANGE`: the answer holds too many logs, and the node names a range that would work. That
  range is asked once; later ranges keep to its size until a rare probe.
- `TOO_MUCH`: too many logs, or too slow, with no range named: halve, and keep to the half.
- `NODE_BEHIND`: the node (one backend of a load balancer) has not seen the blocks yet
  ("block is out of range", "unknown block", "header not found"): the same request is retried
  later, and nothing shrinks.

A new provider is one more `Wording`; tests/indexer/test_refusals.py reads every text. The order
matters: the first wording that matches wins, so a provider's own lines come before the generic
ones at the end, which catch texts nobody has written down yet.
"""

from __future__ import annotations

import enum
import json
import re
from dataclasses import dataclass
from typing import Any


class RefusalKind(enum.StrEnum):
    CAP = "cap"
    TRY_RANGE = "try_range"
    TOO_MUCH = "too_much"
    NODE_BEHIND = "node_behind"


@dataclass(frozen=True)
class Wording:
    provider: str
    kind: RefusalKind
    pattern: re.Pattern[str]  # named groups: `cap` (blocks), `first` and `last` (a range to try)


def _wording(provider: str, kind: RefusalKind, pattern: str) -> Wording:
    return Wording(provider, kind, re.compile(pattern, re.IGNORECASE | re.DOTALL))


_N = r"(?:0x[0-9a-f]+|\d[\d,_]*k?)"  # a block number or count, hex or decimal ("10,000", "2K")
_RANGE = rf"\[\s*(?P<first>{_N})\s*,\s*(?P<last>{_N})\s*\]"

CAP, TRY_RANGE, TOO_MUCH, NODE_BEHIND = RefusalKind

WORDINGS: tuple[Wording, ...] = (
    # ---- a range to try (checked first: their texts may also name a block count that is no cap)
    _wording("Alchemy", TRY_RANGE, rf"log response size exceeded.*should work: {_RANGE}"),
    _wording("Infura, Tenderly", TRY_RANGE, rf"returned more than {_N} results.*?{_RANGE}"),
    _wording("dRPC", TRY_RANGE, rf"exceeds max results {_N}, retry with the range (?P<first>{_N})-(?P<last>{_N})"),
    # ---- a hard cap
    _wording("Alchemy", CAP, rf"up to an? (?P<cap>{_N}) block range.*should work: {_RANGE}"),
    _wording("thirdweb", CAP, rf"range {_N} is bigger than range limit (?P<cap>{_N})"),
    _wording("QuickNode", CAP, rf"eth_getLogs is limited to an? (?P<cap>{_N})(?: block)? range"),
    _wording("BlastAPI", CAP, rf"maximum allowed number of requested blocks is (?P<cap>{_N})"),
    _wording("Cloudflare", CAP, rf"range too large\. max range: (?P<cap>{_N})"),
    _wording("Base", CAP, rf"limit the query to at most (?P<cap>{_N}) blocks"),
    _wording("PublicNode", CAP, rf"exceed maximum block range: (?P<cap>{_N})"),
    _wording("OP proxyd", CAP, rf"block range greater than (?P<cap>{_N}) max"),
    _wording("Erigon", CAP, rf"block range too large, max range: (?P<cap>{_N})"),
    _wording("Morph", CAP, rf"max block range = (?P<cap>{_N})"),
    _wording("Infura", CAP, rf"range {_N} exceeds limit of (?P<cap>{_N})"),
    _wording("Ankr", CAP, r"block range is too wide"),
    _wording("Chainstack", CAP, r"block range limit exceeded"),
    _wording("Scroll", CAP, r"block range is bigger than maxblockrange"),
    # ---- the node lags behind the blocks asked for
    _wording("OP proxyd", NODE_BEHIND, r"block is out of range"),
    _wording("Avalanche", NODE_BEHIND, r"after last accepted block"),
    # ("safe block not found": a chain without that tag, no lag; startup.py says so)
    _wording("geth, reth", NODE_BEHIND, r"unknown block|header not found|(?<!safe )(?<!finalized )block not found|"
                                        r"could not find block|cannot query unfinalized data"),
    # ---- generic: what nobody has written down yet
    _wording("any", TRY_RANGE, rf"(?:try|use|retry with) (?:this |the )?(?:block )?range:? {_RANGE}"),
    _wording("any", CAP, r"(?:max(?:imum)?|limit(?:ed to)?)(?: block)? range(?: is| of|:)? ?(?P<cap>\d[\d,_]*k?)\b"),
    _wording("any", TOO_MUCH, r"too many (?:results|logs)|returned more than|response size|max(?:imum)? results|"
                              r"query timeout|exceeds? (?:the )?(?:max|limit)"),
    _wording("any", CAP, r"block range|range (?:is )?too (?:large|wide|big|high)|too many blocks|range limit"),
)


def _first_match(error: dict[str, Any]) -> tuple[Wording, re.Match[str]] | None:
    text = error_text(error)
    for wording in WORDINGS:
        if match := wording.pattern.search(text):
            return wording, match
    return None


@dataclass(frozen=True)
class Refusal:
    """A refusal read: its kind, who words it so, and what it names (None where it does not)."""

    kind: RefusalKind
    provider: str
    cap: int | None = None
    first: int | None = None  # a range to try
    last: int | None = None


def number(text: str) -> int:
    """A number as nodes write them: hex, or decimal with separators, maybe in thousands ("2K")."""
    text = text.strip()
    if text.lower().startswith("0x"):
        return int(text, 16)
    digits = text.replace(",", "").replace("_", "")
    return int(digits[:-1]) * 1000 if digits[-1:].lower() == "k" else int(digits)


def error_text(error: dict[str, Any]) -> str:
    """The message and the data of a JSON-RPC error object, as one text to read."""
    data = error.get("data")
    return f"{error.get('message', '')} {json.dumps(data) if data is not None else ''}"


def read_refusal(error: dict[str, Any]) -> Refusal | None:
    """The refusal a JSON-RPC error object words, or None when it is no refusal of a range."""
    found = _first_match(error)
    if found is None:
        return None
    wording, match = found
    groups = match.groupdict()
    first, last = groups.get("first"), groups.get("last")
    data = error.get("data")
    if isinstance(data, dict) and {"from", "to"} <= data.keys():  # Infura names the range in `data` too
        first, last = str(data["from"]), str(data["to"])
    cap = groups.get("cap")
    kind = RefusalKind.TRY_RANGE if wording.kind == RefusalKind.TOO_MUCH and last is not None else wording.kind
    return Refusal(kind, wording.provider, cap=number(cap) if cap else None,
                   first=number(first) if first else None, last=number(last) if last else None)
