"""The indexer's health as `/health` reports it (docs/api.md, GET /health)."""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import TypedDict

from django.conf import settings
from django.utils import timezone

from indexer.indexes import index_state
from indexer.models import IndexerProcess, IndexerRole, SyncState
from indexer.rpc import UNREACHABLE_AFTER
from records.models import Deployment


class BackfillProgress(TypedDict):
    from_block: int
    to_block: int
    done_blocks: int
    total_blocks: int
    percent: float


class IndexerProcessHealth(TypedDict):
    name: str
    role: str
    last_seen: datetime


class IndexerHealth(TypedDict):
    enabled: bool
    running: bool
    synced: bool
    start_block: int | None  # BOUNTY_START_BLOCK, or the contract's deployment block as found
    start_block_found: bool  # found on the chain (BOUNTY_START_BLOCK unset)
    last_indexed_block: int | None
    head_block: int | None
    lag_blocks: int | None
    confirmations: int
    confirmations_tag: str | None
    rate_limited: bool  # the node limited the indexer's rate within the heartbeat window
    rpc_calls_per_block: float | None  # JSON-RPC calls per new block while following the head
    rpc_calls_per_day: float | None  # at the rate of the last minutes
    rpc_calls_by_phase: dict[str, int]  # the running writer's calls since it started, by phase
    block_rhythm_seconds: float | None  # the block time the poll schedule trusts (indexer.clock), if any
    block_rhythm_since: datetime | None  # since when it trusts it
    node_unreachable_since: datetime | None  # the node has not answered the running indexer since then
    node_unreachable_seconds: int | None
    node_last_asked_at: datetime | None  # when the indexer last sent the node a request
    node_last_asked_seconds: int | None
    node_ask_overdue: bool  # not asked for longer than BOUNTY_INDEXER_MAX_WAIT_MS allows (never expected)
    last_heartbeat: datetime | None
    indexes: str  # the record tables' secondary indexes: ready, deferred (a bulk backfill) or building
    backfill: BackfillProgress | None
    processes: list[IndexerProcessHealth]  # seen within the heartbeat: the writer, then those standing by


