"""The indexer's exceptions, in one place because they cross process boundaries: a bulk
backfill's reader process raises them in the indexer process, pickled through a pipe. Each one
unpickles as it was raised, with its fields (tests/indexer/test_errors.py tries every one)."""

from __future__ import annotations

from typing import Any


class _Picklable(Exception):
    """An exception whose keyword-only fields survive pickling (BaseException pickles only args)."""

    def __reduce__(self) -> tuple[Any, ...]:
        return _rebuild, (type(self), self.args, self.__dict__)


def _rebuild(cls: type[BaseException], args: tuple[Any, ...], fields: dict[str, Any]) -> BaseException:
    error = cls.__new__(cls)
    error.args = args
    error.__dict__.update(fields)
    return error


class IndexerError(RuntimeError):
    """A condition the indexer cannot continue from; the message says what to do."""


class ReorgTooDeep(IndexerError):
    pass


class InconsistentChain(IndexerError):
    """An event refers to a record the mirror lacks (or re-creates one it has): the mirror began
    after the contract's deployment, or a log was lost on the way."""


class ChainChanged(Exception):
    """Blocks changed while the indexer read them (a reorganisation under way)."""


class Stopped(Exception):
    """The indexer was asked to stop while it waited for the node (for an answer or to retry)."""


class RpcError(_Picklable):
    """A deterministic failure: retrying the same request would fail the same way."""

    kind = "other"

    def __init__(self, message: str, *, code: int | None = None, data: Any = None) -> None:
        super().__init__(message)
        self.code = code
        self.data = data


class TransientRpcError(_Picklable):
    """A failure that may pass on retry (network, overload, a truncated answer)."""

    def __init__(self, message: str, *, retry_after: float | None = None, kind: str = "other") -> None:
        super().__init__(message)
        self.retry_after = retry_after
        self.kind = kind


class NodeBehind(TransientRpcError):
    """The node has not seen the block asked for yet: one backend of a load balancer that lags
    behind the others ("block is out of range", "unknown block", "header not found"). Retried
    later, the same request; never a reason to shrink a range or to think the chain changed."""

    def __init__(self, message: str, *, retry_after: float | None = None, kind: str = "node_behind") -> None:
        super().__init__(message, retry_after=retry_after, kind=kind)


class RangeTooLarge(RpcError):
    """The node refused a getLogs range: too many blocks or too many results (indexer.refusals
    tells the kinds apart: `refusal`). `cap` is the blocks a range may span where the node names
    it; `first`..`last` a range it says would work."""

    kind = "range_limit"

    def __init__(self, message: str, *, refusal: str, provider: str = "any", cap: int | None = None,
                 first: int | None = None, last: int | None = None, **kwargs: Any) -> None:
        super().__init__(message, **kwargs)
        self.refusal = refusal
        self.provider = provider
        self.cap = cap
        self.first = first
        self.last = last


class BatchTooLarge(RpcError):
    """The node refused a batch for its number of calls (`max_size` when it names its limit, 1 when
    it serves no batches at all)."""

    kind = "batch_limit"

    def __init__(self, message: str, *, max_size: int | None, **kwargs: Any) -> None:
        super().__init__(message, **kwargs)
        self.max_size = max_size


class RetriesExhausted(RpcError):
    """A transient failure that kept happening after every retry."""


class WaitTooLong(RetriesExhausted):
    """A server asked to wait (Retry-After) longer than a client that does not wait for it (the
    explorer's: indexer.explorer sets it aside) waits at most (BOUNTY_RPC_MAX_RETRY_AFTER_SECONDS)."""
