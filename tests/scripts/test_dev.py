"""scripts/dev: the ports and state folder it is given, a serving line only once it serves, a clear
stop on a busy port, one moderator password per dev state, and each log line once."""

from __future__ import annotations

import json
import os
import re
import signal
import socket
import subprocess
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest
from web3 import Web3

from contracts.devchain import free_port
from tests.servers import wait_for_line

PROJECT_DIR = Path(__file__).resolve().parent.parent.parent
BROWSER = "text/html,application/xhtml+xml,*/*;q=0.8"


def _environment() -> dict[str, str]:
    """The caller's environment without what would point the dev service elsewhere."""
    return {name: value for name, value in os.environ.items()
            if not name.startswith(("DEV_", "BOUNTY_")) and name not in {"DATABASE_URL", "REDIS_URL", "LOG_LEVEL"}}


def _dev(*args: str) -> subprocess.Popen[str]:
    return subprocess.Popen(["scripts/dev", *args], cwd=PROJECT_DIR, env=_environment(), text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, start_new_session=True)


def _stop(process: subprocess.Popen[str]) -> str:
    """Ctrl-C, as a person stops it; everything it printed from here on."""
    if process.poll() is None:
        process.send_signal(signal.SIGINT)
    try:
        out, _ = process.communicate(timeout=60)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        out, _ = process.communicate()
    return out


def _get(url: str, accept: str) -> tuple[int, str, str]:
    request = urllib.request.Request(url, headers={"Accept": accept})
    with urllib.request.urlopen(request, timeout=10) as response:
        return response.status, response.headers["Content-Type"], response.read().decode()


def _ports() -> tuple[int, int]:
    web = free_port()
    chain = free_port()
    while chain == web:
        chain = free_port()
    return web, chain


def _listening(port: int) -> bool:
    try:
        socket.create_connection(("127.0.0.1", port), timeout=1).close()
    except OSError:
        return False
    return True


@pytest.fixture
def state(tmp_path: Path) -> Path:
    return tmp_path / "state"


@pytest.fixture
def started() -> Iterator[list[subprocess.Popen[str]]]:
    """The dev runs a test starts; any still running at the end are stopped."""
    processes: list[subprocess.Popen[str]] = []
    yield processes
    for process in processes:
        if process.poll() is None:
            _stop(process)


def test_it_serves_the_front_page_on_the_ports_it_is_given(state: Path,
                                                          started: list[subprocess.Popen[str]]) -> None:
    port, chain_port = _ports()
    dev = _dev("--port", str(port), "--chain-port", str(chain_port), "--state-dir", str(state))
    started.append(dev)
    printed = wait_for_line(dev, f"dev: serving http://127.0.0.1:{port}/", timeout=240)

    # No retry: the line comes once the server accepts requests.
    status, content_type, page = _get(f"http://127.0.0.1:{port}/", BROWSER)
    assert (status, content_type.split(";")[0]) == (200, "text/html")
    assert f'href="http://127.0.0.1:{port}/api/docs/"' in page and f'href="http://127.0.0.1:{port}/admin/"' in page
    status, content_type, body = _get(f"http://127.0.0.1:{port}/", "application/json")
    assert json.loads(body)["api"]["health"] == f"http://127.0.0.1:{port}/health"
    assert Web3(Web3.HTTPProvider(f"http://127.0.0.1:{chain_port}")).eth.chain_id == 91342
    assert json.loads((state / "devchain.json").read_text())["rpc_url"] == f"http://127.0.0.1:{chain_port}"
    assert (state / "db.sqlite3").exists()

    printed += _stop(dev).splitlines()
    assert dev.returncode == 130
    # Each server log line once (Django's own console handler once printed them a second time).
    assert len([line for line in printed if "GET / 200" in line]) == 2, "\n".join(printed)
    assert not _listening(port) and not _listening(chain_port)


def test_a_restart_of_the_same_state_keeps_the_moderators_password(state: Path,
                                                                   started: list[subprocess.Popen[str]]) -> None:
    passwords = []
    for _ in range(2):
        port, chain_port = _ports()
        dev = _dev("--port", str(port), "--chain-port", str(chain_port), "--state-dir", str(state))
        started.append(dev)
        printed = wait_for_line(dev, "dev: demo moderator", timeout=240)
        _stop(dev)
        match = re.search(r"password '([^']+)' \(kept in (.+)\)", printed[-1])
        assert match is not None, printed[-1]
        assert Path(match.group(2)) == (state / "demo-moderator-password").resolve()
        passwords.append(match.group(1))
    assert passwords[0] == passwords[1]
    assert any("resumed the saved chain" in line for line in printed)


@pytest.mark.parametrize("busy", ["--port", "--chain-port"])
def test_a_busy_port_stops_it_before_anything_starts(busy: str, state: Path) -> None:
    ports = dict(zip(("--port", "--chain-port"), _ports(), strict=True))
    with socket.socket() as holder:
        holder.bind(("127.0.0.1", ports[busy]))
        holder.listen()
        dev = _dev(*(f"{option}={port}" for option, port in ports.items()), "--state-dir", str(state))
        out, _ = dev.communicate(timeout=120)
    assert dev.returncode == 1
    assert f"dev: port {ports[busy]} on 127.0.0.1 is in use: stop what uses it, or pick another with {busy} N" in out
    assert "serving" not in out
    assert not (state / "devchain.json").exists()


def test_the_ports_can_come_from_the_environment(state: Path) -> None:
    with socket.socket() as holder:
        holder.bind(("127.0.0.1", 0))
        holder.listen()
        busy = holder.getsockname()[1]
        dev = subprocess.run(["scripts/dev", "--state-dir", str(state)], cwd=PROJECT_DIR, text=True,
                             env={**_environment(), "DEV_PORT": str(busy)}, capture_output=True, timeout=120)
    assert dev.returncode == 1
    assert f"dev: port {busy} on 127.0.0.1 is in use" in dev.stderr


def test_help_lists_every_option_and_starts_nothing() -> None:
    result = subprocess.run(["scripts/dev", "--help"], cwd=PROJECT_DIR, env=_environment(), text=True,
                            capture_output=True, timeout=30)
    assert result.returncode == 0
    for option in ("--port N", "DEV_PORT", "default 8000", "--chain-port N", "DEV_CHAIN_PORT", "default 8545",
                   "--state-dir DIR", "DEV_STATE_DIR", "--fresh", "--help"):
        assert option in result.stdout


@pytest.mark.parametrize("args", [["--port", "http"], ["--chain-port", "70000"], ["--port"], ["--port=9000",
                                  "--chain-port=9000"], ["--verbose"]])
def test_a_bad_option_is_a_usage_error(args: list[str]) -> None:
    result = subprocess.run(["scripts/dev", *args], cwd=PROJECT_DIR, env=_environment(), text=True,
                            capture_output=True, timeout=30)
    assert result.returncode == 2
    assert result.stderr.startswith("dev: ") and "scripts/dev --help" in result.stderr
