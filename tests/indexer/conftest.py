"""Fixtures for the indexer tests: a configured indexer for the session's anvil chain."""

from __future__ import annotations

import os
import threading
from typing import Any

import pytest
from django.conf import settings as django_settings
from django.test import override_settings

from indexer.config import IndexerConfig
from indexer.sync import Indexer
from tests.chain import USDC, Chain
from tests.servers import database_url


def config_for(chain: Chain, **settings: Any) -> IndexerConfig:
    """The indexer's configuration from settings, as `run_indexer` builds it: the chain's
    deployment, no confirmations, a quick poll, and `settings` (`BOUNTY_LIVE_BLOCKS=8`) on top."""
    with override_settings(**{
        "BOUNTY_RPC_URL": chain.deployment.rpc_url,
        "BOUNTY_CHAIN_ID": chain.deployment.chain_id,
        "BOUNTY_CONTRACT_ADDRESS": chain.deployment.contract_address.lower(),
        "BOUNTY_USDC_ADDRESS": chain.deployment.usdc_address.lower(),
        "BOUNTY_START_BLOCK": chain.deployment.start_block,
        "BOUNTY_CONFIRMATIONS": 0,
        "BOUNTY_INDEXER_POLL_SECONDS": 0.05,
        **settings,
    }):
        return IndexerConfig.from_settings()


def catch_up_to_head(indexer: Indexer, max_rounds: int = 1_000, within: float | None = None) -> None:
    """Runs the indexer's catch-ups, as `run` does, until there is nothing left to index. Past
    `within` seconds the indexer is stopped (Stopped raised), as SIGTERM does: a wait that would
    never end fails the test instead of hanging it."""
    stopper = threading.Timer(within, indexer.stop.set) if within is not None else None
    if stopper is not None:
        stopper.start()
    try:
        for _ in range(max_rounds):
            if not indexer.catch_up():
                return
    finally:
        if stopper is not None:
            stopper.cancel()
    raise AssertionError("the indexer did not catch up")


def mine(chain: Chain, blocks: int) -> None:
    """`blocks` empty blocks at once."""
    chain.w3.provider.make_request("anvil_mine", [hex(blocks)])  # type: ignore[arg-type]


def post_bounty(chain: Chain, prompt: str) -> int:
    """Posts a bounty (an approval, then the bounty: a block each); the bounty's block."""
    chain.send(chain.usdc.functions.approve(chain.board.address, 2**256 - 1), chain.account(1))
    receipt = chain.send(chain.board.functions.createBounty(prompt, b"\x05" * 32, 7 * USDC, 3600), chain.account(1))
    return int(receipt["blockNumber"])


@pytest.fixture
def indexer(chain: Chain, db: None) -> Indexer:
    instance = Indexer(config_for(chain))
    instance.check_node()
    instance.ensure_deployment()
    return instance


def process_env(chain: Chain, **extra: str) -> dict[str, str]:
    """Environment for a `manage.py` process that shares this test's database, Redis database
    (the test worker's own) and chain."""
    redis = {"REDIS_URL": str(django_settings.CACHES["default"]["LOCATION"])} if django_settings.REDIS_URL else {}
    return {
        **os.environ,
        **redis,
        "DATABASE_URL": database_url(),
        "BOUNTY_RPC_URL": chain.deployment.rpc_url,
        "BOUNTY_CHAIN_ID": str(chain.deployment.chain_id),
        "BOUNTY_CONTRACT_ADDRESS": chain.deployment.contract_address,
        "BOUNTY_USDC_ADDRESS": chain.deployment.usdc_address,
        "BOUNTY_START_BLOCK": str(chain.deployment.start_block),
        "BOUNTY_CONFIRMATIONS": "0",
        "BOUNTY_INDEXER_POLL_MS": "50",
        **extra,
    }
