"""The API on the wire: a real daphne, and one keep-alive HTTP/1.1 connection per test read by h11
exactly as a strict client frames it.

Django's test client drops a HEAD's body itself and frames nothing, so it cannot see what these
tests check: each status line, a Content-Length that counts the bytes sent or a well-formed
chunked body, no byte sent after a response ends (a HEAD's body, a 304's), and the next request
on the same connection answered and parsed.
"""

from __future__ import annotations

import os
from collections.abc import Iterator

import orjson
import pytest

from records.models import Deployment
from tests.api import helpers as h
from tests.api.wire import Reply, Wire
from tests.factories import ACTIVE_CONTRACT, ACTIVE_USDC, make_bounty
from tests.servers import Server, database_url, start_daphne, stop

pytestmark = pytest.mark.django_db(transaction=True)

BROWSER_ACCEPT = "text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8"
REFUSED_METHODS = ("POST", "PUT", "PATCH", "DELETE")
EVERY_METHOD = ("GET", "HEAD", "OPTIONS", *REFUSED_METHODS)


@pytest.fixture(scope="module")
def server(django_db_setup: None) -> Iterator[Server]:
    """One daphne for the module on the test database, configured as in production (DEBUG off,
    rate limit on). Bodies are not cached: every test writes its own records."""
    env = {
        **os.environ, "DATABASE_URL": database_url(), "BOUNTY_CHAIN_ID": "91342",
        "BOUNTY_CONTRACT_ADDRESS": ACTIVE_CONTRACT, "BOUNTY_USDC_ADDRESS": ACTIVE_USDC,
        "BOUNTY_API_CACHE_SECONDS": "0", "BOUNTY_RATE_LIMIT": "1000000",
    }
    for name in ("BOUNTY_RPC_URL", "REDIS_URL", "DJANGO_DEBUG"):
        env.pop(name, None)
    instance = start_daphne(env)
    yield instance
    stop(instance.process)


def assert_error(reply: Reply, status: int) -> str:
    """The one error shape: compact JSON `{"detail": "<message>"}`, as application/json."""
    assert reply.status == status, reply.body[:300]
    assert reply.headers["content-type"] == "application/json"
    body = reply.json()
    assert list(body) == ["detail"] and isinstance(body["detail"], str) and body["detail"]
    assert reply.body == orjson.dumps(body)
    return str(body["detail"])


def assert_head_of(head: Reply, got: Reply) -> None:
    """HEAD answers GET's status and representation headers, without the body."""
    assert (head.status, head.body) == (got.status, b"")
    for name in ("content-type", "content-length", "etag", "cache-control", "vary", "allow"):
        assert head.headers.get(name) == got.headers.get(name), name


@pytest.mark.parametrize("template", [*h.READ_ROUTES, "/health"])
def test_head_sends_the_headers_of_get_and_no_body(wire: Wire, tree: h.Tree, template: str) -> None:
    path = template.format(**tree.ids)
    got = wire.send("GET", path)
    assert got.status == 200 and got.headers["content-type"] == "application/json" and got.json()
    assert_head_of(wire.send("HEAD", path), got)
    again = wire.send("GET", path)
    assert (again.status, again.body) == (200, got.body)
    wire.finish()


@pytest.mark.parametrize("path", ["/", "/api/schema/", "/api/docs/", "/api/redoc/", "/admin/login/"])
def test_the_front_page_the_docs_and_the_admin_frame_get_and_head(wire: Wire, path: str) -> None:
    browser = {"Accept": BROWSER_ACCEPT}
    got = wire.send("GET", path, browser)
    assert got.status == 200 and got.body
    assert_head_of(wire.send("HEAD", path, browser), got)
    assert wire.send("GET", path, browser).status == 200
    wire.finish()


def test_an_unpaged_list_has_its_length_and_its_head_sends_none_of_its_body(wire: Wire, active: Deployment) -> None:
    for _ in range(3):
        make_bounty(active)
    head = wire.send("HEAD", "/bounties")  # the list not read yet: a HEAD does not make the server read it
    assert head.body == b"" and "transfer-encoding" not in head.headers and "content-length" not in head.headers
    got = wire.send("GET", "/bounties")
    assert "transfer-encoding" not in got.headers and got.headers["content-length"] == str(len(got.body))
    assert len(got.json()) == 3
    head = wire.send("HEAD", "/bounties")  # read now: its length is known
    assert head.body == b"" and head.headers["content-length"] == got.headers["content-length"]
    assert head.headers["etag"] == got.headers["etag"]
    assert wire.send("GET", "/bounties").body == got.body
    wire.finish()


@pytest.mark.parametrize("template", h.READ_ROUTES)
def test_a_matching_if_none_match_is_a_304_without_content_headers_or_body(wire: Wire, tree: h.Tree,
                                                                           template: str) -> None:
    path = template.format(**tree.ids)
    got = wire.send("GET", path)
    for method in ("GET", "HEAD"):
        for tag in (got.headers["etag"], "*"):
            unchanged = wire.send(method, path, {"If-None-Match": tag})
            assert (unchanged.status, unchanged.body) == (304, b"")
            assert unchanged.headers["etag"] == got.headers["etag"]
            assert unchanged.headers["cache-control"] == got.headers["cache-control"]
            assert "content-type" not in unchanged.headers and "content-length" not in unchanged.headers
    assert wire.send("GET", path, {"If-None-Match": 'W/"other"'}).body == got.body
    wire.finish()


def _missing(template: str, ids: dict[str, int]) -> str:
    """The route for a record that does not exist; a list or /health with a path segment too many."""
    if "{" not in template:
        return f"{template}/nope"
    return template.format(**{**ids, template.split("{")[1][0]: 999_999})


def _malformed(template: str, ids: dict[str, int]) -> str | None:
    """The route with a malformed parameter; None for /health, which reads none."""
    if template == "/health":
        return None
    path = template.format(**ids)
    return f"{path}?chain_id=x" if "{" not in template else f"{path}?chain_id=91342"


@pytest.mark.parametrize("template", h.ROUTE_PATHS)
def test_errors_on_every_route_are_the_one_error_shape_and_framed(wire: Wire, tree: h.Tree, template: str) -> None:
    malformed = _malformed(template, tree.ids)
    for path, status in [(malformed, 400), (_missing(template, tree.ids), 404)]:
        if path is None:
            continue
        got = wire.send("GET", path)
        assert_error(got, status)
        assert_head_of(wire.send("HEAD", path), got)
        assert wire.send("GET", path, {"If-None-Match": "*"}).status == status
    path = template.format(**tree.ids)
    for method in REFUSED_METHODS:
        refused = wire.send(method, path, {"Content-Type": "application/json"}, b'{"id": 1}')
        assert method in assert_error(refused, 405)
        assert refused.headers["allow"] == "GET, HEAD, OPTIONS"
    assert wire.send("OPTIONS", path).status == 200
    assert wire.send("GET", path).status == 200
    wire.finish()


@pytest.mark.parametrize("path", ["/nope", "/x", "/bounties/abc", "/bounties/1/overview/", "/api/", "/static/x.css"])
def test_an_unknown_route_is_the_one_error_shape_for_every_method(wire: Wire, tree: h.Tree, path: str) -> None:
    for method in EVERY_METHOD:
        body = b'{"id": 1}' if method in REFUSED_METHODS else b""
        reply = wire.send(method, path, {"Content-Type": "application/json"} if body else None, body)
        if method == "HEAD":
            assert_head_of(reply, wire.send("GET", path))
        else:
            assert path in assert_error(reply, 404), method
    assert wire.send("GET", "/health").status == 200
    wire.finish()
