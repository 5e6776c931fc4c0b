"""Helpers shared by the read API tests: requests, bodies, the record JSON we expect, seed data.

The expected JSON is built here from the model instances, independently of
`records.representation` (EIP-55 through eth_utils, timestamps through `isoformat`), so the
tests check the representation instead of repeating it.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any
from urllib.parse import urlencode

from django.http import HttpResponseBase
from django.test import Client
from eth_utils.address import to_checksum_address

from records.models import Bounty, Deployment, Dispute, Submission
from tests.factories import ACTIVE_CONTRACT, make_bounty, make_dispute, make_submission


def checksummed(address: str) -> str:
    """The EIP-55 form of an address in any case (eth_utils: independent of the service's own)."""
    return str(to_checksum_address(address))


OTHER_CHAIN_ID = 31337
OTHER_CONTRACT = "0x9fe46736679d2d9a65f0992f2272de9f3c7fa6e0"
UNKNOWN_CONTRACT = "0x" + "ab" * 20
HUGE = 2**70
UINT256_MAX = 2**256 - 1
RFC3339_Z = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d{1,6})?Z")
HASH = re.compile(r"0x[0-9a-f]{64}")
PAGE_MEMBERS = {"items", "total", "limit", "cursor", "next_cursor"}

BOUNTY_FIELDS = {
    "id", "chain_id", "contract_address", "prompt", "bounty_amount", "fee_amount", "bond_amount", "duration",
    "status", "poster", "deadline", "challenge_window", "metadata_uri", "metadata_hash", "tx_hash",
    "block_number", "log_index", "created_at",
}
SUBMISSION_FIELDS = {
    "id", "chain_id", "contract_address", "bounty_id", "tile_id", "content", "bond_amount", "review_deadline",
    "status", "claimant", "metadata_uri", "metadata_hash", "tx_hash", "block_number", "log_index", "created_at",
}
DISPUTE_FIELDS = {
    "id", "chain_id", "contract_address", "bounty_id", "submission_id", "challenger_id", "reason", "bond_amount",
    "status", "metadata_uri", "metadata_hash", "tx_hash", "block_number", "log_index", "created_at",
}

# One deployment half-named: a 400 on single-record, overview and parent-filter requests.
HALF_QUALIFIED: list[dict[str, str]] = [
    {"chain_id": "91342"},
    {"contract_address": ACTIVE_CONTRACT},
]
# (query parameters, the parameter the 400's detail must name)
MALFORMED_QUALIFIERS: list[tuple[dict[str, str], str]] = [
    ({"chain_id": "abc", "contract_address": ACTIVE_CONTRACT}, "chain_id"),
    ({"chain_id": "-1", "contract_address": ACTIVE_CONTRACT}, "chain_id"),
    ({"chain_id": "1.5", "contract_address": ACTIVE_CONTRACT}, "chain_id"),
    ({"chain_id": "", "contract_address": ACTIVE_CONTRACT}, "chain_id"),
    ({"chain_id": "0x1", "contract_address": ACTIVE_CONTRACT}, "chain_id"),
    ({"chain_id": "91342", "contract_address": "0x1234"}, "contract_address"),
    ({"chain_id": "91342", "contract_address": "0x" + "g" * 40}, "contract_address"),
    ({"chain_id": "91342", "contract_address": ACTIVE_CONTRACT[2:]}, "contract_address"),
    ({"chain_id": "91342", "contract_address": ""}, "contract_address"),
]
# A well-formed deployment the service does not index.
UNKNOWN_DEPLOYMENTS: list[dict[str, str]] = [
    {"chain_id": "91342", "contract_address": UNKNOWN_CONTRACT},
    {"chain_id": "1", "contract_address": ACTIVE_CONTRACT},
    {"chain_id": str(HUGE), "contract_address": ACTIVE_CONTRACT},
]
# Letter cases a contract address filter accepts.
ADDRESS_CASES: dict[str, Callable[[str], str]] = {
    "lowercase": str.lower,
    "checksummed": checksummed,
    "uppercase": lambda address: "0x" + address[2:].upper(),
}


def url(path: str, params: dict[str, Any] | None = None) -> str:
    """`path` with the query string of `params` (None values left out, a list's values repeated)."""
    query = urlencode({name: value for name, value in (params or {}).items() if value is not None}, doseq=True)
    return f"{path}?{query}" if query else path


