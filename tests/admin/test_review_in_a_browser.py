"""A moderator's session in a real browser (Debian's Chromium driven by Playwright).

Logs in, opens the queue from the admin index, opens a dispute, adds a note, and prepares the
resolution; then sends it with a browser wallet and sees the dispute resolved once the indexer
has seen the transaction. No wallet extension runs in a headless browser, so the page gets a
minimal EIP-1193 provider that forwards every request to the real anvil node, where the
arbiter's account is unlocked: the transaction the page sends is really mined and indexed.
Screenshots for a person to look at go to var/screenshots/. The queue and the disputes list must
fit a 1280 and a 1024 px wide window, review links in view; screenshots of those go to the test's
temporary folder.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from django.contrib.auth.models import User
from playwright.sync_api import Browser, Page, expect

from contracts.demo import seed_demo_activity
from indexer.sync import Indexer
from records.models import Dispute
from records.moderation import ensure_moderators_group
from records.representation import checksum_address
from tests.admin.conftest import PASSWORD
from tests.browser_wallet import link_wallet_to_node, record_policy_violations
from tests.chain import Chain
from tests.indexer.conftest import catch_up_to_head, config_for

SCREENSHOTS = Path(__file__).resolve().parents[2] / "var" / "screenshots"
WALLET = """
window.ethereum = {
  isTestWallet: true,
  async request({ method, params }) {
    if (method === "eth_requestAccounts") { return ["%(arbiter)s"]; }
    if (method === "wallet_switchEthereumChain") { return null; }
    // As an extension asks the node: outside the page (tests/browser_wallet.py).
    const answer = JSON.parse(await window.walletNode(
      JSON.stringify({ jsonrpc: "2.0", id: Date.now(), method, params: params || [] })));
    if (answer.error) { throw new Error(answer.error.message); }
    return answer.result;
  },
};
"""

pytestmark = pytest.mark.django_db(transaction=True)


def shot(page: Page, name: str) -> None:
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(SCREENSHOTS / f"admin-{name}.png"), full_page=True)


@pytest.fixture
def demo(chain: Chain) -> Indexer:
    """The demo activity, indexed (three disputes pending review), and a moderator to log in as."""
    seed_demo_activity(chain.w3, chain.deployment)
    indexer = Indexer(config_for(chain))
    indexer.ensure_deployment()
    catch_up_to_head(indexer)
    user = User.objects.create_user("moderator", password=PASSWORD, is_staff=True)
    user.groups.add(ensure_moderators_group())
    return indexer


def log_in(page: Page, base: str) -> None:
    page.goto(f"{base}/admin/login/?next=/admin/")
    page.fill("#id_username", "moderator")
    page.fill("#id_password", PASSWORD)
    page.click("input[type=submit]")


def test_a_moderator_reviews_a_dispute_and_the_arbiter_resolves_it(
    chain: Chain, demo: Indexer, live_server: object, browser: Browser
) -> None:
    indexer = demo
    target = Dispute.objects.filter(status="pending_human_review", submission_id=5).get()

    context = browser.new_context(viewport={"width": 1400, "height": 1000})
    link_wallet_to_node(context, chain.deployment.rpc_url)
    context.add_init_script(WALLET % {"arbiter": chain.deployment.arbiter})
    page = context.new_page()
    violations = record_policy_violations(page)
    base = str(live_server)

    log_in(page, base)
    expect(page.get_by_role("link", name="Review queue: disputes pending review")).to_be_visible()
    expect(page.locator("#review-waiting")).to_have_text("3 disputes waiting for review")
    shot(page, "1-index")

    page.get_by_role("link", name="Review queue: disputes pending review").click()
    rows = page.locator("#result_list tbody tr")
    expect(rows).to_have_count(3)
    shot(page, "2-queue")

    page.locator(f'a[href$="/admin/records/dispute/{target.pk}/review/"]').first.click()
    expect(page.locator("#dispute-panel")).to_contain_text(f"Dispute {target.dispute_id}")
    expect(page.locator("#submission-panel")).to_contain_text("Submission 5")
    expect(page.locator("#bounty-panel")).to_contain_text("Bounty 3")
    expect(page.locator(".hash-ok")).to_have_count(3)
    expect(page.locator("#pending-for")).to_be_visible()

    page.check("input[name=recommendation][value=uphold]")
    page.fill("textarea[name=text]", "The tests are copied from another project without attribution.")
    page.click("#note-form input[type=submit]")
    expect(page.locator("#notes")).to_contain_text("moderator, ")
    expect(page.locator("#notes")).to_contain_text("without attribution")
    shot(page, "3-review-with-note")

    uphold = page.locator("#tx-uphold")
    expect(uphold.locator(".tx-json")).to_contain_text('"value": "0x0"')
    expect(page.locator("#wallet-hint")).to_be_hidden()
    uphold.locator(".send-tx").click()
    expect(uphold.locator(".tx-result")).to_contain_text("Sent: 0x", timeout=15_000)
    shot(page, "4-resolution-sent")

    catch_up_to_head(indexer)
    page.reload()
    expect(page.locator("#dispute-status")).to_have_text("Upheld")
    expect(page.locator("#tx-uphold")).to_have_count(0)
    shot(page, "5-resolved")
    context.close()
    target.refresh_from_db()
    assert target.status == "upheld"
    assert violations == []


# How far the page and the list scroll sideways (0 when they fit), and whether every review link
# lies whole inside both the window and the list's visible box.
LAYOUT = """() => {
  const page = document.documentElement;
  const list = document.querySelector("#changelist-form .results");
  const box = list.getBoundingClientRect();
  const links = [...document.querySelectorAll('#result_list a[href$="/review/"]')].map((link) => {
    const r = link.getBoundingClientRect();
    const inView = r.width > 0 && r.left >= Math.max(0, box.left) && r.right <= Math.min(innerWidth, box.right);
    return {text: link.textContent, inView};
  });
  return {pageOverflow: page.scrollWidth - page.clientWidth, listOverflow: list.scrollWidth - list.clientWidth, links};
}"""


@pytest.mark.parametrize("width", [1280, 1024])
def test_the_queue_and_the_disputes_list_fit_the_window(
    demo: Indexer, live_server: object, browser: Browser, width: int, tmp_path: Path
) -> None:
    context = browser.new_context(viewport={"width": width, "height": 900})
    page = context.new_page()
    base = str(live_server)
    log_in(page, base)
    expect(page.locator("#review-waiting")).to_have_text("3 disputes waiting for review")
    page.screenshot(path=str(tmp_path / f"index-{width}.png"), full_page=True)

    page.locator("#review-waiting a").click()
    expect(page.locator("#result_list tbody tr")).to_have_count(3)
    expect(page.locator("#result_list thead th").first).to_have_text("Review")
    oldest = Dispute.objects.filter(status="pending_human_review").order_by("created_at", "dispute_id").first()
    assert oldest is not None
    full = checksum_address(oldest.challenger_id)
    expect(page.locator("#result_list tbody tr").first.locator(".address")).to_have_attribute("title", full)
    layout = page.evaluate(LAYOUT)
    page.screenshot(path=str(tmp_path / f"queue-{width}.png"), full_page=True)
    assert (layout["pageOverflow"], layout["listOverflow"]) == (0, 0)
    assert layout["links"] == [{"text": "review", "inView": True}] * 3

    page.goto(f"{base}/admin/records/dispute/")
    expect(page.locator("#result_list tbody tr")).to_have_count(6)
    layout = page.evaluate(LAYOUT)
    page.screenshot(path=str(tmp_path / f"disputes-{width}.png"), full_page=True)
    assert (layout["pageOverflow"], layout["listOverflow"]) == (0, 0)
    assert layout["links"] == [{"text": "review", "inView": True}] * 6
    context.close()
