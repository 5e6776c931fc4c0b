"""bountysite/daphne_close_codes.py: a real daphne process closes with the code the application
asks for, 1008 included, as a real client sees it (without the patch daphne sends 1011)."""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest

from tests.servers import Server, start_daphne, stop
from tests.websocket.conftest import close_code, open_client


@pytest.fixture(scope="module")
def server() -> Iterator[Server]:
    instance = start_daphne(dict(os.environ), "tests.websocket.close_app:application")
    yield instance
    stop(instance.process)


@pytest.mark.parametrize("code", [1008, 1000, 1001, 1011, 1013, 4000])
def test_it_sends_the_close_code_of_the_application(server: Server, code: int) -> None:
    with open_client(f"ws://127.0.0.1:{server.port}/?code={code}") as client:
        assert close_code(client) == code
