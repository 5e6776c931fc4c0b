"""The indexer's configuration, from settings (which read the environment: docs/operations.md)."""

from __future__ import annotations

from dataclasses import dataclass

from django.conf import settings

from indexer.errors import IndexerError
from indexer.rpc import proxy_for

# The first getLogs span, in blocks: it doubles while ranges hold few logs and shrinks when they
# hold many, so a small start costs a few quick requests on a quiet chain and keeps the first
# batch of a busy one small (its decoding waits for the whole answer).
INITIAL_SPAN = 16
KEPT_BLOCKS = 1_024  # blocks below the head whose hashes and undo entries are kept for reorganisations
BATCH_LOGS = 4_000  # about this many logs per getLogs range and per committed batch
READ_AHEAD = 3  # batches read and decoded ahead of the one being committed


@dataclass(frozen=True)
class IndexerConfig:
    """What the indexer runs with: settings, and the constants above. Built by `from_settings`."""

    rpc_url: str
    chain_id: int
    contract_address: str
    usdc_address: str
    start_block: int | None  # None: found on the chain at start-up (indexer.startup.find_start_block)
    confirmations: int | str  # blocks, or a block tag the node resolves (safe, finalized)
    poll_interval: float  # seconds between polls of the head while the chain's rhythm is not trusted
    max_wait: float  # seconds between two asks of the node at most (indexer.clock)
    live_blocks: int  # below the head: read one by one, then once more by range
    initial_span: int
    max_span: int
    kept_blocks: int
    batch_logs: int
    read_ahead: int
    rpc_timeout: float  # seconds for each request to the node, from its connection to its answer's last byte
    rpc_max_response_bytes: int  # of one answer of the node or the explorer
    rpc_max_retry_after: float  # seconds a Retry-After may ask at most
    max_concurrency: int  # requests to the node in flight at most
    requests_per_second: int | None  # the plan's budget of calls (None: the node's 429s tell)
    explorer_url: str | None = None  # an explorer's eth-rpc endpoint that guides the historical phase
    explorer_requests_per_second: int = 5
    rpc_proxy: str | None = None  # the HTTP(S) proxy the node is reached through (HTTPS_PROXY, NO_PROXY)
    explorer_proxy: str | None = None  # and the explorer

    @classmethod
    def from_settings(cls) -> IndexerConfig:
        """The configuration from settings; IndexerError naming every missing variable."""
        rpc_url: str | None = settings.BOUNTY_RPC_URL
        contract_address: str | None = settings.BOUNTY_CONTRACT_ADDRESS
        usdc_address: str | None = settings.BOUNTY_USDC_ADDRESS
        required = {"BOUNTY_RPC_URL": rpc_url, "BOUNTY_CONTRACT_ADDRESS": contract_address,
                    "BOUNTY_USDC_ADDRESS": usdc_address}
        missing = [name for name, value in required.items() if not value]
        if missing or rpc_url is None or contract_address is None or usdc_address is None:
            raise IndexerError(f"missing configuration: {', '.join(missing)} (see docs/operations.md, Configuration)")
        return cls(
            rpc_url=rpc_url,
            chain_id=settings.BOUNTY_CHAIN_ID,
            contract_address=contract_address.lower(),
            usdc_address=usdc_address,
            start_block=settings.BOUNTY_START_BLOCK,
            confirmations=settings.BOUNTY_CONFIRMATIONS,
            poll_interval=settings.BOUNTY_INDEXER_POLL_SECONDS,
            max_wait=settings.BOUNTY_INDEXER_MAX_WAIT_SECONDS,
            live_blocks=settings.BOUNTY_LIVE_BLOCKS,
            initial_span=min(INITIAL_SPAN, settings.BOUNTY_GETLOGS_MAX_BLOCKS),
            max_span=settings.BOUNTY_GETLOGS_MAX_BLOCKS,
            kept_blocks=KEPT_BLOCKS,
            batch_logs=BATCH_LOGS,
            read_ahead=READ_AHEAD,
            rpc_timeout=settings.BOUNTY_RPC_TIMEOUT_SECONDS,
            rpc_max_response_bytes=settings.BOUNTY_RPC_MAX_RESPONSE_BYTES,
            rpc_max_retry_after=settings.BOUNTY_RPC_MAX_RETRY_AFTER_SECONDS,
            max_concurrency=settings.BOUNTY_RPC_MAX_CONCURRENCY,
            requests_per_second=settings.BOUNTY_RPC_MAX_REQUESTS_PER_SECOND,
            explorer_url=settings.BOUNTY_EXPLORER_RPC_URL,
            explorer_requests_per_second=settings.BOUNTY_EXPLORER_MAX_REQUESTS_PER_SECOND,
            rpc_proxy=proxy_for(rpc_url, settings.OUTBOUND_PROXIES),
            explorer_proxy=(proxy_for(settings.BOUNTY_EXPLORER_RPC_URL, settings.OUTBOUND_PROXIES)
                            if settings.BOUNTY_EXPLORER_RPC_URL else None),
        )
