"""The client end to end against the real service: transactions built by the client, signed and
sent to anvil, indexed by the real indexer, then read back through the client's read client from
the real read API (pytest-django's live server), with the deployment learned from /health."""

from __future__ import annotations

import pytest
from django.test import override_settings

from bounty_client import ReadClient, TransactionBuilder, metadata_hash, metadata_to_data_uri, quote_create_amount
from bounty_client.errors import RequestFailedError
from indexer.sync import Indexer
from tests.chain import USDC, Chain
from tests.client.conftest import exactly
from tests.client.test_end_to_end import send
from tests.indexer.conftest import catch_up_to_head, config_for

pytestmark = pytest.mark.django_db(transaction=True)

POSTER, CLAIMANT, GROUT = 1, 2, 3


def test_what_the_builder_sends_shows_through_the_read_client(chain: Chain, live_server: object) -> None:
    deployment = chain.deployment
    with override_settings(BOUNTY_CHAIN_ID=deployment.chain_id,
                           BOUNTY_CONTRACT_ADDRESS=deployment.contract_address.lower(),
                           BOUNTY_USDC_ADDRESS=deployment.usdc_address.lower(),
                           BOUNTY_RATE_LIMIT=0):
        builder = TransactionBuilder.from_service(str(live_server))
        quote = quote_create_amount(100 * USDC)
        bounty_meta, submission_meta, dispute_meta = {"title": "Port it"}, {"summary": "Done"}, {"why": "Copied"}
        send(chain, builder.approve_usdc(quote.total_amount), POSTER)
        send(chain, builder.create_bounty(metadata_uri=metadata_to_data_uri(bounty_meta),
                                          metadata_hash=metadata_hash(bounty_meta),
                                          reward_amount=quote.reward_amount, duration=86_400), POSTER)
        send(chain, builder.approve_usdc(quote.bond_amount), CLAIMANT)
        send(chain, builder.submit(bounty_id=1, metadata_uri=metadata_to_data_uri(submission_meta),
                                   metadata_hash=metadata_hash(submission_meta)), CLAIMANT)
        send(chain, builder.approve_usdc(5 * USDC), GROUT)
        send(chain, builder.dispute(submission_id=1, metadata_uri=metadata_to_data_uri(dispute_meta),
                                    metadata_hash=metadata_hash(dispute_meta)), GROUT)
        catch_up_to_head(Indexer(config_for(chain)))

        with ReadClient(str(live_server)) as client:
            bounty = client.get_bounty(1)
            assert (bounty["status"], bounty["bounty_amount"], bounty["metadata_hash"]) == (
                "open", str(quote.reward_amount), metadata_hash(bounty_meta))
            assert bounty["contract_address"] == builder.deployment.contract_address
            (submission,) = client.list_submissions(1)
            assert (submission["status"], submission["claimant"]) == ("disputed", chain.account(CLAIMANT))
            (dispute,) = client.list_disputes(1)
            assert (dispute["status"], dispute["challenger_id"]) == ("pending_human_review", chain.account(GROUT))
            assert [d["id"] for d in client.list_disputes(bounty_id=1)] == [1]
            assert client.bounty_overview(1)["bounty"]["submission_count"] == 1
            with pytest.raises(RequestFailedError, match=exactly("request failed: 404")) as raised:
                client.get_bounty(2)
            assert (raised.value.status, raised.value.detail) == (404, "bounty 2 not found")
