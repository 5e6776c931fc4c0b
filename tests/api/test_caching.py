"""Conditional responses on every read route: weak ETags, Cache-Control, If-None-Match, HEAD."""

from __future__ import annotations

from typing import Any

import pytest
import redis
from django.core.cache import cache
from django.http import HttpResponseBase
from django.test import Client

from records.models import Deployment
from tests.api import helpers as h
from tests.factories import bump_version, make_bounty, make_dispute, set_status
from tests.servers import ThrowawayRedis

CACHE_CONTROL = "public, no-cache"


@pytest.fixture
def tree(active: Deployment) -> h.Tree:
    return h.make_tree(active, disputes_per_submission=(2,))


def fetch(api: Client, template: str, tree: h.Tree, tag: str | None = None, method: str = "get"
          ) -> HttpResponseBase:
    headers = {} if tag is None else {"If-None-Match": tag}
    response: HttpResponseBase = getattr(api, method)(template.format(**tree.ids), headers=headers)
    return response


def assert_not_modified(response: HttpResponseBase, etag: str) -> None:
    """A 304 with the tag, no body and no Content-Type (it describes no content)."""
    assert response.status_code == 304
    assert response["ETag"] == etag
    assert response["Cache-Control"] == CACHE_CONTROL
    assert "Content-Type" not in response
    assert h.content(response) == b""


@pytest.mark.parametrize("template", h.READ_ROUTES)
def test_every_200_has_a_weak_etag_and_public_no_cache_also_when_a_tag_does_not_match(
        api: Client, tree: h.Tree, template: str) -> None:
    full = fetch(api, template, tree)
    etag, body = full["ETag"], h.content(full)
    assert full.status_code == 200 and body
    assert etag.startswith('W/"') and etag.endswith('"') and len(etag) > 5
    assert full["Cache-Control"] == CACHE_CONTROL
    for header in ('W/"0000"', '"0000"', etag[:-2] + '"', "W/", "garbage", etag.removeprefix("W/")[1:-1]):
        response = fetch(api, template, tree, header)
        assert response.status_code == 200, header
        assert (h.content(response), response["ETag"], response["Cache-Control"]) == (body, etag, CACHE_CONTROL)


@pytest.mark.parametrize("template", h.READ_ROUTES)
def test_if_none_match_with_the_tag_a_list_holding_it_star_or_its_strong_form_is_a_304(
        api: Client, tree: h.Tree, template: str) -> None:
    etag = fetch(api, template, tree)["ETag"]
    strong = etag.removeprefix("W/")
    for header in (etag, f'"nope", {etag}', f'{etag},W/"other"', f' W/"x" ,  {etag} ', "*", strong,
                   f'W/"x", {strong}'):
        for method in ("get", "head"):
            assert_not_modified(fetch(api, template, tree, header, method), etag)


@pytest.mark.parametrize("template", h.READ_ROUTES)
def test_the_etag_changes_when_the_data_changes(api: Client, tree: h.Tree, template: str) -> None:
    before = fetch(api, template, tree)
    body = h.content(before)
    set_status(tree.bounty, "refunded")
    set_status(tree.submissions[0], "rejected")
    set_status(tree.disputes[0], "upheld")
    after = fetch(api, template, tree, before["ETag"])
    assert after.status_code == 200
    assert after["ETag"] != before["ETag"]
    assert h.content(after) != body
    assert_not_modified(fetch(api, template, tree, after["ETag"]), after["ETag"])


@pytest.mark.parametrize("template", h.READ_ROUTES)
def test_the_etag_is_equal_for_an_equal_body(api: Client, tree: h.Tree, template: str) -> None:
    """The same request after the cache is gone (another worker, a restart) has the same tag."""
    first = fetch(api, template, tree)
    body = h.content(first)
    cache.clear()
    second = fetch(api, template, tree)
    assert (second["ETag"], h.content(second)) == (first["ETag"], body)
    cache.clear()
    assert_not_modified(fetch(api, template, tree, first["ETag"]), first["ETag"])


@pytest.mark.parametrize("template", ["/bounties/{b}", "/bounties?limit=2", "/disputes/{d}/overview",
                                      "/submissions/{s}"])
def test_a_body_with_an_unchanged_version_keeps_its_tag(api: Client, tree: h.Tree, template: str) -> None:
    """A change elsewhere moves the data version; the body, and so the tag, stays the same."""
    first = fetch(api, template, tree)
    bump_version(tree.bounty.deployment)
    second = fetch(api, template, tree)
    assert (second["ETag"], h.content(second)) == (first["ETag"], h.content(first))


def test_a_new_record_changes_the_list_tags(api: Client, active: Deployment, tree: h.Tree) -> None:
    templates = ["/bounties", "/bounties?limit=5", "/disputes", "/disputes?bounty_id={b}",
                 "/bounties/{b}/overview"]
    before = {template: fetch(api, template, tree)["ETag"] for template in templates}
    make_bounty(active)
    make_dispute(tree.submissions[0])
    for template in templates:
        assert fetch(api, template, tree, before[template]).status_code == 200, template


@pytest.mark.parametrize("template", [*h.READ_ROUTES, "/health", "/bounties/999", "/bounties/{b}?chain_id=1",
                                      "/nope"])
def test_head_answers_the_status_and_headers_of_get_without_a_body(api: Client, tree: h.Tree,
                                                                   template: str) -> None:
    got = fetch(api, template, tree)
    head = fetch(api, template, tree, method="head")
    assert head.status_code == got.status_code
    assert h.content(head) == b""
    for name in ("ETag", "Cache-Control", "Content-Type", "X-RateLimit-Limit"):
        assert head.get(name) == got.get(name), name



@pytest.mark.parametrize("template", ["/bounties/999", "/bounties/{b}?chain_id=91342", "/disputes?bounty_id=x"])
def test_errors_are_not_answered_as_not_modified(api: Client, tree: h.Tree, template: str) -> None:
    response = fetch(api, template, tree, "*")
    assert response.status_code in (400, 404)
    assert "ETag" not in response


def test_a_redis_whose_memory_is_full_refuses_the_cache_and_answers_go_on_unchanged(
        api: Client, settings: Any, tree: h.Tree, caplog: pytest.LogCaptureFixture) -> None:
    # A real Redis that refuses every write ("OOM command not allowed"): not an outage, only the
    # refused calls are done without, and said at most once a minute.
    with ThrowawayRedis("--maxmemory", "1", "--maxmemory-policy", "noeviction") as full:
        expected = api.get(f"/bounties/{tree.bounty.bounty_id}/overview").content
        own = settings.CACHES
        settings.CACHES = {"default": {"BACKEND": "bountysite.cache.RedisCache", "LOCATION": full.url}}
        answers = [api.get(f"/bounties/{tree.bounty.bounty_id}/overview") for _ in range(3)]
        health = api.get("/health").json()
        settings.CACHES = own  # before the server stops: the tests' teardown clears the cache
        with pytest.raises(redis.exceptions.OutOfMemoryError):  # it does refuse
            redis.Redis.from_url(full.url).set("a", "b")
    assert [(response.status_code, response.content) for response in answers] == [(200, expected)] * 3
    assert health["redis"]["status"] == "ok"
    refusals = [record.getMessage() for record in caplog.records if "Redis refused" in record.getMessage()]
    assert len(refusals) <= 1 and all("maxmemory" in message for message in refusals), refusals