def content(response: HttpResponseBase) -> bytes:
    """The body of a plain or streamed response (a stream is read to its end)."""
    if response.streaming:
        return b"".join(response.streaming_content)  # type: ignore[attr-defined]
    return bytes(response.content)  # type: ignore[attr-defined]


def get(api: Client, path: str, params: dict[str, Any] | None = None,
        headers: dict[str, str] | None = None) -> HttpResponseBase:
    return api.get(url(path, params), headers=headers)


def get_json(api: Client, path: str, params: dict[str, Any] | None = None, *, status: int = 200) -> Any:
    """The parsed JSON body of a GET, which must answer `status`."""
    response = get(api, path, params)
    body = content(response)
    assert response.status_code == status, body[:500]
    assert response["Content-Type"].startswith("application/json")
    return json.loads(body)


def error_detail(api: Client, path: str, params: dict[str, Any] | None = None, *, status: int) -> str:
    """The detail of an error answer, which must be exactly `{"detail": "<message>"}`."""
    body = get_json(api, path, params, status=status)
    assert list(body) == ["detail"] and isinstance(body["detail"], str) and body["detail"]
    return str(body["detail"])


def page(api: Client, path: str, params: dict[str, Any] | None = None) -> dict[str, Any]:
    """A page object, checked for exactly the five members."""
    body = get_json(api, path, params)
    assert isinstance(body, dict) and set(body) == PAGE_MEMBERS, body
    return body


def array(api: Client, path: str, params: dict[str, Any] | None = None) -> list[dict[str, Any]]:
    """An unpaged array."""
    body = get_json(api, path, params)
    assert isinstance(body, list), body
    return body


def ids(rows: Iterable[dict[str, Any]]) -> list[int]:
    return [row["id"] for row in rows]


def record_ids(records: Iterable[Bounty | Submission | Dispute]) -> list[int]:
    return [record_id(record) for record in records]


def record_id(record: Bounty | Submission | Dispute) -> int:
    if isinstance(record, Bounty):
        return record.bounty_id
    if isinstance(record, Submission):
        return record.submission_id
    return record.dispute_id


def qualifiers(deployment: Deployment, case: Callable[[str], str] = checksummed) -> dict[str, str]:
    """The query parameters naming `deployment`."""
    return {"chain_id": str(deployment.chain_id), "contract_address": case(deployment.contract_address)}


def expected_order(records: Sequence[Bounty | Submission | Dispute], key: Callable[[Any], Any],
                   *, descending: bool) -> list[int]:
    """IDs sorted by `key`, ties broken by ID in the same direction."""
    return [record_id(r) for r in sorted(records, key=lambda r: (key(r), record_id(r)), reverse=descending)]


def without(row: dict[str, Any], *names: str) -> dict[str, Any]:
    return {name: value for name, value in row.items() if name not in names}


# ------------------------------------------------------------------ expected record JSON


def rfc3339(moment: datetime) -> str:
    return moment.astimezone(UTC).isoformat().replace("+00:00", "Z")


def _common(record: Bounty | Submission | Dispute) -> dict[str, Any]:
    return {
        "chain_id": record.deployment.chain_id,
        "contract_address": checksummed(record.deployment.contract_address),
        "metadata_uri": record.metadata_uri,
        "metadata_hash": record.metadata_hash.lower(),
        "tx_hash": record.tx_hash.lower(),
        "block_number": record.block_number,
        "log_index": record.log_index,
        "created_at": rfc3339(record.created_at),
    }


def expected_bounty(bounty: Bounty, *, with_count: bool = False) -> dict[str, Any]:
    bounty.refresh_from_db()
    data = {
        "id": bounty.bounty_id,
        "prompt": bounty.prompt,
        "bounty_amount": str(bounty.bounty_amount),
        "fee_amount": str(bounty.fee_amount),
        "bond_amount": str(bounty.bond_amount),
        "duration": bounty.duration,
        "status": bounty.status,
        "poster": checksummed(bounty.poster),
        "deadline": rfc3339(bounty.deadline),
        "challenge_window": bounty.challenge_window,
        **_common(bounty),
    }
    if with_count:
        data["submission_count"] = bounty.submission_count
    return data


