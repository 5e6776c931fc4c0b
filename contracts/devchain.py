"""The local dev chain: anvil from the npm registry, with the reference contracts deployed.

`Anvil` runs the anvil binary that `npm ci` installs; `deploy_reference_contracts` deploys the
test USDC and the bounty contract and sets the roles the demo and the tests rely on (listed in
docs/development.md, The dev chain): account 0 owner and arbiter, accounts 3 and 4 whitelisted
grouts, accounts 0-9 funded with 1,000,000 test USDC each.
"""

from __future__ import annotations

import json
import platform
import shutil
import socket
import subprocess
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from web3 import Web3
from web3.contract import Contract
from web3.types import RPCEndpoint

from contracts.artifacts import bounty_abi, load_artifact, usdc_abi

PROJECT_DIR = Path(__file__).resolve().parent.parent
NODE_MODULES = PROJECT_DIR / "node_modules"

DEV_CHAIN_ID = 91342
DEV_MNEMONIC = "test test test test test test test test test test test junk"
USDC_UNIT = 10**6
DEV_FUNDING = 1_000_000 * USDC_UNIT
OWNER_INDEX = 0
GROUT_INDEXES = (3, 4)
FUNDED_INDEXES = tuple(range(10))


class DevChainError(RuntimeError):
    """The dev chain could not be started or set up."""


def anvil_binary() -> Path:
    """The platform's anvil executable from the npm package @foundry-rs/anvil.

    The package's `node_modules/.bin/anvil` is a node wrapper that does not pass SIGTERM on,
    which would orphan anvil and lose its --state dump; so the binary is run directly.
    """
    arches = {"x86_64": "amd64", "amd64": "amd64", "aarch64": "arm64", "arm64": "arm64"}
    machine = arches.get(platform.machine().lower())
    system = platform.system().lower()
    candidate = NODE_MODULES / "@foundry-rs" / f"anvil-{system}-{machine}" / "bin" / "anvil"
    if candidate.exists():
        return candidate
    found = shutil.which("anvil")
    if found is None:
        raise DevChainError(f"anvil not found at {candidate}: run ./scripts/setup (npm install) in {PROJECT_DIR}")
    return Path(found)


def free_port(host: str = "127.0.0.1") -> int:
    with socket.socket() as probe:
        probe.bind((host, 0))
        port: int = probe.getsockname()[1]
        return port


@dataclass
class Anvil:
    """An anvil process on loopback; `start()` returns once its JSON-RPC answers."""

    host: str = "127.0.0.1"
    port: int = 8545
    chain_id: int = DEV_CHAIN_ID
    state_path: Path | None = None
    block_time: int | None = None
    genesis_timestamp: int | None = None  # a new chain's clock starts here and runs at wall clock speed
    process: subprocess.Popen[bytes] | None = field(default=None, init=False)

    @property
    def rpc_url(self) -> str:
        return f"http://{self.host}:{self.port}"

    def command(self) -> list[str]:
        command = [
            str(anvil_binary()),
            "--host", self.host,
            "--port", str(self.port),
            "--chain-id", str(self.chain_id),
            "--mnemonic", DEV_MNEMONIC,
            "--accounts", "10",
            "--silent",
        ]
        if self.state_path is not None:
            command += ["--state", str(self.state_path)]
        if self.block_time is not None:
            command += ["--block-time", str(self.block_time)]
        if self.genesis_timestamp is not None:
            command += ["--timestamp", str(self.genesis_timestamp)]
        return command

    def start(self, timeout: float = 30.0) -> Web3:
        self.process = subprocess.Popen(self.command(), stdin=subprocess.DEVNULL)
        # web3 asks for the chain ID before every call; the dev chain's never changes.
        w3 = Web3(Web3.HTTPProvider(self.rpc_url, request_kwargs={"timeout": 10}, cache_allowed_requests=True,
                                    cacheable_requests={RPCEndpoint("eth_chainId")}))
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise DevChainError(f"anvil exited with code {self.process.returncode} (is port {self.port} free?)")
            try:
                if w3.eth.chain_id == self.chain_id:
                    return w3
            except Exception:
                time.sleep(0.05)
        self.stop()
        raise DevChainError(f"anvil did not answer on {self.rpc_url} within {timeout:.0f} s")

    def stop(self, timeout: float = 15.0) -> None:
        """Stops anvil with SIGTERM (it writes its --state file then), SIGKILL if it hangs."""
        if self.process is None or self.process.poll() is not None:
            return
        self.process.terminate()
        try:
            self.process.wait(timeout)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()


