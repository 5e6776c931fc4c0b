"""Fixtures of the read API tests: a JSON client, an empty cache, the active deployment and others,
a tree of records in it, and a keep-alive HTTP/1.1 connection to the module's `server`.

Every test runs with the active deployment configured as the factories' (chain 91342,
ACTIVE_CONTRACT, ACTIVE_USDC), no indexer RPC and a rate limit too generous to be reached;
test_rate_limit.py sets its own.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from django.core.cache import cache
from django.test import Client
from pytest_django.fixtures import Settings

from records.models import Deployment
from tests.api import helpers as h
from tests.api.helpers import OTHER_CHAIN_ID, OTHER_CONTRACT
from tests.api.wire import Wire
from tests.factories import ACTIVE_CONTRACT, ACTIVE_USDC, make_deployment
from tests.servers import Server


@pytest.fixture(autouse=True)
def api_settings(settings: Settings, db: None) -> Settings:
    """The settings every API test runs with; tests change them through the returned wrapper."""
    values = {
        "BOUNTY_CHAIN_ID": 91342,
        "BOUNTY_CONTRACT_ADDRESS": ACTIVE_CONTRACT,
        "BOUNTY_USDC_ADDRESS": ACTIVE_USDC,
        "BOUNTY_RPC_URL": None,
        "BOUNTY_RATE_LIMIT": 1_000_000,
        "BOUNTY_RATE_WINDOW_SECONDS": 60,
        "BOUNTY_TRUSTED_PROXIES": [],
    }
    for name, value in values.items():
        if getattr(settings, name) != value:
            setattr(settings, name, value)
    return settings


@pytest.fixture(autouse=True)
def empty_cache() -> Iterator[None]:
    """Cached bodies, totals and rate-limit counters never leak from one test into another."""
    cache.clear()
    yield
    cache.clear()


@pytest.fixture
def api() -> Client:
    """A JSON client, as programs use the API."""
    return Client(HTTP_ACCEPT="application/json")


@pytest.fixture
def active() -> Deployment:
    """The service's configured deployment."""
    return make_deployment()


@pytest.fixture
def other_chain() -> Deployment:
    """The same contract address on another chain: only chain_id tells its records apart."""
    return make_deployment(chain_id=OTHER_CHAIN_ID, contract_address=ACTIVE_CONTRACT)


@pytest.fixture
def other_contract() -> Deployment:
    """Another contract on the active chain: only contract_address tells its records apart."""
    return make_deployment(contract_address=OTHER_CONTRACT)


@pytest.fixture(params=["other_chain", "other_contract"])
def other(request: pytest.FixtureRequest) -> Deployment:
    """A second deployment whose record IDs collide with the active one's."""
    deployment: Deployment = request.getfixturevalue(request.param)
    return deployment


@pytest.fixture
def tree(active: Deployment) -> h.Tree:
    """A bounty of the active deployment with three submissions, which have 2, 1 and 0 disputes."""
    return h.make_tree(active)


@pytest.fixture
def wire(server: Server) -> Iterator[Wire]:
    """A keep-alive HTTP/1.1 connection to the test module's own `server` fixture (a real daphne)."""
    connection = Wire(server)
    yield connection
    connection.socket.close()