def expected_submission(submission: Submission, *, with_count: bool = False) -> dict[str, Any]:
    submission.refresh_from_db()
    data = {
        "id": submission.submission_id,
        "bounty_id": submission.bounty_id,
        "tile_id": checksummed(submission.tile_id),
        "content": submission.content,
        "bond_amount": str(submission.bond_amount),
        "review_deadline": rfc3339(submission.review_deadline),
        "status": submission.status,
        "claimant": checksummed(submission.claimant),
        **_common(submission),
    }
    if with_count:
        data["dispute_count"] = submission.dispute_count
    return data


def expected_dispute(dispute: Dispute) -> dict[str, Any]:
    dispute.refresh_from_db()
    return {
        "id": dispute.dispute_id,
        "bounty_id": dispute.bounty_id,
        "submission_id": dispute.submission_id,
        "challenger_id": checksummed(dispute.challenger_id),
        "reason": dispute.reason,
        "bond_amount": str(dispute.bond_amount),
        "status": dispute.status,
        **_common(dispute),
    }


def expected_bounty_overview(bounty: Bounty) -> dict[str, Any]:
    """The bounty with its count, its submissions with theirs and their disputes, by ID ascending."""
    submissions = bounty.submissions.order_by("submission_id")
    return {"bounty": expected_bounty(bounty, with_count=True),
            "submissions": [expected_submission(s, with_count=True) for s in submissions],
            "disputes": [expected_dispute(d) for d in bounty.disputes.order_by("dispute_id")]}


def expected_submission_overview(submission: Submission) -> dict[str, Any]:
    """The submission and its bounty with their counts, and its disputes by ID ascending."""
    return {"submission": expected_submission(submission, with_count=True),
            "bounty": expected_bounty(submission.bounty, with_count=True),
            "disputes": [expected_dispute(d) for d in submission.disputes.order_by("dispute_id")]}


def expected_dispute_overview(dispute: Dispute) -> dict[str, Any]:
    """The dispute, its submission and bounty with their counts, and the submission's other disputes."""
    siblings = dispute.submission.disputes.exclude(pk=dispute.pk).order_by("dispute_id")
    return {"dispute": expected_dispute(dispute),
            "submission": expected_submission(dispute.submission, with_count=True),
            "bounty": expected_bounty(dispute.bounty, with_count=True),
            "sibling_disputes": [expected_dispute(d) for d in siblings]}


# ------------------------------------------------------------------ seed data


@dataclass
class Tree:
    """A bounty with its submissions and their disputes."""

    bounty: Bounty
    submissions: list[Submission]
    disputes: list[Dispute]

    @property
    def ids(self) -> dict[str, int]:
        """Route placeholders: {b} the bounty, {s} the first submission, {d} its first dispute."""
        return {"b": self.bounty.bounty_id, "s": self.submissions[0].submission_id,
                "d": self.disputes[0].dispute_id}


def make_tree(deployment: Deployment, disputes_per_submission: Sequence[int] = (2, 1, 0), **bounty: Any) -> Tree:
    """A bounty with one submission per entry of `disputes_per_submission`, each with that many disputes."""
    parent = make_bounty(deployment, **bounty)
    submissions: list[Submission] = []
    disputes: list[Dispute] = []
    for count in disputes_per_submission:
        submission = make_submission(parent)
        submissions.append(submission)
        disputes.extend(make_dispute(submission) for _ in range(count))
    return Tree(parent, submissions, disputes)


# Every read route but /health, with {b}/{s}/{d} placeholders for a Tree's IDs.
READ_ROUTES = [
    "/bounties",
    "/bounties?limit=2",
    "/bounties/{b}",
    "/bounties/{b}/overview",
    "/submissions",
    "/submissions?q=",
    "/submissions?bounty_id={b}",
    "/submissions/{s}",
    "/submissions/{s}/overview",
    "/disputes",
    "/disputes?cursor=1",
    "/disputes?bounty_id={b}",
    "/disputes?submission_id={s}",
    "/disputes/{d}",
    "/disputes/{d}/overview",
]
# The paths of the spec's thirteen routes (the parent filters are query parameters).
ROUTE_PATHS = [
    "/health", "/bounties", "/bounties/{b}", "/bounties/{b}/overview", "/submissions", "/submissions/{s}",
    "/submissions/{s}/overview", "/disputes", "/disputes/{d}", "/disputes/{d}/overview",
]


