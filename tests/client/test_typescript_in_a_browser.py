"""The TypeScript client's browser bundle in a real browser (Debian's Chromium driven by
Playwright), against the dev service and chain of `scripts/dev`.

`npm run bundle` builds the bundle; a static server on a loopback port of its own serves it with
tests/client/browser_page/, so every request to the service crosses origins (CORS for real). The
page reads the service, follows its websocket through a dropped connection, and posts bounties
through an injected EIP-1193 wallet (`window.ethereum`) backed by one of the dev chain's unlocked
accounts: the same steps as a front end, with the user's wallet stood in for.
"""

from __future__ import annotations

import subprocess
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler
from pathlib import Path
from typing import Any

import httpx
import pytest
from playwright.sync_api import Browser, Page

from bounty_client.events import events_url
from tests.client.typescript_build import exclusive_build
from tests.servers import PROJECT_DIR, DevService, origin, start_dev_service

CLIENT = PROJECT_DIR / "clients" / "typescript"
BUNDLE = CLIENT / "build" / "browser" / "bounty-client.js"
PAGE = Path(__file__).resolve().parent / "browser_page"
POSTER = 8  # a dev account the demo activity leaves alone, with test USDC (as in test/service.test.ts)
SECONDS = 1000  # Playwright counts in milliseconds


@pytest.fixture(scope="module")
def bundle() -> Path:
    with exclusive_build():
        result = subprocess.run(["npm", "run", "bundle", "--silent"], cwd=CLIENT, capture_output=True, text=True,
                                timeout=300, check=False)
    assert result.returncode == 0, result.stdout + result.stderr
    return BUNDLE


@pytest.fixture(scope="module")
def dev_service(tmp_path_factory: pytest.TempPathFactory) -> Iterator[DevService]:
    """`scripts/dev` on ports of its own: anvil with demo data, the indexer, the web server."""
    with start_dev_service(tmp_path_factory.mktemp("dev-state")) as service:
        yield service


@pytest.fixture(scope="module")
def front_end(bundle: Path) -> Iterator[str]:
    """The page's origin: a static server on another loopback port than the service's."""
    files = {"/": (PAGE / "index.html", "text/html; charset=utf-8"),
             "/page.js": (PAGE / "page.js", "text/javascript; charset=utf-8"),
             "/bounty-client.js": (bundle, "text/javascript; charset=utf-8"),
             "/bounty-client.js.map": (bundle.with_suffix(".js.map"), "application/json")}

    class StaticFiles(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            if self.path not in files:
                self.send_error(404)
                return
            path, content_type = files[self.path]
            body = path.read_bytes()
            self.send_response(200)
            self.send_header("Content-Type", content_type)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args: Any) -> None:
            pass

    with origin(StaticFiles) as url:
        yield url


@pytest.fixture
def page(browser: Browser, front_end: str) -> Iterator[Page]:
    """The test page, its module (and so the bundle) loaded; no uncaught error allowed."""
    context = browser.new_context()
    page = context.new_page()
    uncaught: list[str] = []
    page.on("pageerror", lambda error: uncaught.append(str(error)))
    page.goto(f"{front_end}/")
    page.wait_for_function("() => window.bountyPage !== undefined", timeout=10 * SECONDS)
    yield page
    context.close()
    assert uncaught == []


def test_the_read_client_reads_qualified_pages_and_a_404_across_origins(page: Page, dev_service: DevService) -> None:
    seen = page.evaluate("api => bountyPage.readTheService(api)", dev_service.url)
    assert seen["origin"] != dev_service.url  # a cross-origin page

    deployment = httpx.get(f"{dev_service.url}/health").json()["deployment"]
    assert seen["deployment"] == {"chainId": deployment["chain_id"], "contractAddress": deployment["contract_address"],
                                  "usdcAddress": deployment["usdc_address"]}
    qualifier = f"chain_id={deployment['chain_id']}&contract_address={deployment['contract_address']}"
    assert seen["urls"][0] == f"{dev_service.url}/health"
    assert all(url.startswith(f"{dev_service.url}/bounties?{qualifier}&") for url in seen["urls"][1:-1]), seen["urls"]
    assert seen["urls"][-1] == f"{dev_service.url}/bounties/999999?{qualifier}"
    assert seen["urls"].count(f"{dev_service.url}/health") == 1
    active = {"chainId": deployment["chain_id"], "contractAddress": deployment["contract_address"]}
    assert all(record == active for record in seen["deployments"])

    assert len(seen["listed"]) >= 4  # the demo bounties
    assert seen["walked"] == seen["iterated"] == seen["listed"]
    assert len(seen["cursors"]) == (len(seen["listed"]) + 1) // 2 and seen["cursors"][-1] is None

    assert seen["missing"] == {"isRequestError": True, "name": "RequestError", "message": "request failed: 404",
                               "status": 404, "detail": "bounty 999999 not found"}


