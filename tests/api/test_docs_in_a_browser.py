"""Swagger UI and Redoc in a real browser, offline: each page renders the service's operations from
/api/schema/, and nothing it loads comes from anywhere but the service (drf-spectacular-sidecar
serves their assets), so the docs work on a machine without internet access."""

from __future__ import annotations

from urllib.parse import urlsplit

import pytest
from playwright.sync_api import Browser, Route, expect

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.mark.parametrize(("path", "operation"), [
    ("/api/docs/", "#operations-bounties-bounties_list"),
    ("/api/redoc/", "[id='operation/bounties_list']"),
], ids=["swagger-ui", "redoc"])
def test_the_docs_page_renders_every_operation_from_local_assets_only(
        live_server: object, browser: Browser, path: str, operation: str) -> None:
    base = str(live_server)
    local, elsewhere = urlsplit(base).netloc, []

    def only_local(route: Route) -> None:
        if urlsplit(route.request.url).netloc in (local, ""):  # "" for data: and blob: URLs
            route.continue_()
        else:
            elsewhere.append(route.request.url)
            route.abort()

    context = browser.new_context()
    context.route("**/*", only_local)
    page = context.new_page()
    errors: list[str] = []
    page.on("pageerror", lambda error: errors.append(str(error)))
    page.goto(base + path)
    expect(page.locator(operation).first).to_be_attached(timeout=20_000)
    for route in ("/bounties/{record_id}/overview", "/submissions/{record_id}", "/disputes", "/health"):
        expect(page.get_by_text(route, exact=True).first).to_be_attached()
    context.close()
    assert elsewhere == [] and errors == []