# ------------------------------------------------------------------ lists

LIST_PATHS = {"bounties": "/bounties", "submissions": "/submissions", "disputes": "/disputes"}
# (raw limit, the page size it means)
LIMIT_CASES: list[tuple[str, int]] = [
    ("1", 1), ("2", 2), ("0", 1), ("-7", 1), ("100", 100), ("101", 100), ("1000000", 100), ("+3", 3),
    ("9" * 30, 100), ("-" + "9" * 30, 1), ("00000000000000000000000000002", 2),
    ("abc", 50), ("", 50), ("2.5", 50), ("1e2", 50), ("0x10", 50), ("\u0663", 50),
]
# Cursors that are not a non-negative integer: read from offset 0, page cursor null.
INVALID_CURSORS = ["-1", "abc", "", "1.5", "+1", "0x2", " 1", "\u0661"]
# Non-negative integers past any end: no items, however large.
FAR_CURSORS = [str(10**17), str(2**63 - 1), str(2**63), str(10**19), str(HUGE), "9" * 5_000]
PAGE_REQUESTS: list[dict[str, str]] = [
    {"limit": "50"}, {"limit": ""}, {"cursor": "0"}, {"cursor": "abc"}, {"q": ""}, {"q": "", "sort": "id"},
]
ARRAY_REQUESTS: list[dict[str, str]] = [
    {"sort": "id"}, {"dir": "desc"}, {"chain_id": "91342"}, {"chain_id": "91342", "contract_address": ACTIVE_CONTRACT},
    {"page": "2"}, {"offset": "1"}, {"Limit": "1"}, {"search": "x"},
]
DESCENDING_DIRS = [None, "desc", "DESC", "Desc", "", "up", "ascending", "asc ", "down"]
ASCENDING_DIRS = ["asc", "ASC", "aSc"]
UNKNOWN_SORTS = ["nope", "", "ID ", "-created_at", "id,status", "search_text", "deployment"]
# Lenient parameters never fail, whatever they hold.
LENIENT_NOISE: list[dict[str, str]] = [
    {"limit": "\u0663"}, {"cursor": "\u0663"}, {"sort": "\u00e9\u4e2d\U0001f600"}, {"dir": "\x00"},
    {"cursor": "-" + "9" * 30}, {"limit": "1_0"},
]


def make_record(resource: str, deployment: Deployment, **fields: Any) -> Bounty | Submission | Dispute:
    """One record of `resource` (with a new parent chain where it needs one)."""
    if resource == "bounties":
        return make_bounty(deployment, **fields)
    submission = make_submission(make_bounty(deployment), **(fields if resource == "submissions" else {}))
    return submission if resource == "submissions" else make_dispute(submission, **fields)


def seed(resource: str, deployment: Deployment, count: int) -> list[Bounty | Submission | Dispute]:
    """`count` records of `resource`, all children of one parent, in ID order."""
    if resource == "bounties":
        return [make_bounty(deployment) for _ in range(count)]
    bounty = make_bounty(deployment)
    if resource == "submissions":
        return [make_submission(bounty) for _ in range(count)]
    submission = make_submission(bounty)
    return [make_dispute(submission) for _ in range(count)]


def expected_json(record: Bounty | Submission | Dispute, *, with_count: bool = False) -> dict[str, Any]:
    if isinstance(record, Bounty):
        return expected_bounty(record, with_count=with_count)
    if isinstance(record, Submission):
        return expected_submission(record, with_count=with_count)
    return expected_dispute(record)


def expected_rows(resource: str, records: Iterable[Bounty | Submission | Dispute], *, paged: bool) -> list[Any]:
    """Rows as a list shows them: page rows of bounties and submissions carry their count."""
    return [expected_json(r, with_count=paged and resource != "disputes") for r in records]


def assert_q(api: Client, resource: str, q: str, expected: Iterable[int], params: dict[str, Any] | None = None
             ) -> None:
    """`q` finds exactly the records `expected` (by ID, default order id descending)."""
    body = page(api, LIST_PATHS[resource], {"q": q, **(params or {})})
    wanted = sorted(expected, reverse=True)
    assert ids(body["items"]) == wanted, f"q={q[:60]!r} ({len(q)} characters)"
    assert body["total"] == len(wanted)


