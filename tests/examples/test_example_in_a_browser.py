"""The example front end (examples/bounty-board) in a real browser (Debian's Chromium driven by
Playwright), as a newcomer meets it: `scripts/dev` on ports of its own builds it and serves it at
/example/, linked from the front page.

No wallet extension runs in a headless browser, so the page gets a small EIP-1193 provider as
`window.ethereum` that answers with the dev chain's first unlocked account and forwards the rest
to anvil, where that account signs: what the page sends is really mined and indexed. The provider
can be told to refuse the next request of a method (as a user who clicks "Reject") or to claim
another chain, and it notes what the page showed as the quote at each request.

Screenshots at 1280 and 390 px wide go to the test's temporary folder and to /tmp/example-shots/.
"""

from __future__ import annotations

import shutil
from collections.abc import Callable, Iterator
from pathlib import Path

import httpx
import pytest
from playwright.sync_api import Browser, Locator, Page, expect

from tests.browser_wallet import link_wallet_to_node, record_policy_violations
from tests.servers import DevService, start_dev_service

SHOTS = Path("/tmp/example-shots")
SECONDS = 1000  # Playwright counts in milliseconds
APPROVE = "0x095ea7b3"  # approve(address,uint256)
DEMO_TITLES = ["Translate the onboarding guide to Portuguese", "Logo for the community call",
               "Write integration tests for the indexer", "Audit the fee rounding"]  # bounties 1 to 4

WALLET = """
(() => {
  const wallet = { requests: [], refuse: null, chainId: null };
  let id = 0;
  async function node(method, params) {
    // As an extension asks the node: outside the page (tests/browser_wallet.py).
    const answer = JSON.parse(await window.walletNode(JSON.stringify({ jsonrpc: "2.0", id: ++id, method, params })));
    if (answer.error) throw Object.assign(new Error(answer.error.message), { code: answer.error.code });
    return answer.result;
  }
  window.testWallet = wallet;
  window.ethereum = {
    async request({ method, params = [] }) {
      const quote = document.getElementById("quote");
      wallet.requests.push({ method, params, quote: quote ? quote.innerText : null });
      if (wallet.refuse === method) {
        wallet.refuse = null;
        throw Object.assign(new Error("User rejected the request."), { code: 4001 });
      }
      switch (method) {
        case "eth_requestAccounts": return (await node("eth_accounts", [])).slice(0, 1);
        case "eth_chainId": return wallet.chainId ?? node("eth_chainId", []);
        case "eth_sendTransaction":
        case "eth_getTransactionReceipt": return node(method, params);
        default: throw Object.assign(new Error(`${method} is not supported`), { code: 4200 });
      }
    },
  };
})();
"""


OpenBoard = Callable[..., Page]
Shot = Callable[[Page, str], None]


@pytest.fixture(scope="module")
def dev_service(tmp_path_factory: pytest.TempPathFactory) -> Iterator[DevService]:
    """`scripts/dev` on ports of its own: anvil with demo data, the indexer, the web server."""
    with start_dev_service(tmp_path_factory.mktemp("dev-state")) as service:
        yield service


@pytest.fixture
def open_board(browser: Browser, dev_service: DevService) -> Iterator[OpenBoard]:
    """Opens the board in a window `width` px wide, with the test wallet; no uncaught error and no
    violation of the page's Content-Security-Policy allowed."""
    uncaught: list[str] = []
    violations: list[list[str]] = []
    contexts = []

    def open_at(width: int, fragment: str = "") -> Page:
        context = browser.new_context(viewport={"width": width, "height": 900})
        contexts.append(context)
        link_wallet_to_node(context, dev_service.rpc_url)
        context.add_init_script(WALLET)
        page = context.new_page()
        page.on("pageerror", lambda error: uncaught.append(str(error)))
        violations.append(record_policy_violations(page))
        page.goto(f"{dev_service.url}/example/{fragment}")
        expect(page.locator("#connection")).to_have_text("Live", timeout=30 * SECONDS)
        return page

    yield open_at
    for context in contexts:
        context.close()
    assert uncaught == []
    assert [line for page in violations for line in page] == []


