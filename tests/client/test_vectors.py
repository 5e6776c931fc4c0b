"""The Python client against clients/test-vectors.json, the vectors the TypeScript client is held
to as well (clients/typescript/test/vectors.test.ts): calldata of every helper, every validation
message, canonical JSON and hashes, parsed metadata URIs, quotes, the read client's requests,
answers and errors against a fake service (httpx's MockTransport), and the websocket bookkeeping
(EventFold) over scripted connections."""

from __future__ import annotations

import dataclasses
import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from bounty_client import metadata
from bounty_client.deployment import Deployment
from bounty_client.errors import (
    BountyClientError,
    ConfigurationError,
    RequestFailedError,
    ResponseError,
    ValidationError,
)
from bounty_client.events import EventFold, LiveEvent, Snapshot
from bounty_client.quote import QuoteConfig, quote_create_amount
from bounty_client.read import ReadClient
from bounty_client.transactions import TransactionBuilder, UnsignedTransaction

VECTORS = json.loads((Path(__file__).resolve().parents[2] / "clients" / "test-vectors.json").read_text("utf-8"))
DEPLOYMENT = VECTORS["deployment"]
BUILDER = TransactionBuilder(Deployment(DEPLOYMENT["chainId"], DEPLOYMENT["contractAddress"],
                                        DEPLOYMENT["usdcAddress"]))


def _snake(name: str) -> str:
    return re.sub(r"[A-Z]", lambda match: "_" + match.group().lower(), name)


def _value(value: Any) -> Any:
    """A vector's argument as Python takes it: {"bigint": "..."} is an int, object keys snake_case."""
    if isinstance(value, dict) and set(value) == {"bigint"}:
        return int(value["bigint"])
    if isinstance(value, dict):
        return {_snake(key): _value(member) for key, member in value.items()}
    return value


def _call(name: str, args: list[Any]) -> UnsignedTransaction:
    method = getattr(BUILDER, _snake(name))
    values = [_value(arg) for arg in args]
    if len(values) == 1 and isinstance(values[0], dict):
        return method(**values[0])  # type: ignore[no-any-return]
    return method(*values)  # type: ignore[no-any-return]


def _id(case: dict[str, Any]) -> str:
    return f"{case['call']}({json.dumps(case['args'], ensure_ascii=False)[1:-1][:60]})"


@pytest.mark.parametrize("case", VECTORS["transactions"], ids=_id)
def test_each_helper_gives_the_vectors_transaction(case: dict[str, Any]) -> None:
    assert _call(case["call"], case["args"]) == case["expected"]


@pytest.mark.parametrize("case", VECTORS["validation"], ids=_id)
def test_each_bad_input_gives_the_vectors_message(case: dict[str, Any]) -> None:
    with pytest.raises(ValidationError) as raised:
        _call(case["call"], case["args"])
    assert str(raised.value) == case["error"]


@pytest.mark.parametrize("case", VECTORS["canonicalJson"], ids=lambda case: case["json"][:40])
def test_canonical_json_its_hash_and_data_uri_match_the_vectors(case: dict[str, Any]) -> None:
    value = metadata.parse_json(case["json"])
    assert metadata.canonical_json(value) == case["canonical"]
    assert metadata.metadata_hash(value) == case["hash"]
    assert metadata.metadata_to_data_uri(value) == case["dataUri"]


def vector_uri(uri: str | list[Any]) -> str:
    """A vector's metadata URI: a string, or parts joined (a string, or {"repeat": s, "times": n})."""
    if isinstance(uri, str):
        return uri
    return "".join(part if isinstance(part, str) else part["repeat"] * part["times"] for part in uri)


@pytest.mark.parametrize("case", VECTORS["parseMetadataUri"], ids=lambda case: json.dumps(case["uri"])[:60])
def test_parsing_a_metadata_uri_matches_the_vectors(case: dict[str, Any]) -> None:
    assert metadata.parse_metadata_uri(vector_uri(case["uri"])) == case["value"]


@pytest.mark.parametrize("case", VECTORS["quotes"], ids=lambda case: str(case["rewardAmount"])[:20])
def test_quotes_match_the_vectors(case: dict[str, Any]) -> None:
    rates = case.get("config")
    config = QuoteConfig(post_fee_bps=rates["postFeeBps"], submission_bond_bps=rates["submissionBondBps"]) if rates \
        else None
    if "error" in case:
        with pytest.raises(ValidationError) as raised:
            quote_create_amount(case["rewardAmount"], config)
        assert str(raised.value) == case["error"]
        return
    quote = quote_create_amount(case["rewardAmount"], config)
    assert {name: str(getattr(quote, _snake(name))) for name in case["expected"]} == case["expected"]


def test_the_vectors_cover_every_helper_and_message() -> None:
    calls = {case["call"] for case in VECTORS["transactions"]}
    assert calls == {"approveUsdc", "createBounty", "submit", "dispute", "finalize", "advanceReviewCursor",
                     "refundExpired", "refundSubmissionBond", "cancelResolvedDispute", "withdraw", "withdrawTo",
                     "resolveDispute"}
    messages = {case["error"] for case in VECTORS["validation"]}
    assert {"invalid address", "bytes32 value must be 32 bytes", "number must be a safe uint",
            "uint256 value out of range", "uint64 value out of range"} <= messages


READ = VECTORS["read"]
READ_CASES = [pytest.param(case, id=f"{group}: {case['name']}")
              for group in ("deployment", "urls", "pages", "errors") for case in READ[group]]
