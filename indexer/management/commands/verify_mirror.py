"""`manage.py verify_mirror`: the mirror compared with the contract's own state (indexer.proof)."""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from indexer.config import IndexerConfig
from indexer.errors import IndexerError, RpcError
from indexer.pacing import Pacer
from indexer.proof import prove
from indexer.rpc import RpcClient
from records.kinds import KINDS
from records.models import Deployment


class Command(BaseCommand):
    help = ("Compare the mirror with the contract's state read through the node at the block the mirror is "
            "indexed to: its record counters and every record's getter, field by field. Exits 1 naming each "
            "record and field that differ.")

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--block", type=int, default=None,
                            help="the block to compare at; the mirror must be indexed to it (default: the block it "
                                 "is indexed to)")

    def handle(self, *args: Any, **options: Any) -> None:
        try:
            config = IndexerConfig.from_settings()
            deployment = Deployment.objects.filter(chain_id=config.chain_id,
                                                   contract_address=config.contract_address).first()
            if deployment is None:
                raise IndexerError(f"no mirror of contract {config.contract_address} on chain {config.chain_id} "
                                   "yet: run run_indexer first")
            rpc = RpcClient(config.rpc_url, timeout=config.rpc_timeout,  # within the plan's budget, as the indexer
                            pacer=Pacer(max_concurrency=config.max_concurrency,
                                        requests_per_second=config.requests_per_second), proxy=config.rpc_proxy)
            try:
                chain_id = int(rpc.call("eth_chainId", []), 16)
                if chain_id != config.chain_id:
                    raise IndexerError(f"the node at {rpc.node} is on chain {chain_id}, but BOUNTY_CHAIN_ID is "
                                       f"{config.chain_id}")
                proof = prove(rpc, deployment, options["block"])
            finally:
                rpc.close()
        except (IndexerError, RpcError) as exc:
            raise CommandError(str(exc)) from exc
        records = ", ".join(f"{proof.records[kind.name]} {kind.resource}" for kind in KINDS)
        if proof.differences:
            for difference in proof.differences:
                self.stderr.write(str(difference))
            raise CommandError(f"the mirror ({records}) differs from the contract at block {proof.block} in "
                               f"{len(proof.differences)} fields (above); re-index the deployment into an empty "
                               "database, and look at the node's answers (bounty_indexer_reread_repairs_total)")
        self.stdout.write(f"the mirror ({records}) equals the contract at block {proof.block} "
                          f"({proof.calls} eth_calls)")