def indexer_health(deployment: Deployment | None, *, now: datetime | None = None) -> IndexerHealth:
    """Flags for the deployment's indexer.

    `enabled`: an RPC URL is configured. `running`: a heartbeat within
    BOUNTY_HEALTH_HEARTBEAT_SECONDS. `synced`: the last indexed block is within
    BOUNTY_HEALTH_MAX_LAG_BLOCKS of the safe head (head minus confirmations; with a block tag, the
    tagged block as last polled, and `confirmations` how deep it was then). `indexes`: whether
    the record tables' secondary indexes wait for a bulk backfill to end (indexer.indexes).
    `rate_limited`: the node refused a request for its rate within the heartbeat window (the
    indexer slows down and goes on). `rpc_calls_per_block`, `rpc_calls_per_day`: what following
    the head costs in calls to the node, measured over the last minutes (None until measured, or
    while no indexer runs); `rpc_calls_by_phase`: the running writer's calls since it started, by
    phase (indexer.rpc.PHASES). `block_rhythm_seconds`, `block_rhythm_since`: the block time the
    running writer's poll schedule trusts, and since when (indexer.clock; None while it trusts
    none and polls every BOUNTY_INDEXER_POLL_MS). `node_unreachable_since`, `node_unreachable_seconds`: the node has not
    answered the running indexer since then (it keeps asking). `node_last_asked_at`,
    `node_last_asked_seconds`: when the indexer last sent the node a request; `node_ask_overdue`:
    longer ago than ask_allowance() (the indexer never waits longer than its ceiling between two
    asks). `backfill`: the progress of the backfill under way, if any.
    `processes`: the `run_indexer` processes seen within the heartbeat, writer and standby.
    `start_block`: BOUNTY_START_BLOCK, or unset, the contract's deployment block the indexer found
    (`start_block_found`; None until found)."""
    depth: int | str = settings.BOUNTY_CONFIRMATIONS
    state = SyncState.objects.filter(deployment=deployment).first() if deployment is not None else None
    heartbeat = state.last_heartbeat if state else None
    head = state.head_block if state else None
    last = state.last_indexed_block if state else None
    if isinstance(depth, str):
        safe = state.safe_block if state else None
        confirmations = head - safe if head is not None and safe is not None else 0
    else:
        safe, confirmations = (None if head is None else head - depth), depth
    lag = None if safe is None else max(0, safe - (last if last is not None else -1))
    configured: int | None = settings.BOUNTY_START_BLOCK
    start = configured if configured is not None else (state.found_start_block if state else None)
    now = now or timezone.now()
    window = timedelta(seconds=settings.BOUNTY_HEALTH_HEARTBEAT_SECONDS)
    running = heartbeat is not None and now - heartbeat <= window
    unreachable = state.node_unreachable_since if state and running else None
    asked = state.node_asked_at if state else None
    asked_seconds = None if asked is None else max(0, int((now - asked).total_seconds()))
    return IndexerHealth(
        enabled=bool(settings.BOUNTY_RPC_URL),
        running=running,
        synced=running and lag is not None and lag <= settings.BOUNTY_HEALTH_MAX_LAG_BLOCKS,
        start_block=start,
        start_block_found=configured is None and start is not None,
        last_indexed_block=last,
        head_block=head,
        lag_blocks=lag,
        confirmations=confirmations,
        confirmations_tag=depth if isinstance(depth, str) else None,
        rate_limited=bool(state and state.rate_limited_at and now - state.rate_limited_at <= window),
        rpc_calls_per_block=state.rpc_calls_per_block if state and running else None,
        rpc_calls_per_day=state.rpc_calls_per_day if state and running else None,
        rpc_calls_by_phase=dict(state.rpc_calls_by_phase) if state and running else {},
        block_rhythm_seconds=round(state.block_rhythm_seconds, 3) if state and running and state.block_rhythm_seconds
        else None,
        block_rhythm_since=state.block_rhythm_since if state and running and state.block_rhythm_seconds else None,
        node_unreachable_since=unreachable,
        node_unreachable_seconds=None if unreachable is None else max(0, int((now - unreachable).total_seconds())),
        node_last_asked_at=asked,
        node_last_asked_seconds=asked_seconds,
        node_ask_overdue=running and asked_seconds is not None and asked_seconds > ask_allowance(),
        last_heartbeat=heartbeat,
        indexes=str(index_state()),
        backfill=_backfill(state),
        processes=_processes(deployment, now - window),
    )


def ask_allowance() -> float:
    """Seconds a running indexer may go without recording that it asked the node: its longest wait
    between two asks (BOUNTY_INDEXER_MAX_WAIT_MS), and the tries of a poll that the node does not
    answer before it is declared unreachable (UNREACHABLE_AFTER requests of
    BOUNTY_RPC_TIMEOUT_SECONDS each, with a second's backoff between them)."""
    return float(settings.BOUNTY_INDEXER_MAX_WAIT_SECONDS
                 + UNREACHABLE_AFTER * (settings.BOUNTY_RPC_TIMEOUT_SECONDS + 1))


def _processes(deployment: Deployment | None, since: datetime) -> list[IndexerProcessHealth]:
    if deployment is None:
        return []
    rows = IndexerProcess.objects.filter(deployment=deployment, last_seen__gte=since).values_list(
        "name", "role", "last_seen")
    ordered = sorted(rows, key=lambda row: (row[1] != IndexerRole.WRITER, row[0]))
    return [IndexerProcessHealth(name=name, role=role, last_seen=seen) for name, role, seen in ordered]


def _backfill(state: SyncState | None) -> BackfillProgress | None:
    if state is None or state.backfill_from_block is None or state.backfill_to_block is None:
        return None
    first, target = state.backfill_from_block, state.backfill_to_block
    total = max(1, target - first + 1)
    done = min(total, max(0, (state.last_indexed_block or first - 1) - first + 1))
    return BackfillProgress(from_block=first, to_block=target, done_blocks=done, total_blocks=total,
                            percent=round(100 * done / total, 1))