READ_ERRORS: dict[str, type[BountyClientError]] = {
    "request": RequestFailedError, "response": ResponseError, "configuration": ConfigurationError,
}
ITERATORS = {"bounties": "iter_bounties", "submissions": "iter_submissions", "disputes": "iter_disputes"}
EMPTY_PAGE = {"items": [], "total": 0, "limit": 50, "cursor": None, "next_cursor": None}


def _fake_service(case: dict[str, Any], requested: list[str]) -> httpx.MockTransport:
    """Answers the vector's `responses` in order, or else the read section's default answers."""
    answers: Iterator[dict[str, Any]] | None = iter(case["responses"]) if "responses" in case else None

    def answer(request: httpx.Request) -> httpx.Response:
        requested.append(str(request.url))
        if answers is not None:
            given = next(answers, None)
            assert given is not None, f"a request the vector does not expect: {request.url}"
        elif request.url.path == "/health":
            given = {"body": READ["health"]}
        else:
            given = {"body": EMPTY_PAGE if request.url.path.count("/") == 1 else {}}
        text = given["text"] if "text" in given else json.dumps(given["body"])
        headers = {"Content-Type": given.get("contentType", "application/json")}
        return httpx.Response(given.get("status", 200), content=text.encode("utf-8"), headers=headers)

    return httpx.MockTransport(answer)


def _read_client(options: dict[str, Any], transport: httpx.MockTransport) -> ReadClient:
    given = options.get("deployment") or {}
    return ReadClient(READ["baseUrl"], chain_id=given.get("chainId"), contract_address=given.get("contractAddress"),
                      qualify=options.get("qualify", True), http_client=httpx.Client(transport=transport))


def _read(client: ReadClient, call: str, args: dict[str, Any]) -> Any:
    """The vector's call in Python's terms, its answer as JSON (iterators collected)."""
    method = getattr(client, ITERATORS.get(call, _snake(call)))
    if "id" in args:
        result = method(args["id"])
    else:
        result = method(**{"direction" if name == "dir" else _snake(name): value for name, value in args.items()})
    if isinstance(result, Iterator):
        return list(result)
    if isinstance(result, Deployment):
        return {re.sub(r"_([a-z])", lambda match: match.group(1).upper(), name): value
                for name, value in dataclasses.asdict(result).items()}
    return result


@pytest.mark.parametrize("case", READ_CASES)
def test_the_read_client_requests_answers_and_raises_as_the_vectors_say(case: dict[str, Any]) -> None:
    requested: list[str] = []
    with _read_client(case["client"], _fake_service(case, requested)) as client:
        if "error" not in case:
            result = _read(client, case["call"], case["args"])
            if "result" in case:
                assert result == case["result"]
        else:
            expected = case["error"]
            with pytest.raises(READ_ERRORS[expected["kind"]]) as raised:
                _read(client, case["call"], case["args"])
            assert str(raised.value) == expected["message"]
            if isinstance(raised.value, RequestFailedError):
                error = raised.value
                assert (error.status, error.detail, error.url) == (expected["status"], expected["detail"],
                                                                   expected["url"])
    assert requested == case["urls"]


def test_the_read_vectors_cover_every_read_method() -> None:
    calls = {case["call"] for group in ("urls", "pages", "errors") for case in READ[group]}
    methods = {name for name in vars(ReadClient) if not name.startswith("_") and name != "close"}
    assert {ITERATORS.get(call, _snake(call)) for call in calls} == methods


EVENTS = VECTORS["events"]


@pytest.mark.parametrize("case", EVENTS["cases"], ids=lambda case: case["name"])
def test_the_event_fold_delivers_resumes_and_holds_what_the_vectors_say(case: dict[str, Any]) -> None:
    fold = EventFold(since=case["since"])
    urls: list[str] = []
    snapshots: list[Snapshot] = []
    events: list[LiveEvent] = []
    records: dict[str, dict[int, Any]] = {"bounty": {}, "submission": {}, "dispute": {}}
    for connection in case["connections"]:
        urls.append(fold.next_url(EVENTS["baseUrl"]))
        for message in connection["messages"]:
            delivered = fold.feed(message)
            if isinstance(delivered, Snapshot):
                snapshots.append(delivered)
                records = {"bounty": {b["id"]: b for b in delivered.bounties},
                           "submission": {s["id"]: s for s in delivered.submissions},
                           "dispute": {d["id"]: d for d in delivered.disputes}}
            elif isinstance(delivered, LiveEvent):
                events.append(delivered)
                if delivered.removed:
                    records[delivered.kind].pop(delivered.payload["id"])
                else:
                    records[delivered.kind][delivered.payload["id"]] = delivered.payload
        fold.connection_lost()
    urls.append(fold.next_url(EVENTS["baseUrl"]))

    assert urls == case["urls"]
    assert [{"seq": snapshot.seq, "position": snapshot.position,
             "bounties": [b["id"] for b in snapshot.bounties],
             "submissions": [s["id"] for s in snapshot.submissions],
             "disputes": [d["id"] for d in snapshot.disputes]} for snapshot in snapshots] == case["snapshots"]
    assert [{"type": e.type, "id": e.payload["id"], "seq": e.seq, "position": e.position}
            for e in events] == case["events"]
    assert {kind: {str(id_): record for id_, record in held.items()} for kind, held in records.items()} \
        == case["records"]
    assert fold.resume_from == case["resumeFrom"]
