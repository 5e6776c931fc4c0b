"""Metadata that anyone may write on chain cannot break a page: a bounty whose metadata URI is
`data:application/json,` followed by 50,000 `[` (which once made the client library's parser
raise RecursionError), with a submission whose inline metadata holds a lone surrogate escape and a
dispute on it, posted on anvil and mirrored by the real indexer, is served whole by a real daphne:
every API route, the websocket snapshot, the admin's lists and change pages and the moderators'
review page of the dispute."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from django.conf import settings
from django.contrib.auth.models import User
from django.test import Client
from django.urls import reverse
from django.utils.html import escape

from bounty_client import TransactionBuilder, quote_create_amount
from bounty_client.deployment import Deployment as ClientDeployment
from indexer.sync import Indexer
from records.models import Bounty, Dispute, Submission
from tests.chain import USDC, Chain
from tests.client.test_end_to_end import send
from tests.indexer.conftest import catch_up_to_head, config_for, process_env
from tests.servers import Server, start_daphne, stop
from tests.websocket.conftest import open_client, receive_n

pytestmark = pytest.mark.django_db(transaction=True)

POSTER, CLAIMANT, GROUT = 1, 2, 3
DEEP = "data:application/json," + "[" * 50_000
LONE_SURROGATE = 'data:application/json,{"summary":"\\ud800"}'
DISPUTE = 'data:application/json,{"reason":"Copied"}'
# The deep URI is stored by the contract: about 36.3 million gas, more than anvil's 30 million a
# block. Each transaction is bounded by the block, so the block is made roomier for this test.
ROOMY_BLOCK_GAS = 60_000_000


@pytest.fixture
def roomy_blocks(chain: Chain) -> Iterator[None]:
    before = chain.w3.eth.get_block("latest")["gasLimit"]
    chain.w3.provider.make_request("evm_setBlockGasLimit", [hex(ROOMY_BLOCK_GAS)])  # type: ignore[arg-type]
    try:
        yield
    finally:
        chain.w3.provider.make_request("evm_setBlockGasLimit", [hex(before)])  # type: ignore[arg-type]


@pytest.fixture
def server(chain: Chain) -> Iterator[Server]:
    instance = start_daphne(process_env(chain))
    try:
        yield instance
    finally:
        stop(instance.process)


def post_on_chain(chain: Chain) -> None:
    """The bounty with the deep URI, a submission with the lone surrogate and a dispute on it."""
    builder = TransactionBuilder(ClientDeployment(chain.deployment.chain_id, chain.deployment.contract_address,
                                                  chain.deployment.usdc_address))
    quote = quote_create_amount(100 * USDC)
    send(chain, builder.approve_usdc(quote.total_amount), POSTER)
    send(chain, builder.create_bounty(metadata_uri=DEEP, metadata_hash="0x" + "01" * 32,
                                      reward_amount=quote.reward_amount, duration=86_400), POSTER)
    send(chain, builder.approve_usdc(quote.bond_amount), CLAIMANT)
    send(chain, builder.submit(bounty_id=1, metadata_uri=LONE_SURROGATE, metadata_hash="0x" + "02" * 32), CLAIMANT)
    send(chain, builder.approve_usdc(5 * USDC), GROUT)
    send(chain, builder.dispute(submission_id=1, metadata_uri=DISPUTE, metadata_hash="0x" + "03" * 32), GROUT)
    catch_up_to_head(Indexer(config_for(chain)))


def moderator_cookies(moderator: User) -> dict[str, str]:
    """A moderator's session cookie, for a request to the server (sessions live in the database)."""
    client = Client()
    client.force_login(moderator)
    return {settings.SESSION_COOKIE_NAME: client.cookies[settings.SESSION_COOKIE_NAME].value}


def get(server: Server, path: str, **options: Any) -> httpx.Response:
    return httpx.get(server.http(path), timeout=30, **options)


def test_hostile_metadata_posted_on_chain_is_served_by_every_route_and_page(
        chain: Chain, roomy_blocks: None, server: Server, moderator: User) -> None:
    post_on_chain(chain)
    routes = {"bounty": ("/bounties", DEEP), "submission": ("/submissions", LONE_SURROGATE),
              "dispute": ("/disputes", DISPUTE)}

    for kind, (route, uri) in routes.items():
        (listed,) = get(server, route).raise_for_status().json()
        assert listed["metadata_uri"] == uri
        assert get(server, f"{route}/1").raise_for_status().json()["metadata_uri"] == uri
        assert get(server, f"{route}/1/overview").raise_for_status().json()[kind]["metadata_uri"] == uri

    with open_client(server.url()) as client:
        snapshot = receive_n(client, 4)
    assert [(m["type"], m["payload"].get("metadata_uri")) for m in snapshot] == [
        ("bounty.created", DEEP), ("submission.created", LONE_SURROGATE), ("dispute.created", DISPUTE),
        ("snapshot.complete", None)]

    cookies = moderator_cookies(moderator)
    dispute = Dispute.objects.get()
    review = get(server, reverse("admin:records_dispute_review", args=[dispute.pk]), cookies=cookies)
    assert review.status_code == 200, review.text[-2_000:]
    assert f"Not inline (<code>{DEEP[:199]}…</code>)" in review.text  # the page shortens a URI it cannot read
    assert escape('"summary": "\\ud800"') in review.text
    for model in (Bounty, Submission, Dispute):
        record = model.objects.get()
        change = get(server, reverse(f"admin:records_{model._meta.model_name}_change", args=[record.pk]),
                     cookies=cookies)
        assert change.status_code == 200, change.text[-2_000:]
        assert escape(record.metadata_uri) in change.text
    for name in ("bounty", "submission", "dispute", "disputereviewqueue"):
        listed = get(server, reverse(f"admin:records_{name}_changelist"), cookies=cookies)
        assert listed.status_code == 200, listed.text[-2_000:]
