"""scripts/dev: the ports and state folder it is given, a serving line only once it serves, a clear
stop on a busy port, one moderator password per dev state, each log line once, Ctrl-C stopping
everything even when it was started with SIGINT ignored, and with --env-file the node and
deployment of deploy/bounty.env.example instead of a dev chain."""

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
from tests.chain import Chain
from tests.indexer.test_run_indexer_command import create_bounty, wait_until
from tests.servers import wait_for_line

PROJECT_DIR = Path(__file__).resolve().parent.parent.parent
BROWSER = "text/html,application/xhtml+xml,*/*;q=0.8"
ENV_EXAMPLE = PROJECT_DIR / "deploy" / "bounty.env.example"
API_KEY = "k3y-0f-the-n0de"


def _environment() -> dict[str, str]:
    """The caller's environment without what would point the dev service elsewhere."""
    return {name: value for name, value in os.environ.items()
            if not name.startswith(("DEV_", "BOUNTY_")) and name not in {"DATABASE_URL", "REDIS_URL", "LOG_LEVEL"}}


def _dev(*args: str) -> subprocess.Popen[str]:
    """scripts/dev started with SIGINT ignored, whatever this test run was started with. A test run
    started as a background job of a non-interactive shell (CI, a tool) passes that on, and bash
    cannot trap an ignored signal, so Ctrl-C once stopped nothing there. `env --ignore-signal` then
    execs scripts/dev, so the process's ID is scripts/dev's own."""
    return subprocess.Popen(["env", "--ignore-signal=INT", "scripts/dev", *args], cwd=PROJECT_DIR,
                            env=_environment(), text=True, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            start_new_session=True)


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


def _session_commands(session: int) -> list[str]:
    """The command names of the processes in a session (from Linux's /proc)."""
    names = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            text = stat.read_text()
        except OSError:  # ended meanwhile
            continue
        after_name = text[text.rindex(")") + 2:].split()  # state, ppid, pgrp, session, ...
        if int(after_name[3]) == session:
            names.append(text[text.index("(") + 1:text.rindex(")")])
    return names


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
    assert "anvil" in _session_commands(dev.pid)
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
        assert dev.returncode == 130
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
                   "--env-file FILE", "DEV_ENV_FILE", "deploy/bounty.env.example", "--state-dir DIR", "DEV_STATE_DIR",
                   "var/real-chain", "--fresh", "--help"):
        assert option in result.stdout


@pytest.mark.parametrize("args", [["--port", "http"], ["--chain-port", "70000"], ["--port"], ["--port=9000",
                                  "--chain-port=9000"], ["--verbose"], ["--env-file", "no/such/file"],
                                  ["--env-file", "README.md", "--chain-port", "9000"]])
def test_a_bad_option_is_a_usage_error(args: list[str]) -> None:
    result = subprocess.run(["scripts/dev", *args], cwd=PROJECT_DIR, env=_environment(), text=True,
                            capture_output=True, timeout=30)
    assert result.returncode == 2
    assert result.stderr.startswith("dev: ") and "scripts/dev --help" in result.stderr


def _env_file(path: Path, chain: Chain) -> Path:
    """deploy/bounty.env.example with the chain's node and deployment in place of its placeholders
    (the production ones stay: scripts/dev does not use them). The node's URL carries an API key
    in its user part, as some providers' do (anvil ignores it)."""
    deployment = chain.deployment
    text = ENV_EXAMPLE.read_text()
    node = deployment.rpc_url.replace("://", f"://dev:{API_KEY}@")
    for name, value in [("BOUNTY_RPC_URL", node), ("BOUNTY_CHAIN_ID", deployment.chain_id),
                        ("BOUNTY_CONTRACT_ADDRESS", deployment.contract_address),
                        ("BOUNTY_USDC_ADDRESS", deployment.usdc_address),
                        ("BOUNTY_START_BLOCK", deployment.start_block)]:
        text, replaced = re.subn(rf"^{name}=.*$", f"{name}={value}", text, flags=re.M)
        assert replaced == 1, name
    path.write_text(text + "BOUNTY_CONFIRMATIONS=0\nBOUNTY_INDEXER_POLL_MS='100'\n")
    return path


