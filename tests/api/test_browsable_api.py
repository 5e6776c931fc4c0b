"""DRF's browsable API: a browser (Accept: text/html) gets an HTML page around the same JSON that
programs get, for arrays, pages, records and overviews."""

from __future__ import annotations

import html

import orjson
import pytest
from django.test import Client
from playwright.sync_api import Browser, expect

from records.models import Deployment
from tests.api import helpers as h

BROWSER_ACCEPT = "text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8"


@pytest.fixture
def html_client() -> Client:
    return Client(HTTP_ACCEPT=BROWSER_ACCEPT)


@pytest.mark.parametrize("template", ["/bounties", "/bounties?limit=2", "/submissions?cursor=1", "/disputes?q=",
                                      "/bounties/{b}", "/submissions/{s}/overview", "/disputes/{d}/overview"])
def test_a_browser_gets_html_around_the_json_body(api: Client, html_client: Client, active: Deployment,
                                                  template: str) -> None:
    tree = h.make_tree(active)
    path = template.format(**tree.ids)
    page = html_client.get(path)
    assert page.status_code == 200 and page["Content-Type"].startswith("text/html")
    text = html.unescape(page.content.decode())
    assert "Django REST framework" in text
    data = orjson.loads(h.content(api.get(path)))
    rows = data if isinstance(data, list) else data.get("items", [data])
    for row in rows:  # every record's exact JSON appears in the page (pretty-printed)
        record = row.get("bounty") or row.get("submission") or row.get("dispute") or row
        assert f'"tx_hash": "{record["tx_hash"]}"' in text, path
        assert f'"created_at": "{record["created_at"]}"' in text, path


@pytest.mark.django_db(transaction=True)
def test_a_page_of_the_browsable_api_works_in_a_real_browser(live_server: object, browser: Browser,
                                                              active: Deployment) -> None:
    """Chromium renders the page with its styles and scripts (every asset loads), shows the page
    object, and the format menu leads to the same data as JSON."""
    tree = h.make_tree(active)
    context = browser.new_context()
    page = context.new_page()
    failed: list[str] = []
    page.on("requestfailed", lambda request: failed.append(request.url))
    page.on("response", lambda response: failed.append(response.url) if response.status >= 400 else None)
    errors: list[str] = []
    page.on("pageerror", lambda error: errors.append(str(error)))
    page.goto(f"{live_server}/bounties?limit=2")
    body = page.locator(".response-info")
    expect(body).to_contain_text('"total": 1')
    expect(body).to_contain_text(f'"id": {tree.ids["b"]}')
    assert page.evaluate("getComputedStyle(document.querySelector('.navbar')).position") != "static"  # CSS on
    page.locator("#get-form .dropdown-toggle").click()  # Bootstrap's script opens the menu
    page.locator("#get-form .dropdown-menu a", has_text="json").click()
    expect(page.locator("body")).to_contain_text('"next_cursor":null')
    context.close()
    assert failed == [] and errors == []
