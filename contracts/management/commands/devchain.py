"""`manage.py devchain`: a local chain with the reference contracts, running until interrupted."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError, CommandParser

from bountysite.stopping import SignalStop
from contracts.demo import DEMO_CLOCK_ADVANCE, seed_demo_activity
from contracts.devchain import (
    DEV_CHAIN_ID,
    Anvil,
    DevChainError,
    DevDeployment,
    deploy_reference_contracts,
    is_deployed,
)


class Command(BaseCommand):
    help = (
        "Start anvil (chain ID 91342), deploy the test USDC and the bounty contract, set roles and "
        "balances, write var/devchain.json and keep the chain running until interrupted."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        var = Path(settings.VAR_DIR)
        parser.add_argument("--host", default="127.0.0.1", help="address anvil listens on (default 127.0.0.1)")
        parser.add_argument("--port", type=int, default=8545, help="JSON-RPC port (default 8545)")
        parser.add_argument("--out", type=Path, default=var / "devchain.json", help="where to write the deployment")
        parser.add_argument(
            "--state", type=Path, default=var / "anvil-state.json",
            help="anvil state file: loaded at start and written at exit, so the chain survives restarts",
        )
        parser.add_argument("--fresh", action="store_true", help="discard the saved chain state and start over")
        parser.add_argument("--demo", action="store_true", help="seed demo activity (every status of every record)")
        parser.add_argument("--block-time", type=int, default=None, help="mine a block every N seconds as well")

    def handle(self, *args: Any, **options: Any) -> None:
        state: Path = options["state"]
        out: Path = options["out"]
        if options["fresh"]:
            state.unlink(missing_ok=True)
        state.parent.mkdir(parents=True, exist_ok=True)
        # The demo moves the chain's clock forward to reach its deadlines: a new demo chain starts
        # that far in the past, so that its records are not created "tomorrow".
        genesis = int(time.time()) - DEMO_CLOCK_ADVANCE if options["demo"] and not state.exists() else None
        anvil = Anvil(host=options["host"], port=options["port"], state_path=state, block_time=options["block_time"],
                      genesis_timestamp=genesis)
        stop = SignalStop()
        try:
            w3 = anvil.start()
        except DevChainError as exc:
            raise CommandError(str(exc)) from exc
        try:
            self._set_up(w3, anvil, out, demo=options["demo"])
            self.stdout.write(self.style.SUCCESS(f"dev chain running on {anvil.rpc_url}; Ctrl-C stops it"))
            while not stop.wait(0.5):
                if anvil.process is not None and anvil.process.poll() is not None:
                    raise CommandError(f"anvil exited unexpectedly with code {anvil.process.returncode}")
        finally:
            anvil.stop()
            self.stdout.write(f"dev chain stopped; state saved to {state}")

    def _set_up(self, w3: Any, anvil: Anvil, out: Path, *, demo: bool) -> None:
        previous = DevDeployment.read(out) if out.exists() else None
        if previous is not None and is_deployed(w3, previous):
            deployment = DevDeployment(**{**previous.__dict__, "rpc_url": anvil.rpc_url})
            self.stdout.write(f"resumed the saved chain at block {w3.eth.block_number}; contracts already deployed")
        else:
            deployment = deploy_reference_contracts(w3, anvil.rpc_url)
            self.stdout.write(f"deployed TestUSDC at {deployment.usdc_address}")
            self.stdout.write(f"deployed BountyBoard at {deployment.contract_address} (block {deployment.start_block})")
            self.stdout.write(f"owner and arbiter: {deployment.owner} (account 0)")
            self.stdout.write(f"grouts: {', '.join(deployment.grouts)} (accounts 3 and 4)")
            self.stdout.write("funded accounts 0-9 with 1,000,000 test USDC each")
            if demo:
                counts = seed_demo_activity(w3, deployment)
                self.stdout.write(
                    f"demo activity: {counts['bounties']} bounties, {counts['submissions']} submissions, "
                    f"{counts['disputes']} disputes (every status), up to block {w3.eth.block_number}"
                )
        deployment.write(out)
        assert deployment.chain_id == DEV_CHAIN_ID
        self.stdout.write(f"wrote {out}")
