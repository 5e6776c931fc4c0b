"""Every provider's refusal of an eth_getLogs range, read into its kind (indexer.refusals): one
test per text, as providers send it, and each kind as the client raises it."""

from __future__ import annotations

from typing import Any

import pytest

from indexer import refusals
from indexer.errors import NodeBehind, RangeTooLarge, RpcError, TransientRpcError
from indexer.refusals import WORDINGS, RefusalKind, read_refusal
from indexer.rpc import classify_error

CAP, TRY_RANGE, TOO_MUCH, NODE_BEHIND = RefusalKind


def _error(code: int | None, message: str, data: Any = None) -> dict[str, Any]:
    error: dict[str, Any] = {"code": code, "message": message}
    if data is not None:
        error["data"] = data
    return error


# (provider, error, kind, cap, range to try)
TEXTS: list[tuple[str, dict[str, Any], RefusalKind, int | None, tuple[int, int] | None]] = [
    ("alchemy-free-tier", _error(-32600, "Under the Free tier plan, you can make eth_getLogs requests with up to a 10 "
                                         "block range. Based on your parameters, this block range should work: "
                                         "[0x1, 0xa]"), CAP, 10, (1, 10)),
    ("alchemy-response-size", _error(-32602, "Log response size exceeded. You can make eth_getLogs requests with up to "
                                             "a 2K block range and no limit on the response size, or you can request "
                                             "any block range with a cap of 10K logs in the response. Based on your "
                                             "parameters, this block range should work: [0x10, 0x4a]"),
     TRY_RANGE, None, (0x10, 0x4A)),
    ("alchemy-2k-range", _error(-32600, "You can make eth_getLogs requests with up to a 2K block range. Based on your "
                                        "parameters, this block range should work: [0x1a30dfd, 0x1a30ff0]"),
     CAP, 2_000, (0x1A30DFD, 0x1A30FF0)),
    ("infura", _error(-32005, "query returned more than 10000 results. Try with this block range [0x20, 0x3f].",
                      {"from": "0x20", "limit": 10000, "to": "0x3f"}), TRY_RANGE, None, (0x20, 0x3F)),
    ("infura-data-only", _error(-32005, "query returned more than 10000 results",
                                {"from": "0x10", "limit": 10000, "to": "0x14"}), TRY_RANGE, None, (0x10, 0x14)),
    ("tenderly", _error(-32000, "Query returned more than 20000 results. Try with this block range [0x64,0xc8]"),
     TRY_RANGE, None, (100, 200)),
    ("thirdweb", _error(-32602, "invalid params", "range 20000 is bigger than range limit 2000"), CAP, 2_000, None),
    ("quicknode", _error(-32614, "eth_getLogs is limited to a 10,000 range"), CAP, 10_000, None),
    ("ankr", _error(-32600, "block range is too wide"), CAP, None, None),
    ("chainstack", _error(-32000, "Block range limit exceeded."), CAP, None, None),
    ("blastapi", _error(-32000, "Maximum allowed number of requested blocks is 10000"), CAP, 10_000, None),
    ("drpc", _error(-32602, "query exceeds max results 20000, retry with the range 22382105-22382515"),
     TRY_RANGE, None, (22_382_105, 22_382_515)),
    ("cloudflare", _error(-32047, "'fromBlock'-'toBlock' range too large. Max range: 800"), CAP, 800, None),
    ("base", _error(-32000, "please limit the query to at most 1000 blocks"), CAP, 1_000, None),
    ("publicnode", _error(-32000, "exceed maximum block range: 50000"), CAP, 50_000, None),
    ("op-proxyd-range", _error(-32602, "block range greater than 10000 max"), CAP, 10_000, None),
    ("op-proxyd-behind", _error(-32019, "block is out of range"), NODE_BEHIND, None, None),
    ("geth-unknown-block", _error(-32000, "unknown block"), NODE_BEHIND, None, None),
    ("geth-header-not-found", _error(-32000, "header not found"), NODE_BEHIND, None, None),
    ("avalanche", _error(-32000, "requested to block 0x1f after last accepted block 0x1e"), NODE_BEHIND, None, None),
    ("erigon", _error(-32005, "block range too large, max range: 1000"), CAP, 1_000, None),
    ("morph", _error(-32000, "block range is larger than max block range, block range = 5120, max block range = "
                             "5000"), CAP, 5_000, None),
    ("scroll", _error(-32000, "block range is bigger than maxBlockRange"), CAP, None, None),
    ("infura-range", _error(-32602, "range 1000000 exceeds limit of 10000"), CAP, 10_000, None),
    ("candle", _error(-32600, "block range too high"), CAP, None, None),
    ("query-timeout", _error(-32000, "query timeout exceeded"), TOO_MUCH, None, None),
    ("too-many-logs", _error(-32005, "too many logs in the answer"), TOO_MUCH, None, None),
]