def sorted_ids(api: Client, resource: str, sort: str | None, direction: str | None,
               params: dict[str, Any] | None = None) -> list[int]:
    """IDs of a 100-row page in the order of `sort` and `dir`."""
    body = page(api, LIST_PATHS[resource], {"sort": sort, "dir": direction, "limit": "100", **(params or {})})
    return ids(body["items"])


def walk_pages(api: Client, path: str, params: dict[str, Any]) -> list[int]:
    """Every ID of a listing, following next_cursor from the first page."""
    seen: list[int] = []
    cursor: str | None = None
    for _ in range(1_000):
        body = page(api, path, {**params, "cursor": cursor})
        seen.extend(ids(body["items"]))
        cursor = body["next_cursor"]
        if cursor is None:
            return seen
    raise AssertionError("next_cursor never ended")


# ------------------------------------------------------------------ behaviours every list shares
# test_lists.py pins them for every list through these checks.


def check_array_by_default(api: Client, resource: str, deployment: Deployment) -> None:
    """No limit, cursor or q: a plain array of every record, id descending, without counts."""
    records = seed(resource, deployment, 3)
    assert array(api, LIST_PATHS[resource]) == expected_rows(resource, reversed(records), paged=False)


def check_page_requests(api: Client, resource: str, deployment: Deployment, ignored: str) -> None:
    """Any of limit, cursor and q, even empty, asks for a page object whose rows are the records
    (bounty and submission rows with their count); other parameters, and `ignored` (a record's own
    ID, no filter), keep the array."""
    records = seed(resource, deployment, 3)
    path = LIST_PATHS[resource]
    for params in PAGE_REQUESTS:
        body = page(api, path, params)
        assert body["items"] == expected_rows(resource, reversed(records), paged=True), params
        assert (body["total"], body["next_cursor"]) == (3, None), params
    for params in [*ARRAY_REQUESTS, {ignored: "1"}]:
        assert array(api, path, params) == expected_rows(resource, reversed(records), paged=False), params


def check_limits(api: Client, resource: str, deployment: Deployment) -> None:
    """limit: clamped to 1..100; anything but an integer means 50."""
    newest_first = record_ids(reversed(seed(resource, deployment, 3)))
    for raw, size in LIMIT_CASES:
        body = page(api, LIST_PATHS[resource], {"limit": raw})
        assert body["limit"] == size, raw
        assert ids(body["items"]) == newest_first[:size], raw
        assert body["next_cursor"] == (str(size) if size < 3 else None), raw


def check_invalid_cursors(api: Client, resource: str, deployment: Deployment) -> None:
    """A cursor that is not a non-negative integer reads from offset 0, and the page's cursor is null."""
    newest_first = record_ids(reversed(seed(resource, deployment, 3)))
    for raw in INVALID_CURSORS:
        body = page(api, LIST_PATHS[resource], {"cursor": raw, "limit": "2"})
        assert ids(body["items"]) == newest_first[:2], raw
        assert (body["cursor"], body["next_cursor"], body["total"]) == (None, "2", 3), raw


def check_page_walk(api: Client, resource: str, deployment: Deployment) -> None:
    """cursor is the offset read from (null when not sent), next_cursor null on the last page."""
    newest_first = record_ids(reversed(seed(resource, deployment, 5)))
    path = LIST_PATHS[resource]
    expected = [
        (None, newest_first[0:2], None, "2"),
        ("0", newest_first[0:2], "0", "2"),
        ("2", newest_first[2:4], "2", "4"),
        ("4", newest_first[4:], "4", None),
        ("3", newest_first[3:5], "3", None),
        ("5", [], "5", None),
        ("0050", [], "50", None),
        ("99999999999999999", [], "99999999999999999", None),
    ]
    for cursor, items, echoed, following in expected:
        body = page(api, path, {"limit": "2", "cursor": cursor})
        assert (ids(body["items"]), body["cursor"], body["next_cursor"]) == (items, echoed, following), cursor
        assert (body["total"], body["limit"]) == (5, 2)


def check_far_cursors(api: Client, resource: str, deployment: Deployment) -> None:
    """A cursor past the end gives no items, however large; it is still the offset read from."""
    seed(resource, deployment, 2)
    for cursor in FAR_CURSORS:
        body = page(api, LIST_PATHS[resource], {"cursor": cursor})
        assert (body["items"], body["cursor"], body["next_cursor"], body["total"]) == ([], cursor, None, 2), cursor


