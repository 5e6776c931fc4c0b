"""Every record kind of records.kinds reaches the read side: its JSON (records.representation),
its overview (records.selectors), its viewset and its operations (records.api), its links on the
front page, and the routes that answer CORS (bountysite.settings)."""

from __future__ import annotations

import re

import pytest
from django.conf import settings
from django.test import RequestFactory
from rest_framework.request import Request

from records.api import schema, views
from records.api.root import service_links
from records.kinds import KINDS, RecordKind
from records.representation import RENDERERS
from records.selectors import OVERVIEWS

BY_KIND = pytest.mark.parametrize("kind", KINDS, ids=lambda kind: kind.name)


def test_each_kind_has_its_json_and_its_overview() -> None:
    assert list(RENDERERS) == list(OVERVIEWS) == [kind.name for kind in KINDS]


def test_each_kind_has_its_viewset_in_the_kinds_order() -> None:
    assert [viewset.kind for viewset in views.RECORD_VIEWSETS] == list(KINDS)


def test_each_kind_has_its_operations() -> None:
    assert list(schema.RECORD_SCHEMAS) == [kind.name for kind in KINDS]


@BY_KIND
def test_the_front_page_links_each_kind(kind: RecordKind) -> None:
    links = service_links(Request(RequestFactory().get("/")))["api"]
    assert (links[kind.resource], links[kind.name], links[f"{kind.name}_overview"]) == (
        f"http://testserver/{kind.resource}", f"http://testserver/{kind.resource}/{{id}}",
        f"http://testserver/{kind.resource}/{{id}}/overview")


def test_cors_answers_the_routes_of_exactly_the_kinds() -> None:
    """CORS_URLS_REGEX names the resources itself: settings import no application code (records.kinds
    imports the change types, the channel layer and the Redis reach, which settings configure)."""
    named = re.search(r"\(\?:([a-z|]+)\)\(\?:/\.\*\)\?", settings.CORS_URLS_REGEX)
    assert named is not None
    assert named.group(1).split("|") == [kind.resource for kind in KINDS]


@BY_KIND
@pytest.mark.parametrize("route", ["/{}", "/{}/7", "/{}/7/overview"])
def test_cors_answers_each_kinds_routes(kind: RecordKind, route: str) -> None:
    assert re.match(settings.CORS_URLS_REGEX, route.format(kind.resource))
