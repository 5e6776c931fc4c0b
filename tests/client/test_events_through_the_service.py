"""watch_events against the real service: a daphne server of the service and the real indexer
process on anvil, bounties posted with the client's transactions. What a position the service
handed out resumes, and what a bare integer (an older client's `since`) gets: a snapshot."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from bounty_client import TransactionBuilder, metadata_hash, metadata_to_data_uri, quote_create_amount
from tests.chain import USDC, Chain
from tests.client.test_end_to_end import send
from tests.client.test_events import Watched, watching
from tests.client.test_walkthrough import wait_for_the_indexer
from tests.servers import Server

pytestmark = [pytest.mark.chain, pytest.mark.django_db(transaction=True)]

POSTER = 1


def live_bounties(watched: Watched) -> list[int]:
    return [event.payload["id"] for event in watched.events if event.type == "bounty.created"]


def test_a_position_of_the_service_resumes_without_a_snapshot_and_a_bare_integer_gets_one(
        chain: Chain, servers: Any, indexer_process: Any) -> None:
    server: Server = servers()
    indexer_process()
    service = f"http://127.0.0.1:{server.port}"
    builder = TransactionBuilder.from_service(service)
    # Past its first sync (a bulk backfill, which ends in `resync` and a snapshot), the indexer
    # sends each change live.
    wait_for_the_indexer(service, head=chain.w3.eth.block_number)

    def post(title: str) -> None:
        metadata = {"title": title}
        quote = quote_create_amount(25 * USDC)
        send(chain, builder.approve_usdc(quote.total_amount), POSTER)
        send(chain, builder.create_bounty(metadata_uri=metadata_to_data_uri(metadata),
                                          metadata_hash=metadata_hash(metadata),
                                          reward_amount=quote.reward_amount, duration=86_400), POSTER)

    async def run() -> None:
        async with watching(service) as first:
            await first.until(lambda: len(first.snapshots) == 1, "snapshot")
            await asyncio.to_thread(post, "Seen live")
            await first.until(lambda: len(live_bounties(first)) == 1, "live bounty")
        last = first.events[-1]

        async with watching(service, since=last.position) as resumed:
            await asyncio.to_thread(post, "Seen after the resume")
            await resumed.until(lambda: len(live_bounties(resumed)) == 1, "live bounty after the resume")
        assert resumed.snapshots == [], "a position the service handed out resumes without a snapshot"
        assert resumed.events[0].seq == last.seq + 1
        assert live_bounties(resumed) == [live_bounties(first)[0] + 1]

        async with watching(service, since=str(resumed.events[-1].seq)) as bare:
            await bare.until(lambda: len(bare.snapshots) == 1, "snapshot for a bare integer")
        [snapshot] = bare.snapshots
        assert [b["id"] for b in snapshot.bounties][-2:] == live_bounties(first) + live_bounties(resumed)
        # Nothing changed since: the snapshot is current at the last change, and names the same place.
        assert (snapshot.seq, snapshot.position) == (resumed.events[-1].seq, resumed.events[-1].position)

    asyncio.run(run())
