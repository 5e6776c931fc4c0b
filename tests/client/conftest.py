"""Fixtures of the client tests: a real HTTP read service on loopback serving spec-shaped JSON."""

from __future__ import annotations

import json
import re
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlsplit

import pytest

from bounty_client import Deployment, TransactionBuilder
from tests.websocket.conftest import indexer_process, servers  # noqa: F401 (the walk-through's service)

CHAIN_ID = 91342
CONTRACT = "0x5FbDB2315678afecb367f032d93F642f64180aa3"
USDC = "0xe7f1725E7734CE288F8367e1Bb143E90bb3F0512"
DEPLOYMENT = Deployment(CHAIN_ID, CONTRACT, USDC)
PAGED_PARAMS = {"limit", "cursor", "q"}


def exactly(message: str) -> str:
    """A `pytest.raises(match=...)` pattern for exactly `message`."""
    return f"^{re.escape(message)}$"


@pytest.fixture
def builder() -> TransactionBuilder:
    """A builder for a fixed deployment (no chain needed)."""
    return TransactionBuilder(DEPLOYMENT)


def bounty_record(bounty_id: int) -> dict[str, Any]:
    uri = f'data:application/json,{{"title":"bounty {bounty_id}"}}'
    return {
        "id": bounty_id, "chain_id": CHAIN_ID, "contract_address": CONTRACT, "prompt": uri,
        "bounty_amount": "100000000", "fee_amount": "2500000", "bond_amount": "10000000",
        "duration": 86400, "status": "open", "poster": "0x70997970C51812dc3A010C7d01b50e0d17dc79C8",
        "deadline": "2026-01-02T00:00:00Z", "challenge_window": 86400, "metadata_uri": uri,
        "metadata_hash": "0x" + f"{bounty_id:064x}", "tx_hash": "0x" + "ab" * 32,
        "block_number": 10 + bounty_id, "log_index": 0, "created_at": "2026-01-01T00:00:00Z",
    }


def submission_record(submission_id: int, bounty_id: int) -> dict[str, Any]:
    uri = f'data:application/json,{{"work":{submission_id}}}'
    return {
        "id": submission_id, "chain_id": CHAIN_ID, "contract_address": CONTRACT, "bounty_id": bounty_id,
        "tile_id": "0x3C44CdDdB6a900fa2b585dd299e03d12FA4293BC", "content": uri, "bond_amount": "10000000",
        "review_deadline": "2026-01-03T00:00:00Z", "status": "submitted",
        "claimant": "0x3C44CdDdB6a900fa2b585dd299e03d12FA4293BC", "metadata_uri": uri,
        "metadata_hash": "0x" + f"{submission_id:064x}", "tx_hash": "0x" + "cd" * 32,
        "block_number": 100 + submission_id, "log_index": 1, "created_at": "2026-01-01T01:00:00Z",
    }


def dispute_record(dispute_id: int, submission_id: int, bounty_id: int) -> dict[str, Any]:
    uri = f'data:application/json,{{"reason":{dispute_id}}}'
    return {
        "id": dispute_id, "chain_id": CHAIN_ID, "contract_address": CONTRACT, "bounty_id": bounty_id,
        "submission_id": submission_id, "challenger_id": "0x90F79bf6EB2c4f870365E785982E1f101E93b906",
        "reason": uri, "bond_amount": "5000000", "status": "pending_human_review", "metadata_uri": uri,
        "metadata_hash": "0x" + f"{dispute_id:064x}", "tx_hash": "0x" + "ef" * 32,
        "block_number": 200 + dispute_id, "log_index": 2, "created_at": "2026-01-01T02:00:00Z",
    }


@dataclass(frozen=True)
class ReceivedRequest:
    path: str
    query: dict[str, str]