@pytest.fixture
def shot(tmp_path: Path) -> Shot:
    def take(page: Page, name: str) -> None:
        path = tmp_path / f"{name}.png"
        page.evaluate("() => scrollTo(0, 0)")  # the sticky top bar at the top of the full page
        page.screenshot(path=str(path), full_page=True)
        SHOTS.mkdir(exist_ok=True)
        shutil.copy(path, SHOTS / path.name)

    return take


def overflow(page: Page) -> int:
    """How far the page scrolls sideways: 0 when it fits the window."""
    return int(page.evaluate("() => document.documentElement.scrollWidth - innerWidth"))


def rows(page: Page) -> Locator:
    return page.locator("#bounty-list a.bounty")


def test_the_front_page_leads_to_the_board_of_the_demo_bounties_and_their_overviews(
        browser: Browser, open_board: OpenBoard, dev_service: DevService, shot: Shot) -> None:
    context = browser.new_context()
    front = context.new_page()
    front.goto(f"{dev_service.url}/")
    front.get_by_role("link", name="The bounty board").click()
    expect(front).to_have_url(f"{dev_service.url}/example/")
    expect(front.locator("#bounty-list")).to_contain_text(DEMO_TITLES[0], timeout=30 * SECONDS)
    context.close()

    page = open_board(1280)
    for title in DEMO_TITLES:
        expect(page.locator("#bounty-list")).to_contain_text(title)
    expect(page.locator("#network")).to_have_text("Chain 91342 · 0xe7f1…0512")
    shot(page, "board-1280")

    rows(page).filter(has_text="Write integration tests for the indexer").click()
    expect(page).to_have_url(f"{dev_service.url}/example/#/bounty/3")
    overview = page.locator("article.overview")
    expect(overview.locator("h2")).to_have_text("Write integration tests for the indexer")
    expect(overview).to_contain_text("500 USDC")
    overview_body = httpx.get(f"{dev_service.url}/bounties/3/overview").json()
    expect(overview.locator("li.submission")).to_have_count(len(overview_body["submissions"]))
    expect(overview.locator("li.dispute")).to_have_count(len(overview_body["disputes"]))
    expect(overview.locator(".pill-pending_human_review").first).to_have_text("Awaiting moderator")
    expect(page.locator("form.submit-form")).to_be_visible()
    expect(page.locator('#bounty-list a[aria-current="page"]')).to_contain_text("Write integration tests")
    shot(page, "bounty-1280")

    rows(page).filter(has_text=DEMO_TITLES[0]).click()  # a resolved one: no more submissions
    expect(page.locator("article.overview h2")).to_have_text(DEMO_TITLES[0])
    expect(page.locator(".detail .note")).to_contain_text("takes no more submissions")