def test_with_an_env_file_it_follows_the_given_node_without_a_chain_or_demo_data_of_its_own(
        chain: Chain, state: Path, tmp_path: Path, started: list[subprocess.Popen[str]]) -> None:
    """The "real chain" is an anvil of the tests' own, with one bounty: the service must index that
    node and deployment, and start no dev chain (so seed no demo activity)."""
    create_bounty(chain, "ipfs://the-one-bounty")
    port = free_port()
    dev = _dev("--env-file", str(_env_file(tmp_path / "bounty.env", chain)), "--port", str(port),
               "--state-dir", str(state))
    started.append(dev)
    printed = wait_for_line(dev, f"dev: serving http://127.0.0.1:{port}/", timeout=240)

    deployment = chain.deployment
    assert (f"dev: deployment {deployment.contract_address} on chain {deployment.chain_id} "
            f"via {deployment.rpc_url.replace('://', '://***@')}") in printed
    assert any(line.startswith("dev: not using") and "DJANGO_SECRET_KEY" in line and "DATABASE_URL" in line
               for line in printed), printed
    assert not any("dev chain" in line for line in printed), printed
    assert "anvil" not in _session_commands(dev.pid)
    assert not (state / "devchain.json").exists() and (state / "db.sqlite3").exists()

    _, _, body = _get(f"http://127.0.0.1:{port}/health", "application/json")
    health = json.loads(body)
    assert {name: str(value).lower() for name, value in health["deployment"].items()} == {
        "chain_id": str(deployment.chain_id), "contract_address": deployment.contract_address.lower(),
        "usdc_address": deployment.usdc_address.lower()}
    assert health["indexer"]["enabled"] is True and health["indexer"]["confirmations"] == 0
    head = chain.w3.eth.block_number

    def indexed() -> bool:
        indexer = json.loads(_get(f"http://127.0.0.1:{port}/health", "application/json")[2])["indexer"]
        return indexer["last_indexed_block"] is not None and indexer["last_indexed_block"] >= head

    wait_until(indexed, timeout=60)
    bounties = json.loads(_get(f"http://127.0.0.1:{port}/bounties?limit=100", "application/json")[2])
    assert [bounty["metadata_uri"] for bounty in bounties["items"]] == ["ipfs://the-one-bounty"]

    printed += _stop(dev).splitlines()
    assert dev.returncode == 130
    assert not _listening(port)
    assert not any(API_KEY in line for line in printed), printed


@pytest.mark.parametrize(("text", "message"), [
    ("# nothing but a comment\nDJANGO_DEBUG=0\n",
     "sets no BOUNTY_RPC_URL BOUNTY_CONTRACT_ADDRESS BOUNTY_USDC_ADDRESS (see deploy/bounty.env.example)"),
    ("BOUNTY_CHAIN_ID=91342\nexport BOUNTY_RPC_URL=http://127.0.0.1:1\n", "line 2: not a NAME=value line"),
])
def test_an_env_file_without_a_node_and_deployment_stops_it_before_anything_starts(
        tmp_path: Path, state: Path, text: str, message: str) -> None:
    env_file = tmp_path / "bounty.env"
    env_file.write_text(text)
    result = subprocess.run(["scripts/dev", "--env-file", str(env_file), "--port", str(free_port()),
                             "--state-dir", str(state)], cwd=PROJECT_DIR, env=_environment(), text=True,
                            capture_output=True, timeout=120)
    assert result.returncode == 1
    assert f"dev: {env_file}" in result.stderr and message in result.stderr
    assert "serving" not in result.stdout and not (state / "db.sqlite3").exists()


def test_an_env_file_naming_a_remote_node_over_plain_http_stops_it_without_printing_the_key(
        tmp_path: Path, state: Path) -> None:
    """Over plain http anyone on the path reads the key and can forge the chain's logs: refused at
    start, unless the file says the network between is private (BOUNTY_RPC_ALLOW_PLAIN_HTTP)."""
    env_file = tmp_path / "bounty.env"
    env_file.write_text(f"BOUNTY_RPC_URL=http://node.example.org/v2/{API_KEY}\n"
                        "BOUNTY_CONTRACT_ADDRESS=0xe7f1725E7734CE288F8367e1Bb143E90bb3F0512\n"
                        "BOUNTY_USDC_ADDRESS=0x5FbDB2315678afecb367f032d93F642f64180aa3\nBOUNTY_START_BLOCK=1\n")
    result = subprocess.run(["scripts/dev", "--env-file", str(env_file), "--port", str(free_port()),
                             "--state-dir", str(state)], cwd=PROJECT_DIR, env=_environment(), text=True,
                            capture_output=True, timeout=120)
    assert result.returncode == 1
    assert ("configuration error: BOUNTY_RPC_URL must be an https:// URL: http://node.example.org/... is plain "
            "http") in result.stderr and "BOUNTY_RPC_ALLOW_PLAIN_HTTP=1" in result.stderr
    assert API_KEY not in result.stdout + result.stderr
    assert "serving" not in result.stdout