def check_dirs(api: Client, resource: str, deployment: Deployment, *, descending: bool) -> None:
    """dir: asc in any case is ascending; anything else, or none, descending (pages and arrays)."""
    records = seed(resource, deployment, 3)
    wanted = record_ids(reversed(records) if descending else records)
    for raw in DESCENDING_DIRS if descending else ASCENDING_DIRS:
        assert sorted_ids(api, resource, None, raw) == wanted, raw
        assert ids(array(api, LIST_PATHS[resource], {"dir": raw})) == wanted, raw


def check_unknown_sorts(api: Client, resource: str, deployment: Deployment, unknown: Iterable[str]) -> None:
    """An unknown key sorts by id, in either direction; the records' other fields run against id."""
    records = seed(resource, deployment, 3)
    model = type(records[0])
    for position, record in enumerate(records):
        model.objects.filter(pk=record.pk).update(created_at=datetime(2030 - position, 1, 1, tzinfo=UTC))
    for raw in [*UNKNOWN_SORTS, *unknown]:
        assert sorted_ids(api, resource, raw, "asc") == record_ids(records), raw
        assert sorted_ids(api, resource, raw, None) == record_ids(reversed(records)), raw


def check_lenient_noise(api: Client, resource: str, deployment: Deployment) -> None:
    records = seed(resource, deployment, 2)
    for params in LENIENT_NOISE:
        body = page(api, LIST_PATHS[resource], {"q": "", **params})
        assert sorted(ids(body["items"])) == record_ids(records), params


def check_spans_every_deployment(api: Client, resource: str, deployments: Sequence[Deployment]) -> None:
    """Without chain_id a list holds every deployment's records, each with its own deployment fields."""
    records = [make_record(resource, deployment, **_same_id(resource, 7)) for deployment in deployments]
    rows = array(api, LIST_PATHS[resource])
    def by_deployment(row: dict[str, Any]) -> tuple[int, str]:
        return row["chain_id"], row["contract_address"]
    assert sorted(rows, key=by_deployment) == sorted(expected_rows(resource, records, paged=False),
                                                     key=by_deployment)


def _same_id(resource: str, value: int) -> dict[str, int]:
    return {{"bounties": "bounty_id", "submissions": "submission_id", "disputes": "dispute_id"}[resource]: value}


def check_chain_filter(api: Client, resource: str, deployments: Sequence[Deployment]) -> None:
    """chain_id alone: every deployment of that chain; with contract_address (any case): that one."""
    made = {deployment.pk: make_record(resource, deployment) for deployment in deployments}
    path = LIST_PATHS[resource]
    for deployment in deployments:
        same_chain = [made[d.pk] for d in deployments if d.chain_id == deployment.chain_id]
        wanted = sorted(record_ids(same_chain), reverse=True)
        assert ids(array(api, path, {"chain_id": str(deployment.chain_id)})) == wanted
        assert ids(page(api, path, {"chain_id": str(deployment.chain_id), "q": ""})["items"]) == wanted
        for case in ADDRESS_CASES.values():
            only = {"chain_id": str(deployment.chain_id), "contract_address": case(deployment.contract_address)}
            assert ids(array(api, path, only)) == [record_id(made[deployment.pk])]
            assert page(api, path, {**only, "limit": "5"})["total"] == 1
    for nothing in [*UNKNOWN_DEPLOYMENTS, {"chain_id": "1"}, {"chain_id": str(HUGE)}, {"chain_id": "0"}]:
        assert array(api, path, nothing) == []
        assert page(api, path, {**nothing, "limit": "5"})["total"] == 0


def check_malformed_filters(api: Client, resource: str, cases: Iterable[tuple[dict[str, str], str]]) -> None:
    """Each malformed filter is a 400 whose detail names it, for an array and for a page."""
    for params, name in cases:
        for extra in ({}, {"limit": "5"}):
            assert name in error_detail(api, LIST_PATHS[resource], {**params, **extra}, status=400), params


def check_contract_without_chain(api: Client, resource: str) -> None:
    for address in (ACTIVE_CONTRACT, "nonsense"):
        detail = error_detail(api, LIST_PATHS[resource], {"contract_address": address}, status=400)
        assert "contract_address" in detail and "chain_id" in detail


