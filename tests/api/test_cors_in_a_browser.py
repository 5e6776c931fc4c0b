"""A front end on another origin, in a real browser (Debian's Chromium driven by Playwright): a
page served from one loopback port reads the service's routes, their ETag and rate-limit
headers (a conditional request too, which the browser preflights) and the websocket's snapshot
from a daphne on another port. With the allowed origins set to another one, the browser refuses
the answers to the page; the websocket, which CORS does not govern, stays open to it."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler
from typing import Any

import pytest
from playwright.sync_api import Browser, Error, Page

from records.models import Deployment
from tests.api.test_cors import start
from tests.factories import make_bounty
from tests.servers import Server, origin, stop

pytestmark = pytest.mark.django_db(transaction=True)

FRONT_END = b"""<!doctype html>
<html lang="en"><meta charset="utf-8"><title>A bounty front end</title>
<script>
async function readTheService(api) {
  const health = await fetch(`${api}/health`);
  const list = await fetch(`${api}/bounties`, { headers: { Accept: "application/json" } });
  const etag = list.headers.get("ETag");
  // If-None-Match is not a CORS-safelisted header: the browser sends a preflight first.
  const again = await fetch(`${api}/bounties`, { headers: { "If-None-Match": etag } });
  return {
    health: { status: health.status, body: await health.json() },
    list: {
      status: list.status, body: await list.json(), etag,
      limit: list.headers.get("X-RateLimit-Limit"), remaining: list.headers.get("X-RateLimit-Remaining"),
      reset: list.headers.get("X-RateLimit-Reset"),
    },
    again: { status: again.status, etag: again.headers.get("ETag") },
  };
}

function snapshotOf(url) {
  return new Promise((resolve, reject) => {
    const socket = new WebSocket(url);
    const messages = [];
    socket.onmessage = (event) => {
      messages.push(JSON.parse(event.data));
      if (messages.at(-1).type === "snapshot.complete") { socket.close(); resolve(messages); }
    };
    socket.onerror = () => reject(new Error("the websocket failed"));
  });
}
</script>
</html>
"""


class FrontEnd(BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        self.send_response(200)
        self.send_header("Content-Type", "text/html; charset=utf-8")
        self.send_header("Content-Length", str(len(FRONT_END)))
        self.end_headers()
        self.wfile.write(FRONT_END)

    def log_message(self, format: str, *args: Any) -> None:
        pass


@pytest.fixture
def front_end() -> Iterator[str]:
    """The page's origin: a web server of its own on another loopback port."""
    with origin(FrontEnd) as url:
        yield url


@pytest.fixture
def serve() -> Iterator[Callable[..., Server]]:
    started: list[Server] = []

    def serve_with(**extra: str) -> Server:
        started.append(start(BOUNTY_RATE_LIMIT="50", **extra))
        return started[-1]

    yield serve_with
    for instance in started:
        stop(instance.process)


@pytest.fixture
def page(browser: Browser, front_end: str) -> Iterator[Page]:
    """The front end's page, open."""
    context = browser.new_context()
    page = context.new_page()
    page.goto(front_end)
    yield page
    context.close()


@pytest.mark.parametrize("allowed", ["*", "the page's origin"])
def test_a_page_on_another_origin_reads_the_api_and_the_websocket(
        active: Deployment, front_end: str, serve: Callable[..., Server], page: Page, allowed: str) -> None:
    bounty = make_bounty(active)
    server = serve(BOUNTY_CORS_ALLOWED_ORIGINS="*" if allowed == "*" else front_end)
    api = f"http://127.0.0.1:{server.port}"
    assert api != front_end

    seen = page.evaluate("api => readTheService(api)", api)
    assert seen["health"]["status"] == 200 and seen["health"]["body"]["status"]
    assert seen["list"]["status"] == 200 and [row["id"] for row in seen["list"]["body"]] == [bounty.bounty_id]
    assert seen["list"]["etag"].startswith('W/"')
    assert (seen["list"]["limit"], seen["list"]["remaining"]) == ("50", "49")  # /health does not count
    assert int(seen["list"]["reset"]) > 0
    assert seen["again"] == {"status": 304, "etag": seen["list"]["etag"]}

    messages = page.evaluate("url => snapshotOf(url)", server.url())
    assert [m["type"] for m in messages] == ["bounty.created", "snapshot.complete"]
    assert messages[0]["payload"]["id"] == bounty.bounty_id


def test_a_page_on_an_origin_not_allowed_gets_no_answer(
        active: Deployment, front_end: str, serve: Callable[..., Server], page: Page) -> None:
    make_bounty(active)
    allowing = serve(BOUNTY_CORS_ALLOWED_ORIGINS=f"https://front.example.org, {front_end}")
    server = serve(BOUNTY_CORS_ALLOWED_ORIGINS="https://front.example.org")
    console: list[str] = []
    page.on("console", lambda message: console.append(message.text))

    assert page.evaluate("api => readTheService(api)", f"http://127.0.0.1:{allowing.port}")["list"]["status"] == 200
    with pytest.raises(Error, match="Failed to fetch"):
        page.evaluate("api => readTheService(api)", f"http://127.0.0.1:{server.port}")
    assert any("blocked by CORS policy: No 'Access-Control-Allow-Origin' header" in line for line in console)

    messages = page.evaluate("url => snapshotOf(url)", server.url())
    assert messages[-1]["type"] == "snapshot.complete"
