"""The start-up checks: the node is on the configured chain and holds the configured
deployment, asked before the indexer writes anything (run_indexer refuses to start otherwise,
saying which variable to change)."""

from __future__ import annotations

import logging
import re
from collections.abc import Callable
from typing import Any

from eth_utils.crypto import keccak

from indexer.config import IndexerConfig
from indexer.errors import IndexerError, NodeBehind, RetriesExhausted, RpcError
from indexer.explorer import ExplorerGuide
from indexer.rpc import UNREACHABLE_AFTER, RpcClient

logger = logging.getLogger(__name__)

USDC_DECIMALS = 6  # the amounts the service shows are in units of 10^-6 USDC
BEHIND_RETRIES = 2  # a block whose state the node says it lacks, asked again before that is believed


def check_node(rpc: RpcClient, config: IndexerConfig, head: Callable[[], object]) -> None:
    """Refuses a node on another chain, and a deployment the chain contradicts: no contract at
    BOUNTY_CONTRACT_ADDRESS, one that does not answer the bounty contract's views, a token
    other than the one it holds in BOUNTY_USDC_ADDRESS, or a token without 6 decimals. One
    request: a far node costs one round trip here."""
    contract, usdc = config.contract_address, config.usdc_address.lower()
    chain_id, code = rpc.batch([("eth_chainId", []), ("eth_getCode", [contract, "latest"])],
                               failures=UNREACHABLE_AFTER)  # an unreachable node: said at once (then waited for)
    chain_id = int(chain_id, 16)
    if chain_id != config.chain_id:
        raise IndexerError(
            f"the node at {rpc.node} is on chain {chain_id}, "
            f"but BOUNTY_CHAIN_ID is {config.chain_id}"
        )
    if code in (None, "0x", "0x0"):
        raise IndexerError(f"no contract at BOUNTY_CONTRACT_ADDRESS {contract} on chain {chain_id}")
    if isinstance(tag := config.confirmations, str):
        try:
            head()
        except (RpcError, IndexerError) as exc:
            raise IndexerError(f"the node at {rpc.node} does not give its {tag} block "
                               f"(BOUNTY_CONFIRMATIONS={tag}): {exc}; set BOUNTY_CONFIRMATIONS to a number "
                               "of blocks") from exc
    holds, decimals = view_words(rpc, [(contract, "usdc()"), (usdc, "decimals()")])
    if holds is None or int(holds, 16) >> 160:
        raise IndexerError(
            f"the contract at BOUNTY_CONTRACT_ADDRESS {contract} is not a bounty contract: usdc() answered "
            f"{'nothing' if holds is None else holds} (is BOUNTY_CONTRACT_ADDRESS the token's address?)"
        )
    token = "0x" + holds[-40:].lower()
    if token != usdc:
        raise IndexerError(
            f"the bounty contract at BOUNTY_CONTRACT_ADDRESS {contract} holds the token {token}, "
            f"but BOUNTY_USDC_ADDRESS is {usdc}: set BOUNTY_USDC_ADDRESS={token}"
        )
    if decimals is None or int(decimals, 16) != USDC_DECIMALS:
        raise IndexerError(
            f"the token at BOUNTY_USDC_ADDRESS {usdc} answered decimals() = "
            f"{'nothing' if decimals is None else int(decimals, 16)}, not {USDC_DECIMALS}"
        )


def view_words(rpc: RpcClient, views: list[tuple[str, str]]) -> list[str | None]:
    """The 32-byte words views without arguments return at the latest block, as 64 hex digits
    each, asked in one request; None for a view that reverts or returns something else."""
    calls = [("eth_call", [{"to": address, "data": "0x" + keccak(text=signature)[:4].hex()}, "latest"])
             for address, signature in views]
    try:
        answers: list[Any] = rpc.batch(calls)
    except RpcError:  # a revert (no such function, no fallback that answers) fails the whole batch
        answers = []
        for call in calls:
            try:
                answers.append(rpc.call(*call))
            except RpcError:
                answers.append(None)
    return [answer[2:] if isinstance(answer, str) and re.fullmatch(r"0x[0-9a-fA-F]{64}", answer) else None
            for answer in answers]


def find_start_block(rpc: RpcClient, contract: str, guide: ExplorerGuide | None = None) -> int:
    """The block the contract was deployed in: the first with code at its address. Searched back
    from the head in growing steps (so a node that keeps only recent state still finds a contract
    deployed within it), then by bisection between the last block found without code and the
    first with it: about 2 x log2(the contract's age in blocks) eth_getCode calls, checked by
    construction (no code the block before, code at it). IndexerError naming BOUNTY_START_BLOCK
    when the node does not keep the state of the blocks asked (a full node, not an archive); a
    node that does not answer is RetriesExhausted, waited for as usual. Such a node beside an
    explorer (`guide`): the block of the contract's first log, as the explorer names it and the
    node's header of it confirms, is where its records begin."""
    head = int(rpc.call("eth_blockNumber", [], failures=UNREACHABLE_AFTER), 16)

    def has_code(number: int) -> bool:
        try:
            code = rpc.call("eth_getCode", [contract, hex(number)], behind_retries=BEHIND_RETRIES,
                            failures=UNREACHABLE_AFTER)
        except RetriesExhausted:
            raise
        except (RpcError, NodeBehind) as exc:
            if guide is not None and (first := guide.first_event_block()) is not None:
                raise _FromTheExplorer(first) from exc
            raise IndexerError(
                f"the node at {rpc.node} cannot tell when the contract at BOUNTY_CONTRACT_ADDRESS {contract} was "
                f"deployed: eth_getCode at block {number} answered {exc} (it keeps no state that old); set "
                "BOUNTY_START_BLOCK to the block of the contract's creation (its explorer page shows it)") from exc
        return code not in (None, "0x", "0x0")

    try:
        return _bisect(head, has_code, contract)
    except _FromTheExplorer as named:
        logger.warning("the node at %s keeps no state old enough to tell when the contract was deployed: starting "
                       "at block %d, its first log as the explorer names it (set BOUNTY_START_BLOCK to choose)",
                       rpc.node, named.block)
        return named.block


class _FromTheExplorer(Exception):
    def __init__(self, block: int) -> None:
        super().__init__(block)
        self.block = block


def _bisect(head: int, has_code: Callable[[int], bool], contract: str) -> int:
    """The first block with code: searched back from `head` in growing steps, then bisected."""
    if not has_code(head):
        raise IndexerError(f"no contract at BOUNTY_CONTRACT_ADDRESS {contract} at block {head}")
    with_code, step = head, 1  # code at `with_code`
    while True:
        probe = max(0, with_code - step)
        if not has_code(probe):
            without = probe
            break
        if probe == 0:
            return 0  # in the genesis state
        with_code, step = probe, step * 2
    while with_code - without > 1:
        middle = (without + with_code) // 2
        if has_code(middle):
            with_code = middle
        else:
            without = middle
    return with_code
