"""indexer/config.py: the indexer's configuration is its settings (and the indexer's constants)."""

from __future__ import annotations

from typing import Any

import pytest

from indexer.config import BATCH_LOGS, INITIAL_SPAN, KEPT_BLOCKS, READ_AHEAD, IndexerConfig
from indexer.errors import IndexerError

CONTRACT = "0xe7f1725E7734CE288F8367e1Bb143E90bb3F0512"
USDC = "0x5fbdb2315678afecb367f032d93f642f64180aa3"


@pytest.fixture
def configured(settings: Any) -> Any:
    settings.BOUNTY_RPC_URL = "http://node.example:8545"
    settings.BOUNTY_CONTRACT_ADDRESS = CONTRACT
    settings.BOUNTY_USDC_ADDRESS = USDC
    return settings


def test_it_is_built_from_settings(configured: Any) -> None:
    configured.BOUNTY_CHAIN_ID = 8453
    configured.BOUNTY_START_BLOCK = 100
    configured.BOUNTY_CONFIRMATIONS = "safe"
    configured.BOUNTY_INDEXER_POLL_SECONDS = 0.5
    configured.BOUNTY_INDEXER_MAX_WAIT_SECONDS = 30.0
    configured.BOUNTY_LIVE_BLOCKS = 8
    configured.BOUNTY_GETLOGS_MAX_BLOCKS = 2_000
    configured.BOUNTY_RPC_TIMEOUT_SECONDS = 5
    configured.BOUNTY_RPC_MAX_CONCURRENCY = 4
    configured.BOUNTY_RPC_MAX_REQUESTS_PER_SECOND = 25
    configured.BOUNTY_RPC_MAX_RESPONSE_BYTES = 1_000_000
    configured.BOUNTY_RPC_MAX_RETRY_AFTER_SECONDS = 30
    assert IndexerConfig.from_settings() == IndexerConfig(
        rpc_url="http://node.example:8545", chain_id=8453, contract_address=CONTRACT.lower(), usdc_address=USDC,
        start_block=100, confirmations="safe", poll_interval=0.5, max_wait=30.0, live_blocks=8,
        initial_span=INITIAL_SPAN, max_span=2_000, kept_blocks=KEPT_BLOCKS, batch_logs=BATCH_LOGS,
        read_ahead=READ_AHEAD, rpc_timeout=5, rpc_max_response_bytes=1_000_000, rpc_max_retry_after=30,
        max_concurrency=4, requests_per_second=25)


def test_the_first_span_is_never_more_than_the_nodes_cap(configured: Any) -> None:
    configured.BOUNTY_GETLOGS_MAX_BLOCKS = 5
    config = IndexerConfig.from_settings()
    assert (config.initial_span, config.max_span) == (5, 5)


def test_it_names_every_missing_setting(settings: Any) -> None:
    settings.BOUNTY_RPC_URL = None
    settings.BOUNTY_CONTRACT_ADDRESS = None
    settings.BOUNTY_USDC_ADDRESS = "0x5fbdb2315678afecb367f032d93f642f64180aa3"
    with pytest.raises(IndexerError, match="missing configuration: BOUNTY_RPC_URL, BOUNTY_CONTRACT_ADDRESS "):
        IndexerConfig.from_settings()
