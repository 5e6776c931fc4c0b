"""Conditional responses on every read route: weak ETags, Cache-Control, If-None-Match, HEAD."""

from __future__ import annotations

from typing import Any

import orjson
import pytest
import redis
from django.core.cache import cache
from django.http import HttpResponseBase
from django.test import Client

from records.models import Bounty, Deployment
from tests.api import helpers as h
from tests.factories import ACTIVE_CONTRACT, bump_version, make_bounty, make_dispute, set_status
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
def test_a_body_unchanged_by_a_new_version_keeps_its_digest_and_304s_the_old_tag(
        api: Client, tree: h.Tree, template: str) -> None:
    """A change elsewhere moves the data version: the body, and so the tag's digest, stays the same,
    its floor (the seq it was read at) moves on, and the old tag still matches it."""
    first = fetch(api, template, tree)
    bump_version(tree.bounty.deployment)
    second = fetch(api, template, tree)
    assert h.content(second) == h.content(first)
    digest, _, floor = first["ETag"].partition("@")
    assert second["ETag"].partition("@")[0] == digest and second["ETag"].partition("@")[2] != floor
    assert_not_modified(fetch(api, template, tree, first["ETag"]), second["ETag"])


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


# ------------------------------------------------------------------ what the cache holds


def rewrite_bounty_bodies() -> None:
    """Changes every stored bounty's body without moving the data version, as no indexer commit
    would: an answer that still shows the old body came from the cache."""
    for bounty in Bounty.objects.all():
        Bounty.objects.filter(pk=bounty.pk).update(body=orjson.dumps({**orjson.loads(bounty.body),
                                                                      "prompt": "rewritten"}).decode())


def active_qualifiers(case: str) -> str:
    address = ACTIVE_CONTRACT.lower() if case == "lower" else h.checksummed(ACTIVE_CONTRACT)
    return f"chain_id=91342&contract_address={address}"


EQUIVALENT = [
    ("/bounties?limit=50&sort=reward&dir=desc", "/bounties?dir=DESC&sort=bounty_amount&limit=050"),
    ("/bounties?limit=5&cursor=0", "/bounties?cursor=00&limit=%2B5"),
    ("/bounties?limit=100", "/bounties?limit=500"),
    ("/bounties?q=0X0000", "/bounties?dir=desc&q=0x0000&sort=id&limit=50"),
    ("/bounties?status=open,refunded&limit=5", "/bounties?limit=5&status=REFUNDED&status=open"),
    ("/bounties?limit=50", "/bounties?q="),
    ("/bounties?limit=5&poster={poster}", "/bounties?poster={poster_checksummed}&limit=5&sort=nonsense"),
    ("/bounties/{b}", "/bounties/{b}?" + active_qualifiers("checksummed")),
    ("/bounties/{b}/overview?" + active_qualifiers("lower"), "/bounties/0{b}/overview?" + active_qualifiers("mixed")),
]


@pytest.mark.parametrize(("first", "second"), EQUIVALENT)
def test_equivalent_requests_share_one_cached_answer(api: Client, tree: h.Tree, first: str, second: str) -> None:
    poster = tree.bounty.poster
    values = {**tree.ids, "poster": poster, "poster_checksummed": h.checksummed(poster)}
    cached = fetch(api, first, tree) if "{poster" not in first else api.get(first.format(**values))
    assert cached.status_code == 200 and b"rewritten" not in h.content(cached)
    rewrite_bounty_bodies()
    again = api.get(second.format(**values))
    assert (again.status_code, h.content(again), again["ETag"]) == (200, h.content(cached), cached["ETag"])
    if first.startswith("/bounties?"):  # another page reads the records again
        assert b"rewritten" in h.content(api.get(first.format(**values) + "&limit=7"))


@pytest.mark.parametrize(("first", "second"), [("/bounties?sort=reward", "/bounties?dir=Desc&sort=bounty_amount"),
                                               ("/bounties", "/bounties?sort=nonsense&dir=sideways")])
def test_equivalent_unpaged_lists_have_one_tag(api: Client, tree: h.Tree, first: str, second: str) -> None:
    assert api.get(first)["ETag"] == api.get(second)["ETag"]


def test_a_body_over_the_size_limit_is_served_but_not_cached(api: Client, tree: h.Tree, settings: Any) -> None:
    small = fetch(api, "/bounties/{b}", tree)
    settings.BOUNTY_API_CACHE_MAX_BODY_BYTES = len(h.content(small)) + 100
    large = fetch(api, "/bounties/{b}/overview", tree)
    assert len(h.content(large)) > settings.BOUNTY_API_CACHE_MAX_BODY_BYTES
    rewrite_bounty_bodies()
    assert b"rewritten" not in h.content(fetch(api, "/bounties/{b}", tree))  # cached
    assert b"rewritten" in h.content(fetch(api, "/bounties/{b}/overview", tree))  # read again


def test_one_client_adds_a_bounded_number_of_entries_and_others_keep_theirs(api: Client, tree: h.Tree,
                                                                           settings: Any) -> None:
    settings.BOUNTY_API_CACHE_ENTRIES_PER_CLIENT = 3
    pages = [f"/bounties?limit={n}" for n in range(1, 6)]
    for page in pages:
        assert api.get(page, REMOTE_ADDR="203.0.113.7").status_code == 200
    assert api.get("/bounties?limit=9", REMOTE_ADDR="203.0.113.8").status_code == 200  # another client's
    rewrite_bounty_bodies()
    stored = [b"rewritten" not in h.content(api.get(page, REMOTE_ADDR="203.0.113.9")) for page in pages]
    assert stored == [True, True, True, False, False]
    assert b"rewritten" not in h.content(api.get("/bounties?limit=9"))
