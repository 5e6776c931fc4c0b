"""GET /: the front page links every entry point, as JSON for programs and HTML for browsers."""

from __future__ import annotations

import json
import re
from typing import Any
from urllib.parse import urlsplit

import pytest
from django.contrib import admin
from django.test import Client
from django.urls import resolve
from pytest_django import DjangoAssertNumQueries

from tests.factories import make_bounty, make_dispute, make_submission

BROWSER = "text/html,application/xhtml+xml,application/xml;q=0.9,image/avif,image/webp,*/*;q=0.8"
ENTRY_POINTS = {"/health", "/bounties", "/submissions", "/disputes", "/api/docs/", "/api/redoc/", "/api/schema/",
                "/admin/"}


def _links(api: Client) -> dict[str, Any]:
    response = api.get("/")
    assert response.status_code == 200
    assert response["Content-Type"] == "application/json"
    body: dict[str, Any] = json.loads(response.content)
    return body


def test_a_browser_gets_a_page_linking_every_entry_point(django_assert_num_queries: DjangoAssertNumQueries) -> None:
    with django_assert_num_queries(0):
        response = Client(HTTP_ACCEPT=BROWSER).get("/")
    assert response.status_code == 200
    assert response["Content-Type"].startswith("text/html")
    assert "Accept" in response["Vary"]
    page = response.content.decode()
    hrefs = {urlsplit(href).path for href in re.findall(r'href="([^"]+)"', page)}
    assert hrefs == ENTRY_POINTS
    assert "/bounties/{id}/overview" in page and "ws://testserver/ws/events" in page


@pytest.mark.parametrize("headers", [{"Accept": "application/json"}, {"Accept": "*/*"}, {}],
                         ids=["json", "anything", "no-accept"])
def test_a_program_gets_the_links_as_json(headers: dict[str, str]) -> None:
    response = Client(headers=headers).get("/")
    assert response.status_code == 200
    assert response["Content-Type"] == "application/json"
    assert "Accept" in response["Vary"]
    links = json.loads(response.content)
    assert links["service"] == "Bounty read service"
    assert links["api"]["bounty_overview"] == "http://testserver/bounties/{id}/overview"
    assert links["events"] == "ws://testserver/ws/events"
    assert links["admin"] == "http://testserver/admin/"


def test_every_linked_route_answers(api: Client) -> None:
    bounty = make_bounty(None)
    submission = make_submission(bounty)
    dispute = make_dispute(submission)
    ids = {"bounties": bounty.bounty_id, "submissions": submission.submission_id, "disputes": dispute.dispute_id}
    links = _links(api)
    browser = Client(HTTP_ACCEPT=BROWSER)
    urls = [*links["api"].values(), *links["docs"].values(), links["admin"]]
    assert {urlsplit(url).path for url in urls} >= ENTRY_POINTS
    for url in urls:
        path = urlsplit(url).path
        path = path.replace("{id}", str(ids.get(path.split("/")[1], 0)))
        assert resolve(path).url_name is not None, path  # not the catch-all 404
        status = browser.get(path).status_code
        assert status == (302 if path == "/admin/" else 200), path


def test_the_admins_view_site_link_leads_here() -> None:
    assert admin.site.site_url == "/"
    assert Client(HTTP_ACCEPT=BROWSER).get(admin.site.site_url).status_code == 200


@pytest.mark.parametrize("method", ["post", "put", "patch", "delete"])
def test_it_answers_only_get_head_and_options(method: str) -> None:
    response = getattr(Client(HTTP_ACCEPT="application/json"), method)("/")
    assert response.status_code == 405
    assert json.loads(response.content) == {"detail": f'Method "{method.upper()}" not allowed.'}
