"""Fixtures for the indexer tests: a configured indexer for the session's anvil chain."""

from __future__ import annotations

from typing import Any

import pytest

from indexer.sync import Indexer, IndexerConfig
from tests.chain import Chain


def config_for(chain: Chain, **overrides: Any) -> IndexerConfig:
    values: dict[str, Any] = {
        "rpc_url": chain.deployment.rpc_url,
        "chain_id": chain.deployment.chain_id,
        "contract_address": chain.deployment.contract_address.lower(),
        "usdc_address": chain.deployment.usdc_address.lower(),
        "start_block": chain.deployment.start_block,
        "confirmations": 0,
        "poll_interval": 0.05,
    }
    values.update(overrides)
    return IndexerConfig(**values)


def index_to_head(indexer: Indexer, max_steps: int = 10_000) -> None:
    """Runs the indexer's steps until it is caught up with the safe head."""
    for _ in range(max_steps):
        if not indexer.step():
            return
    raise AssertionError("the indexer did not catch up")


@pytest.fixture
def indexer(chain: Chain, db: None) -> Indexer:
    instance = Indexer(config_for(chain))
    instance.check_node()
    instance.ensure_deployment()
    return instance