@dataclass(frozen=True)
class DevDeployment:
    """What `var/devchain.json` holds: where the contracts are and who plays which role."""

    rpc_url: str
    chain_id: int
    contract_address: str
    usdc_address: str
    start_block: int
    owner: str
    arbiter: str
    grouts: list[str]
    accounts: list[str]

    def write(self, path: Path) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(asdict(self), indent=2) + "\n", encoding="utf-8")

    @classmethod
    def read(cls, path: Path) -> DevDeployment:
        data: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
        return cls(**data)


def bounty_contract(w3: Web3, address: str) -> Contract:
    return w3.eth.contract(address=Web3.to_checksum_address(address), abi=bounty_abi())


def usdc_contract(w3: Web3, address: str) -> Contract:
    return w3.eth.contract(address=Web3.to_checksum_address(address), abi=usdc_abi())


def _deploy(w3: Web3, name: str, sender: str, *args: Any) -> tuple[str, int]:
    artifact = load_artifact(name)
    factory = w3.eth.contract(abi=artifact["abi"], bytecode=artifact["bytecode"])
    receipt = w3.eth.wait_for_transaction_receipt(factory.constructor(*args).transact({"from": sender}))
    if receipt["status"] != 1:
        raise DevChainError(f"deploying {name} failed in transaction {receipt['transactionHash'].hex()}")
    return str(receipt["contractAddress"]), int(receipt["blockNumber"])


def transact(w3: Web3, call: Any, sender: str) -> Any:
    """Sends a contract call from an unlocked dev account and waits for a successful receipt."""
    receipt = w3.eth.wait_for_transaction_receipt(call.transact({"from": sender}))
    if receipt["status"] != 1:
        raise DevChainError(f"transaction {receipt['transactionHash'].hex()} reverted")
    return receipt


def deploy_reference_contracts(w3: Web3, rpc_url: str) -> DevDeployment:
    """Deploys TestUSDC and BountyBoard from account 0 and sets up roles and balances."""
    accounts = [str(a) for a in w3.eth.accounts[: len(FUNDED_INDEXES)]]
    owner = accounts[OWNER_INDEX]
    usdc_address, start_block = _deploy(w3, "TestUSDC", owner)
    contract_address, _ = _deploy(w3, "BountyBoard", owner, usdc_address)
    usdc = usdc_contract(w3, usdc_address)
    board = bounty_contract(w3, contract_address)
    for index in GROUT_INDEXES:
        transact(w3, board.functions.setGrout(accounts[index], True), owner)
    for index in FUNDED_INDEXES:
        transact(w3, usdc.functions.mint(accounts[index], DEV_FUNDING), owner)
    return DevDeployment(
        rpc_url=rpc_url,
        chain_id=int(w3.eth.chain_id),
        contract_address=contract_address,
        usdc_address=usdc_address,
        start_block=start_block,
        owner=owner,
        arbiter=owner,
        grouts=[accounts[i] for i in GROUT_INDEXES],
        accounts=accounts,
    )


def is_deployed(w3: Web3, deployment: DevDeployment) -> bool:
    """True when the chain holds the recorded contracts (a restarted chain loaded from --state)."""
    return all(len(w3.eth.get_code(Web3.to_checksum_address(a))) > 0
               for a in (deployment.contract_address, deployment.usdc_address))


def increase_time(w3: Web3, seconds: int) -> None:
    """Moves the chain's clock forward and mines a block at the new time."""
    w3.provider.make_request("evm_increaseTime", [seconds])  # type: ignore[arg-type]
    w3.provider.make_request("evm_mine", [])  # type: ignore[arg-type]
