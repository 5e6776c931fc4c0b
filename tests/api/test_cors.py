"""CORS on the wire (a real daphne): pages on other origins may read the public routes, the front
page and the schema, errors and 429s included, with the headers a client needs exposed; a
preflight is answered without spending the rate limit; the allowed origins are configurable;
the admin, /metrics and the docs pages never answer CORS."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tests.api import helpers as h
from tests.api.wire import Reply, Wire
from tests.factories import ACTIVE_CONTRACT, ACTIVE_USDC
from tests.servers import Server, database_url, start_daphne, stop
from tests.settings.test_settings import PRODUCTION, manage

pytestmark = pytest.mark.django_db(transaction=True)

PAGE = "https://front.example.org"
EXPOSED = "ETag, Retry-After, X-RateLimit-Limit, X-RateLimit-Remaining, X-RateLimit-Reset"
PUBLIC = [*h.ROUTE_PATHS, "/", "/api/schema/"]


def start(**extra: str) -> Server:
    """A daphne on the test database, configured as in production (DEBUG off), with a process-local
    cache (its own rate-limit budget) and `extra` in its environment."""
    env = {**os.environ, "DATABASE_URL": database_url(), "BOUNTY_CHAIN_ID": "91342",
           "BOUNTY_CONTRACT_ADDRESS": ACTIVE_CONTRACT, "BOUNTY_USDC_ADDRESS": ACTIVE_USDC,
           "BOUNTY_RATE_LIMIT": "1000000", **extra}
    for name in ("BOUNTY_RPC_URL", "REDIS_URL", "DJANGO_DEBUG", "BOUNTY_CORS_ALLOWED_ORIGINS"):
        if name not in extra:
            env.pop(name, None)
    return start_daphne(env)


@pytest.fixture(scope="module")
def server(django_db_setup: None) -> Iterator[Server]:
    """One daphne for the module with the default configuration: any origin."""
    instance = start()
    yield instance
    stop(instance.process)


@pytest.fixture
def serve() -> Iterator[Callable[..., Server]]:
    """Starts daphnes configured for one test (environment as keywords)."""
    started: list[Server] = []

    def serve_with(**extra: str) -> Server:
        started.append(start(**extra))
        return started[-1]

    yield serve_with
    for instance in started:
        stop(instance.process)


def preflight(wire: Wire, path: str, origin: str = PAGE) -> Reply:
    """What a browser asks before a GET that sends If-None-Match (no CORS-safelisted header)."""
    return wire.send("OPTIONS", path, {"Origin": origin, "Access-Control-Request-Method": "GET",
                                       "Access-Control-Request-Headers": "if-none-match"})


def cors_headers(reply: Reply) -> dict[str, str]:
    return {name: value for name, value in reply.headers.items() if name.startswith("access-control-")}


def assert_readable_from_any_origin(reply: Reply) -> None:
    """A browser hands the answer to the page, with the headers it needs; no credentials."""
    assert reply.headers.get("access-control-allow-origin") == "*", reply.headers
    assert reply.headers["access-control-expose-headers"] == EXPOSED
    assert "access-control-allow-credentials" not in reply.headers


@pytest.mark.parametrize("template", PUBLIC)
def test_a_read_from_another_origin_is_readable_on_every_public_route(wire: Wire, tree: h.Tree,
                                                                      template: str) -> None:
    path = template.format(**tree.ids)
    for method in ("GET", "HEAD"):
        reply = wire.send(method, path, {"Origin": PAGE})
        assert reply.status == 200, reply.body[:300]
        assert_readable_from_any_origin(reply)
        assert "access-control-allow-methods" not in reply.headers  # only a preflight gets those
    wire.finish()


def test_a_preflight_is_answered_with_the_methods_headers_and_max_age(wire: Wire, tree: h.Tree) -> None:
    for template in PUBLIC:
        reply = preflight(wire, template.format(**tree.ids))
        assert (reply.status, reply.body) == (200, b"")
        assert cors_headers(reply) == {
            "access-control-allow-origin": "*",
            "access-control-expose-headers": EXPOSED,
            "access-control-allow-headers": "accept, if-none-match",
            "access-control-allow-methods": "GET, HEAD, OPTIONS",
            "access-control-max-age": "7200",
        }
    wire.finish()


def test_errors_and_304s_of_the_public_routes_are_readable_too(wire: Wire, tree: h.Tree) -> None:
    origin = {"Origin": PAGE}
    for path, status in [("/bounties/999999", 404), ("/disputes/abc", 404), ("/bounties?chain_id=x", 400),
                         ("/submissions/1/overview/", 404)]:
        reply = wire.send("GET", path, origin)
        assert reply.status == status and reply.json()["detail"]
        assert_readable_from_any_origin(reply)
    got = wire.send("GET", f"/bounties/{tree.ids['b']}", origin)
    unchanged = wire.send("GET", f"/bounties/{tree.ids['b']}", {**origin, "If-None-Match": got.headers["etag"]})
    assert unchanged.status == 304 and unchanged.headers["etag"] == got.headers["etag"]
    assert_readable_from_any_origin(unchanged)
    refused = wire.send("POST", "/bounties", {**origin, "Content-Type": "application/json"}, b"{}")
    assert refused.status == 405
    assert_readable_from_any_origin(refused)
    wire.finish()


@pytest.mark.parametrize("path", ["/admin/", "/admin/login/", "/metrics", "/api/docs/", "/api/redoc/", "/nope"])
def test_the_admin_metrics_and_docs_pages_never_answer_cors(wire: Wire, path: str) -> None:
    assert_readable_from_any_origin(wire.send("GET", "/health", {"Origin": PAGE}))  # the same request, answered
    reply = wire.send("GET", path, {"Origin": PAGE, "Accept": "text/html"})
    assert reply.status in (200, 302, 404), reply.status
    assert cors_headers(reply) == {}
    assert cors_headers(preflight(wire, path)) == {}
    wire.finish()


def test_a_429_is_readable_and_preflights_spend_no_budget(serve: Callable[..., Server]) -> None:
    # Windows start at multiples of their length: this one holds the whole test.
    wire = Wire(serve(BOUNTY_RATE_LIMIT="2", BOUNTY_RATE_WINDOW_SECONDS="1000000000"))
    for _ in range(3):
        asked = preflight(wire, "/bounties")
        assert asked.status == 200 and "x-ratelimit-remaining" not in asked.headers
        assert_readable_from_any_origin(asked)
    assert [wire.send("GET", "/bounties", {"Origin": PAGE}).headers["x-ratelimit-remaining"] for _ in range(2)] \
        == ["1", "0"]
    limited = wire.send("GET", "/bounties", {"Origin": PAGE})
    assert limited.status == 429 and int(limited.headers["retry-after"]) >= 1
    assert_readable_from_any_origin(limited)
    assert (limited.headers["x-ratelimit-limit"], limited.headers["x-ratelimit-remaining"]) == ("2", "0")
    assert_readable_from_any_origin(preflight(wire, "/bounties"))  # over the limit, still answered
    wire.finish()


def test_only_the_configured_origins_are_allowed(serve: Callable[..., Server]) -> None:
    wire = Wire(serve(BOUNTY_CORS_ALLOWED_ORIGINS=f"http://127.0.0.1:8080, {PAGE.upper()}"))
    for origin in (PAGE, "http://127.0.0.1:8080"):
        got = wire.send("GET", "/health", {"Origin": origin})
        assert got.headers["access-control-allow-origin"] == origin
        assert got.headers["access-control-expose-headers"] == EXPOSED
        assert "origin" in got.headers["vary"].lower()  # a cache keeps one answer per origin
        assert preflight(wire, "/bounties", origin).headers["access-control-allow-origin"] == origin
    for origin in ("https://elsewhere.example.org", "http://127.0.0.1:8081", "https://front.example.org.evil"):
        refused = wire.send("GET", "/health", {"Origin": origin})
        assert refused.status == 200 and cors_headers(refused) == {}
        assert cors_headers(preflight(wire, "/bounties", origin)) == {}
    wire.finish()


@pytest.mark.parametrize(("value", "message"), [
    ("https://front.example.org/", "must list origins (scheme://host[:port], no path), got 'https://front.example.org/'"),
    ("front.example.org", "must list origins (scheme://host[:port], no path), got 'front.example.org'"),
    ("http://127.0.0.1:99999", "must list origins (scheme://host[:port], no path), got 'http://127.0.0.1:99999'"),
    ("*, https://front.example.org", "must be * alone or a list of origins"),
])
def test_a_bad_origin_stops_the_process_naming_the_variable(tmp_path: Path, value: str, message: str) -> None:
    result = manage("check", tmp_path=tmp_path, **PRODUCTION, BOUNTY_CORS_ALLOWED_ORIGINS=value)
    assert result.returncode != 0
    assert f"BOUNTY_CORS_ALLOWED_ORIGINS {message}" in result.stderr