def test_a_bounty_posted_through_an_injected_wallet_arrives_live_and_after_a_reconnect(
        page: Page, dev_service: DevService) -> None:
    api = dev_service.url
    page.evaluate("([rpc, account]) => bountyPage.installWallet(rpc, account)", [dev_service.rpc_url, POSTER])
    page.evaluate("api => bountyPage.startWatching(api)", api)
    page.wait_for_function("() => watched.snapshots.length === 1", timeout=30 * SECONDS)
    [snapshot] = page.evaluate("() => watched.snapshots")
    assert sorted(snapshot["bounties"]) == page.evaluate("api => bountyPage.readTheService(api)", api)["listed"]

    def post(title: str) -> dict[str, Any]:
        posted: dict[str, Any] = page.evaluate("([api, title]) => bountyPage.postBounty(api, title)", [api, title])
        assert (posted["approval"], posted["status"]) == ("0x1", "0x1")
        return posted

    def live_bounty(posted: dict[str, Any]) -> dict[str, Any]:
        page.wait_for_function("hash => watched.events.some(e => e.payload.tx_hash === hash)", arg=posted["txHash"],
                               timeout=30 * SECONDS)
        [event] = [e for e in page.evaluate("() => watched.events") if e["payload"]["tx_hash"] == posted["txHash"]]
        assert event["type"] == "bounty.created"
        bounty: dict[str, Any] = event["payload"]
        assert (bounty["bounty_amount"], bounty["fee_amount"]) == ("25000000", posted["feeAmount"])
        assert (bounty["metadata_uri"], bounty["metadata_hash"]) == (posted["metadataUri"], posted["metadataHash"])
        assert bounty["poster"].lower() == posted["account"].lower()
        return bounty

    first = live_bounty(post("Posted from a browser"))
    assert page.evaluate("([api, hash]) => bountyPage.bountyOfTransaction(api, hash)", [api, first["tx_hash"]]) == first
    calls = page.evaluate("() => window.ethereum.calls")
    assert calls[:4] == ["eth_requestAccounts", "eth_chainId", "eth_chainId", "eth_sendTransaction"]
    assert calls.count("eth_sendTransaction") == 2  # the approval, then createBounty

    page.evaluate("() => bountyPage.dropTheConnection()")
    page.wait_for_function("() => watched.disconnects.length >= 2", timeout=10 * SECONDS)  # and still offline
    posted = post("Posted while the page was offline")
    indexed = None
    deadline = time.monotonic() + 30
    while indexed is None:  # the service has published it: the page is missing it
        assert time.monotonic() < deadline, "the indexer did not index the second bounty"
        indexed = page.evaluate("([api, hash]) => bountyPage.bountyOfTransaction(api, hash)", [api, posted["txHash"]])
        time.sleep(0.1)
    assert len(page.evaluate("() => watched.events")) == 1

    page.evaluate("() => bountyPage.comeBackOnline()")
    second = live_bounty(posted)
    assert second == indexed and second["id"] == first["id"] + 1

    watched = page.evaluate("() => watched")
    resumed = events_url(api, watched["events"][0]["position"])  # the position percent-encoded
    assert watched["urls"][0] == events_url(api)
    assert watched["urls"][1:] == [resumed] * (len(watched["urls"]) - 1)
    assert len(watched["snapshots"]) == 1, "a resume sends no snapshot"
    seqs = [event["seq"] for event in watched["events"]]
    assert seqs == list(range(snapshot["seq"] + 1, snapshot["seq"] + 1 + len(seqs))), "every seq once, in order"
    assert watched["errors"] == []


def test_wallet_errors_say_what_the_page_should_do(page: Page, dev_service: DevService) -> None:
    errors = page.evaluate("([api, rpc]) => bountyPage.walletErrors(api, rpc)", [dev_service.url, dev_service.rpc_url])
    chain_id = httpx.get(f"{dev_service.url}/health").json()["deployment"]["chain_id"]
    assert errors["rejected"] == {"isWalletError": True, "name": "WalletError", "reason": "rejected", "code": 4001,
                                  "message": "the user rejected the request (eth_sendTransaction)"}
    assert errors["wrongChain"] == {"isWalletError": True, "name": "WalletError", "reason": "wrong-chain", "code": None,
                                    "message": f"the wallet is on chain 1; switch it to chain {chain_id}"}
    assert "eth_sendTransaction" not in errors["calls"]  # the refusing wallet never passed it on