def test_a_bounty_posted_through_the_wallet_shows_its_quote_first_and_arrives_live(
        open_board: OpenBoard, dev_service: DevService, shot: Shot) -> None:
    page = open_board(1280)
    expect(rows(page)).not_to_have_count(0)
    listed = rows(page).count()
    reads: list[str] = []
    page.on("request", lambda request: reads.append(request.url))
    page.evaluate("() => { window.sameDocument = true; }")  # gone if the page reloads

    page.get_by_role("link", name="Post a bounty").first.click()
    page.get_by_label("Title").fill("Port the parser to Rust")
    page.get_by_label("Description").fill("Same output on the test corpus, no unsafe code.")
    page.get_by_label("Reward").fill("250")
    quote = page.locator("#quote")
    expect(quote.locator("dt")).to_have_text(["Reward", "Post fee", "Total to approve"])
    expect(quote.locator("dd")).to_have_text(["250 USDC", "6.25 USDC", "256.25 USDC"])
    expect(quote).to_contain_text("Each submission will post a bond of 25 USDC.")
    send = page.get_by_role("button", name="Approve 256.25 USDC and post")
    shot(page, "post-1280")
    send.click()

    expect(page.locator(".success h2")).to_have_text("Bounty #5 is live", timeout=30 * SECONDS)
    expect(rows(page)).to_have_count(listed + 1)
    expect(rows(page).first).to_contain_text("Port the parser to Rust")
    expect(rows(page).first).to_contain_text("250 USDC")
    expect(page.locator("#bounty-count")).to_have_text(str(listed + 1))
    shot(page, "posted-1280")
    assert page.evaluate("() => window.sameDocument") is True
    assert not [url for url in reads if "/bounties" in url], reads  # the list came from the websocket

    requests = page.evaluate("() => testWallet.requests")
    sent = [request for request in requests if request["method"] == "eth_sendTransaction"]
    usdc = httpx.get(f"{dev_service.url}/health").json()["deployment"]["usdc_address"]
    approval, creation = (request["params"][0] for request in sent)
    assert (approval["to"].lower(), approval["data"][:10]) == (usdc.lower(), APPROVE)
    assert int(approval["data"][-64:], 16) == 256_250_000  # reward + 2.5 % fee, in USDC base units
    assert "Total to approve" in sent[0]["quote"] and "256.25 USDC" in sent[0]["quote"]  # on show when asked
    bounty = httpx.get(f"{dev_service.url}/bounties/5").json()
    assert (bounty["bounty_amount"], bounty["fee_amount"], bounty["duration"]) == ("250000000", "6250000", 7 * 86_400)
    assert creation["from"].lower() == bounty["poster"].lower()

    # Then work submitted to it: the bond approved, the submission listed on the bounty.
    page.get_by_role("link", name="Open it").click()
    expect(page.locator("article.overview h2")).to_have_text("Port the parser to Rust")
    expect(page.locator("form.submit-form .quote")).to_contain_text("25 USDC")
    page.get_by_label("Summary").fill("Ported, with the corpus passing.")
    page.get_by_label("Link").fill("https://example.org/pull/1")
    page.get_by_role("button", name="Approve 25 USDC and submit").click()
    expect(page.locator("form.submit-form .steps")).to_contain_text("submission #7", timeout=30 * SECONDS)
    submission = page.locator("article.overview li.submission")
    expect(submission).to_have_count(1)
    expect(submission).to_contain_text("Ported, with the corpus passing.")
    expect(submission.locator(".pill")).to_have_text("In review")
    expect(rows(page).first).to_contain_text("1 submission")
    shot(page, "submitted-1280")


def test_a_refusal_in_the_wallet_or_a_wallet_on_another_chain_is_said_plainly(
        open_board: OpenBoard, shot: Shot) -> None:
    page = open_board(1280)
    page.evaluate("() => { testWallet.refuse = 'eth_requestAccounts'; }")
    page.get_by_role("button", name="Connect wallet").click()
    expect(page.locator("#notice")).to_have_text("You rejected the request in your wallet, so nothing was sent.")

    page.get_by_role("link", name="Post a bounty").first.click()
    page.get_by_label("Title").fill("Refused in the wallet")
    page.evaluate("() => { testWallet.refuse = 'eth_sendTransaction'; }")
    page.get_by_role("button", name="Approve 102.50 USDC and post").click()
    alert = page.locator("form.post-form .progress .alert")
    expect(alert).to_have_text("You rejected the request in your wallet, so nothing was sent.")
    expect(page.locator("form.post-form .step.failed")).to_contain_text("Approve 102.50 USDC")
    expect(page.get_by_role("button", name="Approve 102.50 USDC and post")).to_be_enabled()  # to try again
    shot(page, "rejected-1280")

    page.evaluate("() => { testWallet.chainId = '0x1'; }")
    page.get_by_role("button", name="Approve 102.50 USDC and post").click()
    expect(alert).to_have_text("Wrong network: the wallet is on chain 1; switch it to chain 91342.")
    sent = [r for r in page.evaluate("() => testWallet.requests") if r["method"] == "eth_sendTransaction"]
    assert len(sent) == 1  # the refused one: nothing reached the chain


@pytest.mark.parametrize(("view", "fragment", "ready"), [
    ("board", "", "#bounty-list a.bounty"),
    ("bounty", "#/bounty/3", "article.overview li.dispute"),
    ("post", "#/post", "#quote dl"),
])
def test_it_fits_a_phone(open_board: OpenBoard, shot: Shot, view: str, fragment: str, ready: str) -> None:
    page = open_board(390, fragment)
    expect(page.locator(ready).first).to_be_visible()
    shot(page, f"{view}-390")
    assert page.evaluate("() => document.documentElement.scrollWidth") <= 390
    assert overflow(page) <= 0
    if view != "board":  # one page at a time: the list gives way, a way back is shown
        expect(page.locator(".board")).to_be_hidden()
        expect(page.get_by_role("link", name="← All bounties")).to_be_visible()