# ------------------------------------------------------------------ colliding deployments


def colliding_tree(deployment: Deployment) -> Tree:
    """The same IDs in every deployment: bounty 7 with submissions 70 (disputes 700, 701) and 71
    (dispute 710), and bounty 8 with submission 80 (dispute 800). Metadata names the deployment."""
    def tagged(n: int) -> dict[str, str]:
        return {"metadata_uri": f"ipfs://{deployment.chain_id}/{deployment.contract_address[2:8]}/{n}"}

    bounty = make_bounty(deployment, bounty_id=7, **tagged(7))
    s70 = make_submission(bounty, submission_id=70, **tagged(70))
    s71 = make_submission(bounty, submission_id=71, **tagged(71))
    disputes = [make_dispute(s70, dispute_id=700, **tagged(700)), make_dispute(s70, dispute_id=701, **tagged(701)),
                make_dispute(s71, dispute_id=710, **tagged(710))]
    decoy = make_bounty(deployment, bounty_id=8, **tagged(8))
    make_dispute(make_submission(decoy, submission_id=80, **tagged(80)), dispute_id=800, **tagged(800))
    return Tree(bounty, [s70, s71], disputes)


def check_parent_filter(api: Client, resource: str, parent: str, value: int, expected: Sequence[Any],
                        params: dict[str, str], *, always_paged: bool = False) -> None:
    """`?<parent>=<value>` lists `expected` (records, any order), as an array and as a page."""
    path = LIST_PATHS[resource]
    newest_first = sorted(expected, key=record_id, reverse=True)
    query = {parent: str(value), **params}
    if not always_paged:
        assert array(api, path, query) == expected_rows(resource, newest_first, paged=False)
    body = page(api, path, {**query, "limit": "10"})
    assert body["items"] == expected_rows(resource, newest_first, paged=True)
    assert (body["total"], body["next_cursor"]) == (len(expected), None)


def check_parent_matches_nothing(api: Client, resource: str, cases: Iterable[dict[str, str]], *,
                                 always_paged: bool = False) -> None:
    """Each of `cases` lists nothing: an empty array (unless always paged) and an empty page."""
    path = LIST_PATHS[resource]
    for params in cases:
        if not always_paged:
            assert array(api, path, params) == [], params
        assert page(api, path, {**params, "limit": "10"}) == {
            "items": [], "total": 0, "limit": 10, "cursor": None, "next_cursor": None}, params


def check_parent_half_qualified(api: Client, resource: str, parent: str) -> None:
    for params in HALF_QUALIFIED:
        for extra in ({}, {"limit": "5"}):
            detail = error_detail(api, LIST_PATHS[resource], {parent: "7", **params, **extra}, status=400)
            assert "chain_id" in detail and "contract_address" in detail, params


def check_sort_keys(api: Client, resource: str, records: Sequence[Bounty | Submission | Dispute],
                    keys: Iterable[str], value: Callable[[Any], Any]) -> None:
    """Each of `keys` orders by `value` both ways, ties broken by ID in the same direction."""
    for record in records:
        record.refresh_from_db()  # stored values: addresses lowercase, counters current
    for key in keys:
        for direction in ("asc", "desc"):
            wanted = expected_order(records, value, descending=direction == "desc")
            assert sorted_ids(api, resource, key, direction) == wanted, (key, direction)


# ------------------------------------------------------------------ record types


def mistyped_fields(row: dict[str, Any], amounts: Iterable[str], addresses: Iterable[str],
                    integers: Iterable[str], times: Iterable[str]) -> list[str]:
    """The fields of `row` without their documented JSON type (docs/api.md, Records): numbers,
    decimal strings, EIP-55 addresses, lowercase hashes, RFC 3339 times in UTC with a Z."""
    wrong = [name for name in integers if type(row[name]) is not int]
    wrong += [name for name in amounts if not (isinstance(row[name], str) and row[name].isdigit()
                                               and str(int(row[name])) == row[name])]
    wrong += [name for name in addresses if row[name] != checksummed(row[name].lower())]
    wrong += [name for name in ("metadata_hash", "tx_hash") if not HASH.fullmatch(row[name])]
    return wrong + [name for name in times if not RFC3339_Z.fullmatch(row[name])]