@pytest.mark.parametrize(("error", "kind", "cap", "to_try"),
                         [pytest.param(*text[1:], id=text[0]) for text in TEXTS])
def test_each_providers_wording_is_read_into_its_kind(error: dict[str, Any], kind: RefusalKind, cap: int | None,
                                                      to_try: tuple[int, int] | None) -> None:
    refusal = read_refusal(error)
    assert refusal is not None
    assert refusal.kind == kind
    assert refusal.cap == cap
    assert (None if refusal.first is None or refusal.last is None else (refusal.first, refusal.last)) == to_try


@pytest.mark.parametrize(("error", "kind", "cap", "to_try"),
                         [pytest.param(*text[1:], id=text[0]) for text in TEXTS if text[2] != NODE_BEHIND])
def test_a_range_refusal_raises_range_too_large_with_what_it_names(error: dict[str, Any], kind: RefusalKind,
                                                                   cap: int | None,
                                                                   to_try: tuple[int, int] | None) -> None:
    exc = classify_error(error, "eth_getLogs")
    assert isinstance(exc, RangeTooLarge)
    assert (exc.refusal, exc.cap) == (kind, cap)
    assert exc.last == (to_try[1] if to_try else None)
    assert exc.code == error["code"]


@pytest.mark.parametrize("error", [pytest.param(text[1], id=text[0]) for text in TEXTS if text[2] == NODE_BEHIND])
@pytest.mark.parametrize("method", ["eth_getLogs", "eth_getBlockByNumber", "eth_call"])
def test_a_node_behind_the_block_is_transient_whatever_the_method(error: dict[str, Any], method: str) -> None:
    exc = classify_error(error, method)
    assert isinstance(exc, NodeBehind)
    assert isinstance(exc, TransientRpcError)
    assert exc.kind == "node_behind"


@pytest.mark.parametrize("error", [pytest.param(text[1], id=text[0]) for text in TEXTS
                                   if text[2] in (CAP, TRY_RANGE) and "timeout" not in text[1]["message"]])
def test_a_range_wording_answering_another_method_is_no_range_refusal(error: dict[str, Any]) -> None:
    assert not isinstance(classify_error(error, "eth_getBlockByNumber"), RangeTooLarge)


@pytest.mark.parametrize("error", [
    pytest.param(_error(-32005, "rate limit exceeded"), id="rate-limit"),
    pytest.param(_error(-32601, "the method eth_getLogs does not exist/is not available"), id="not-served"),
    pytest.param(_error(-32602, "invalid argument 0: hex string without 0x prefix"), id="invalid-argument"),
])
def test_what_is_no_refusal_of_a_range_is_not_read_as_one(error: dict[str, Any]) -> None:
    assert not isinstance(classify_error(error, "eth_getLogs"), RangeTooLarge)


def test_every_wording_has_a_text_that_it_reads(monkeypatch: pytest.MonkeyPatch) -> None:
    """A line of the table that no text above exercises is a line nobody has checked: without it,
    every text would be read as it is now."""
    as_read = [read_refusal(text[1]) for text in TEXTS]
    untested = []
    for wording in WORDINGS:
        monkeypatch.setattr(refusals, "WORDINGS", tuple(w for w in WORDINGS if w is not wording))
        if [read_refusal(text[1]) for text in TEXTS] == as_read:
            untested.append((wording.provider, str(wording.kind)))
    assert untested == [("any", "try_range"), ("any", "cap")], untested  # the generic fallbacks: below


@pytest.mark.parametrize(("message", "kind"), [
    ("please retry with this block range: [0x5, 0x9]", TRY_RANGE),
    ("maximum block range is 250", CAP),
    ("range limit reached", CAP),
])
def test_texts_nobody_wrote_down_fall_back_to_the_generic_wordings(message: str, kind: RefusalKind) -> None:
    refusal = read_refusal(_error(-32000, message))
    assert refusal is not None and (refusal.provider, refusal.kind) == ("any", kind)


def test_a_deterministic_error_keeps_its_code_and_data() -> None:
    exc = classify_error(_error(3, "execution reverted", "0x08c379a0"), "eth_call")
    assert type(exc) is RpcError
    assert (exc.code, exc.data) == (3, "0x08c379a0")
