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


def q_result(api: Client, resource: str, q: str) -> tuple[list[int], int]:
    """The IDs of the page `q` finds (default order: id descending) and its total."""
    body = page(api, LIST_PATHS[resource], {"q": q})
    return ids(body["items"]), body["total"]


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


def listing(api: Client, resource: str, params: dict[str, Any], *, always_paged: bool = False
            ) -> tuple[list[Any] | None, dict[str, Any]]:
    """What a list answers `params`: its array (None for a filter that always answers a page) and
    its page of 10."""
    path = LIST_PATHS[resource]
    rows = None if always_paged else array(api, path, params)
    return rows, page(api, path, {**params, "limit": "10"})


def expected_listing(resource: str, records: Sequence[Bounty | Submission | Dispute], *,
                     always_paged: bool = False) -> tuple[list[Any] | None, dict[str, Any]]:
    """`listing` of exactly `records`, newest first, all on the page of 10."""
    newest_first = sorted(records, key=record_id, reverse=True)
    rows = None if always_paged else expected_rows(resource, newest_first, paged=False)
    return rows, {"items": expected_rows(resource, newest_first, paged=True), "total": len(records), "limit": 10,
                  "cursor": None, "next_cursor": None}


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
