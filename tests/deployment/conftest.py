from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.deployment.shipped import production_environment, start_web_unit
from tests.servers import Server, database_url, stop


@pytest.fixture
def web_process(shared_redis: str) -> Iterator[Server]:
    """A web process as deploy/bounty-web@.service starts it, with deploy/bounty.env.example's
    settings (needs the test database: django_db(transaction=True))."""
    env = production_environment(database_url=database_url(), redis_url=shared_redis)
    assert env["DJANGO_ALLOWED_HOSTS"] == "bounties.example.org" and "DJANGO_SECURE_SSL_REDIRECT" not in env
    server = start_web_unit(env)
    yield server
    stop(server.process)