@dataclass
class FakeReadService:
    """A read service that follows the spec's routes and paging rules over a fixed data set.

    `requests` records every request it received; `responses` overrides a path with a fixed
    (status, body), sent as JSON, or as HTML when the body is `bytes`; `delay` holds every answer
    back that many seconds.
    """

    url: str = ""
    deployment: dict[str, Any] = field(
        default_factory=lambda: {"chain_id": CHAIN_ID, "contract_address": CONTRACT, "usdc_address": USDC}
    )
    bounties: list[dict[str, Any]] = field(default_factory=list)
    submissions: list[dict[str, Any]] = field(default_factory=list)
    disputes: list[dict[str, Any]] = field(default_factory=list)
    requests: list[ReceivedRequest] = field(default_factory=list)
    responses: dict[str, tuple[int, Any]] = field(default_factory=dict)
    delay: float = 0.0

    def paths(self) -> list[str]:
        return [request.path for request in self.requests]

    def answer(self, path: str, query: dict[str, str]) -> tuple[int, Any]:
        if path in self.responses:
            return self.responses[path]
        if path == "/health":
            return 200, {"status": "ok", "version": "0.1.0", "deployment": self.deployment,
                         "indexer": {"enabled": True, "running": True, "synced": True}}
        parts = path.strip("/").split("/")
        tables = {"bounties": self.bounties, "submissions": self.submissions, "disputes": self.disputes}
        if parts[0] not in tables or len(parts) > 3:
            return 404, {"detail": "Not found."}
        rows = tables[parts[0]]
        if len(parts) == 1:
            return 200, self._list(parts[0], rows, query)
        by_id = {row["id"]: row for row in rows}
        record = by_id.get(int(parts[1])) if parts[1].isdigit() else None
        if record is None:
            return 404, {"detail": "Not found."}
        if len(parts) == 2:
            return 200, record
        return 200, self._overview(parts[0], record)

    def _list(self, kind: str, rows: list[dict[str, Any]], query: dict[str, str]) -> Any:
        for parent in ("bounty_id", "submission_id"):
            if parent in query:
                rows = [row for row in rows if str(row[parent]) == query[parent]]
        if "q" in query:
            rows = [row for row in rows if query["q"] in json.dumps(row)]
        paged = bool(PAGED_PARAMS & query.keys()) or (kind == "disputes" and "bounty_id" in query)
        if not paged:
            return rows
        limit = min(max(int(query.get("limit", "50")), 1), 100)
        cursor = query.get("cursor")
        offset = int(cursor) if cursor is not None and cursor.isdigit() else 0
        end = offset + limit
        return {
            "items": rows[offset:end],
            "total": len(rows),
            "limit": limit,
            "cursor": str(offset) if cursor is not None and cursor.isdigit() else None,
            "next_cursor": str(end) if end < len(rows) else None,
        }

    def _overview(self, kind: str, record: dict[str, Any]) -> dict[str, Any]:
        bounty_of = {row["id"]: row for row in self.bounties}
        submission_of = {row["id"]: row for row in self.submissions}
        if kind == "bounties":
            return {
                "bounty": record,
                "submissions": [s for s in self.submissions if s["bounty_id"] == record["id"]],
                "disputes": [d for d in self.disputes if d["bounty_id"] == record["id"]],
            }
        if kind == "submissions":
            return {
                "submission": record,
                "bounty": bounty_of[record["bounty_id"]],
                "disputes": [d for d in self.disputes if d["submission_id"] == record["id"]],
            }
        return {
            "dispute": record,
            "submission": submission_of[record["submission_id"]],
            "bounty": bounty_of[record["bounty_id"]],
            "sibling_disputes": [
                d for d in self.disputes if d["submission_id"] == record["submission_id"] and d["id"] != record["id"]
            ],
        }


def _handler(service: FakeReadService) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            url = urlsplit(self.path)
            query = {name: values[-1] for name, values in parse_qs(url.query, keep_blank_values=True).items()}
            service.requests.append(ReceivedRequest(url.path, query))
            if service.delay:
                time.sleep(service.delay)
            status, body = service.answer(url.path, query)
            raw = isinstance(body, bytes)
            payload = body if raw else json.dumps(body).encode("utf-8")
            try:
                self.send_response(status)
                self.send_header("Content-Type", "text/html" if raw else "application/json")
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)
            except ConnectionError:
                pass  # the client gave up (a timeout test)

        def log_message(self, format: str, *args: Any) -> None:
            """Keeps the test output quiet."""

    return Handler


@pytest.fixture
def read_service() -> Iterator[FakeReadService]:
    """A `FakeReadService` listening on 127.0.0.1 (a free port) for the duration of the test."""
    service = FakeReadService()
    server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(service))
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True)
    thread.start()
    service.url = f"http://127.0.0.1:{server.server_address[1]}"
    try:
        yield service
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)
