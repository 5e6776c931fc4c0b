"""DRF's browsable API: a browser (Accept: text/html) gets an HTML page around the same JSON that
programs get, for arrays, pages, records and overviews."""

from __future__ import annotations

import html

import orjson
import pytest
from django.test import Client

from records.models import Deployment
from tests.api import helpers as h

BROWSER_ACCEPT = "text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8"


@pytest.fixture
def browser() -> Client:
    return Client(HTTP_ACCEPT=BROWSER_ACCEPT)


@pytest.mark.parametrize("template", ["/bounties", "/bounties?limit=2", "/submissions?cursor=1", "/disputes?q=",
                                      "/bounties/{b}", "/submissions/{s}/overview", "/disputes/{d}/overview"])
def test_a_browser_gets_html_around_the_json_body(api: Client, browser: Client, active: Deployment,
                                                  template: str) -> None:
    tree = h.make_tree(active)
    path = template.format(**tree.ids)
    page = browser.get(path)
    assert page.status_code == 200 and page["Content-Type"].startswith("text/html")
    text = html.unescape(page.content.decode())
    assert "Django REST framework" in text
    data = orjson.loads(h.content(api.get(path)))
    rows = data if isinstance(data, list) else data.get("items", [data])
    for row in rows:  # every record's exact JSON appears in the page (pretty-printed)
        record = row.get("bounty") or row.get("submission") or row.get("dispute") or row
        assert f'"tx_hash": "{record["tx_hash"]}"' in text, path
        assert f'"created_at": "{record["created_at"]}"' in text, path
