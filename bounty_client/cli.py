"""`python -m bounty_client`: prints unsigned transactions, quotes, data URIs and hashes.

Transactions are printed as JSON in the spec's shape, ready for any wallet's
`eth_sendTransaction` (add `from`). The deployment comes from `--service-url` (default
`$BOUNTY_SERVICE_URL`), whose `/health` names it, or else from `BOUNTY_CHAIN_ID`,
`BOUNTY_CONTRACT_ADDRESS` and `BOUNTY_USDC_ADDRESS`; `--chain-id`, `--contract-address` and
`--usdc-address` override single values.

Every error is one line on stderr, `python -m bounty_client: error: <message>`, that names
where the bad value came from (`--bounty-id: number must be a safe uint`) or the URL that failed.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Callable, Sequence
from dataclasses import asdict, replace
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import httpx

from bounty_client._version import __version__
from bounty_client.deployment import (
    ENV_CHAIN_ID,
    ENV_CONTRACT_ADDRESS,
    ENV_USDC_ADDRESS,
    Deployment,
    deployment_from_env,
)
from bounty_client.errors import (
    BountyClientError,
    ConfigurationError,
    RequestFailedError,
    ResponseError,
    ValidationError,
)
from bounty_client.metadata import (
    MAX_INLINE_JSON_BYTES,
    MAX_INLINE_JSON_DEPTH,
    JsonValue,
    canonical_json,
    metadata_hash,
    metadata_to_data_uri,
    parse_json,
    parse_metadata_uri,
)
from bounty_client.quote import QuoteConfig, quote_create_amount
from bounty_client.read import DEFAULT_TIMEOUT, ReadClient
from bounty_client.transactions import TransactionBuilder, UnsignedTransaction
from bounty_client.validation import validate_address, validate_bytes32, validate_uint

ENV_SERVICE_URL = "BOUNTY_SERVICE_URL"
DEPLOYMENT_VARIABLES = {
    "chain_id": ENV_CHAIN_ID,
    "contract_address": ENV_CONTRACT_ADDRESS,
    "usdc_address": ENV_USDC_ADDRESS,
}

EXIT_USAGE = 2
EXIT_FAILURE = 1
DEV_SERVICE_URL = "http://127.0.0.1:8000"


class CommandError(Exception):
    """A problem with the command's input, reported as `error: <message>` (exit status 2)."""

    exit_status = EXIT_USAGE


class ServiceError(CommandError):
    """The read service could not be reached or did not answer as one (exit status 1)."""

    exit_status = EXIT_FAILURE


def _positive_seconds(raw: str) -> float:
    try:
        seconds = float(raw)
    except ValueError:
        seconds = 0.0
    if not seconds > 0:
        raise ValidationError("must be a number of seconds above 0")
    return seconds


def _uint(bits: int) -> Callable[[str], object]:
    return lambda raw: validate_uint(raw, bits)


def _bps(name: str) -> Callable[[str], object]:
    return lambda raw: QuoteConfig(**{name: validate_uint(raw, 16)})


# The checks of the options' values, by argparse dest; each option's flag is `--<dest with ->`.
# They run before anything else, so that a bad value is reported under its flag (the builder
# and QuoteConfig check again, with the same messages).
OPTION_CHECKS: dict[str, Callable[[str], object]] = {
    **dict.fromkeys(("amount", "reward", "bounty_id", "submission_id", "dispute_id"), _uint(256)),
    "duration": _uint(64),
    "chain_id": _uint(64),
    **dict.fromkeys(("recipient", "contract_address", "usdc_address"), validate_address),
    "metadata_hash": validate_bytes32,
    "post_fee_bps": _bps("post_fee_bps"),
    "submission_bond_bps": _bps("submission_bond_bps"),
    "timeout": _positive_seconds,
}


def _flag(dest: str) -> str:
    return "--" + dest.replace("_", "-")


def _check_options(args: argparse.Namespace) -> None:
    for dest, check in OPTION_CHECKS.items():
        raw = getattr(args, dest, None)
        if raw is None:
            continue
        try:
            check(raw)
        except ValidationError as error:
            raise CommandError(f"{_flag(dest)}: {error}") from None


def _read_metadata_file(path: str) -> JsonValue:
    try:
        text = sys.stdin.read() if path == "-" else Path(path).read_text(encoding="utf-8")
        return parse_json(text)
    except ValueError as error:  # also UnicodeDecodeError
        raise CommandError(f"{path} is not valid JSON: {error}") from None


def _metadata_reference(args: argparse.Namespace) -> tuple[str, str]:
    """The (metadata_uri, metadata_hash) of a create-bounty, submit or dispute command."""
    if args.metadata_file is not None:
        if args.metadata_hash is not None:
            raise CommandError("--metadata-hash goes with --metadata-uri, not --metadata-file")
        metadata = _read_metadata_file(args.metadata_file)
        return metadata_to_data_uri(metadata), metadata_hash(metadata)
    uri: str = args.metadata_uri
    if args.metadata_hash is not None:
        return uri, str(args.metadata_hash)
    inline = parse_metadata_uri(uri)
    if inline is None:
        raise CommandError("--metadata-hash is required with a --metadata-uri that is not an inline data URI")
    return uri, metadata_hash(inline)


def _deployment(args: argparse.Namespace) -> Deployment:
    """Flags first, then the service's /health (with --service-url), else the environment."""
    overrides: dict[str, Any] = {
        field: getattr(args, field) for field in DEPLOYMENT_VARIABLES if getattr(args, field) is not None
    }
    if len(overrides) == len(DEPLOYMENT_VARIABLES):
        return Deployment(**overrides)
    if args.service_url:
        return replace(_service_deployment(args.service_url, "--service-url", float(args.timeout)), **overrides)
    if os.environ.get(ENV_SERVICE_URL):
        service = _service_deployment(os.environ[ENV_SERVICE_URL], ENV_SERVICE_URL, float(args.timeout))
        return replace(service, **overrides)
    environ = {**os.environ, **{DEPLOYMENT_VARIABLES[field]: str(value) for field, value in overrides.items()}}
    try:
        return deployment_from_env(environ)
    except ConfigurationError as error:
        if not error.missing:
            raise
        flags = {variable: _flag(field) for field, variable in DEPLOYMENT_VARIABLES.items()}
        raise CommandError(
            f"{error}. Name the read service, whose /health gives the deployment: --service-url URL or "
            f"{ENV_SERVICE_URL}=URL (the dev server's is {DEV_SERVICE_URL}); or set the variables, or give "
            f"{' and '.join(flags[name] for name in error.missing)}"
        ) from None


def _service_deployment(url: str, source: str, timeout: float) -> Deployment:
    """The deployment named by the /health of the read service at `url`, which came from
    `source` (the flag or the environment variable); every failure names both."""
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.netloc:
        raise CommandError(f"{source}: {url!r} is not an http:// or https:// URL (e.g. {DEV_SERVICE_URL})")
    health = url.rstrip("/") + "/health"
    try:
        with ReadClient(url, timeout=timeout) as client:
            return client.deployment()
    except httpx.TimeoutException:
        raise ServiceError(f"{source}: {health} did not answer within {timeout:g} s") from None
    except httpx.HTTPError as error:
        reason = str(error) or type(error).__name__
        raise ServiceError(f"{source}: cannot reach {health}: {reason}") from None
    except RequestFailedError as error:
        detail = f" ({error.detail})" if error.detail else ""
        raise ServiceError(f"{source}: {health}: {error}{detail}") from None
    except (ResponseError, ConfigurationError) as error:
        raise ServiceError(f"{source}: {health}: {error} (is this the bounty read service?)") from None


def _build(args: argparse.Namespace, make: Callable[[TransactionBuilder], UnsignedTransaction]) -> str:
    return json.dumps(make(TransactionBuilder(_deployment(args))), indent=2)


def _tx_create_bounty(args: argparse.Namespace) -> str:
    uri, digest = _metadata_reference(args)
    return _build(
        args,
        lambda b: b.create_bounty(
            metadata_uri=uri, metadata_hash=digest, reward_amount=args.reward, duration=args.duration
        ),
    )


def _tx_submit(args: argparse.Namespace) -> str:
    uri, digest = _metadata_reference(args)
    return _build(args, lambda b: b.submit(bounty_id=args.bounty_id, metadata_uri=uri, metadata_hash=digest))


def _tx_dispute(args: argparse.Namespace) -> str:
    uri, digest = _metadata_reference(args)
    return _build(
        args, lambda b: b.dispute(submission_id=args.submission_id, metadata_uri=uri, metadata_hash=digest)
    )


def _tx_resolve_dispute(args: argparse.Namespace) -> str:
    return _build(args, lambda b: b.resolve_dispute(args.dispute_id, args.upheld))


def _tx_simple(args: argparse.Namespace) -> str:
    """An action of `SIMPLE_ACTIONS`: the builder method `args.method` with its one option, if any."""
    arguments = [getattr(args, args.option_dest)] if args.option_dest else []
    return _build(args, lambda b: getattr(b, args.method)(*arguments))


SIMPLE_ACTIONS = (
    # (action, its one option or None, builder method, help): the helpers without metadata.
    ("approve-usdc", "--amount", "approve_usdc", "USDC approve(contract, amount)"),
    ("finalize", "--bounty-id", "finalize", "finalize(bountyId)"),
    ("advance-review-cursor", "--bounty-id", "advance_review_cursor", "advanceReviewCursor(bountyId)"),
    ("refund-expired", "--bounty-id", "refund_expired", "refundExpired(bountyId)"),
    ("refund-submission-bond", "--submission-id", "refund_submission_bond", "refundSubmissionBond(submissionId)"),
    ("cancel-resolved-dispute", "--dispute-id", "cancel_resolved_dispute", "cancelResolvedDispute(disputeId)"),
    ("withdraw", None, "withdraw", "withdraw()"),
    ("withdraw-to", "--recipient", "withdraw_to", "withdrawTo(recipient)"),
)


def _quote(args: argparse.Namespace) -> str:
    config = QuoteConfig(post_fee_bps=args.post_fee_bps, submission_bond_bps=args.submission_bond_bps)
    quote = quote_create_amount(args.reward, config)
    return json.dumps({name: str(amount) for name, amount in asdict(quote).items()}, indent=2)


def _parse_uri(args: argparse.Namespace) -> str:
    parsed = parse_metadata_uri(args.uri)
    if parsed is None:
        raise CommandError("not an inline data:application/json URI holding valid JSON (at most "
                           f"{MAX_INLINE_JSON_BYTES} bytes, nested at most {MAX_INLINE_JSON_DEPTH} deep)")
    return canonical_json(parsed)


def _deployment_options() -> argparse.ArgumentParser:
    options = argparse.ArgumentParser(add_help=False)
    group = options.add_argument_group("deployment")
    group.add_argument(
        "--service-url",
        help=f"read service whose /health names the deployment, e.g. {DEV_SERVICE_URL} (default: ${ENV_SERVICE_URL})",
    )
    group.add_argument("--chain-id", help=f"chain ID (default: from the service or ${ENV_CHAIN_ID})")
    group.add_argument("--contract-address", help=f"bounty contract (default: service or ${ENV_CONTRACT_ADDRESS})")
    group.add_argument("--usdc-address", help=f"USDC token (default: service or ${ENV_USDC_ADDRESS})")
    group.add_argument("--timeout", default=str(DEFAULT_TIMEOUT), help="HTTP timeout in seconds")
    return options


def _metadata_options() -> argparse.ArgumentParser:
    options = argparse.ArgumentParser(add_help=False)
    group = options.add_argument_group("metadata (one of --metadata-file, --metadata-uri)")
    source = group.add_mutually_exclusive_group(required=True)
    source.add_argument("--metadata-file", help="JSON file ('-' for stdin), sent inline as a data URI")
    source.add_argument("--metadata-uri", help="a metadata URI that is already published")
    group.add_argument("--metadata-hash", help="bytes32 hash for --metadata-uri (computed for inline URIs)")
    return options


def _add_tx_commands(tx: argparse.ArgumentParser) -> None:
    actions = tx.add_subparsers(dest="action", required=True, metavar="ACTION")
    deployment, metadata = _deployment_options(), _metadata_options()

    create = actions.add_parser(
        "create-bounty", help="createBounty(uri, hash, reward, duration)", parents=[metadata, deployment]
    )
    create.add_argument("--reward", required=True, help="reward in USDC base units")
    create.add_argument("--duration", required=True, help="seconds the bounty stays open")
    create.set_defaults(run=_tx_create_bounty)

    submit = actions.add_parser("submit", help="submit(bountyId, uri, hash)", parents=[metadata, deployment])
    submit.add_argument("--bounty-id", required=True)
    submit.set_defaults(run=_tx_submit)

    dispute = actions.add_parser(
        "dispute", help="dispute(submissionId, uri, hash)", parents=[metadata, deployment]
    )
    dispute.add_argument("--submission-id", required=True)
    dispute.set_defaults(run=_tx_dispute)

    resolve = actions.add_parser(
        "resolve-dispute", help="resolveDispute(disputeId, upheld), for the arbiter", parents=[deployment]
    )
    resolve.add_argument("--dispute-id", required=True)
    verdict = resolve.add_mutually_exclusive_group(required=True)
    verdict.add_argument("--upheld", dest="upheld", action="store_true", help="the dispute is right")
    verdict.add_argument("--rejected", dest="upheld", action="store_false", help="the dispute is wrong")
    resolve.set_defaults(run=_tx_resolve_dispute)

    for name, option, method, help_text in SIMPLE_ACTIONS:
        sub = actions.add_parser(name, help=help_text, parents=[deployment])
        if option is not None:
            sub.add_argument(option, required=True)
        dest = option.removeprefix("--").replace("-", "_") if option else None
        sub.set_defaults(run=_tx_simple, method=method, option_dest=dest)


def build_parser() -> argparse.ArgumentParser:
    """The argument parser of `python -m bounty_client`."""
    parser = argparse.ArgumentParser(
        prog="python -m bounty_client",
        description="Unsigned transactions, quotes and metadata for the bounty contract.",
    )
    parser.add_argument("--version", action="version", version=f"bounty_client {__version__}")
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    _add_tx_commands(commands.add_parser("tx", help="print an unsigned transaction as JSON"))

    quote = commands.add_parser("quote", help="print reward, post fee, submission bond and total as JSON")
    quote.add_argument("--reward", required=True, help="reward in USDC base units")
    quote.add_argument("--post-fee-bps", default=str(QuoteConfig.post_fee_bps))
    quote.add_argument("--submission-bond-bps", default=str(QuoteConfig.submission_bond_bps))
    quote.set_defaults(run=_quote)

    renderers: tuple[tuple[str, str, Callable[[JsonValue], str]], ...] = (
        ("data-uri", "print the inline data URI of a metadata JSON file", metadata_to_data_uri),
        ("hash", "print the metadata hash (keccak256 of canonical JSON) of a JSON file", metadata_hash),
        ("canonical-json", "print the canonical JSON of a JSON file", canonical_json),
    )
    for name, help_text, render in renderers:
        sub = commands.add_parser(name, help=help_text)
        sub.add_argument("file", help="JSON file ('-' for stdin)")
        sub.set_defaults(run=lambda args, render=render: render(_read_metadata_file(args.file)))

    parse = commands.add_parser("parse-uri", help="print the canonical JSON held by an inline metadata URI")
    parse.add_argument("uri")
    parse.set_defaults(run=_parse_uri)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Runs the command line; returns the exit status (0, 1 when the read service failed, 2 for
    bad input or configuration). Errors are one line on stderr."""
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        _check_options(args)
        output: str = args.run(args)
    except CommandError as error:
        print(f"{parser.prog}: error: {error}", file=sys.stderr)
        return error.exit_status
    except (BountyClientError, OSError) as error:
        print(f"{parser.prog}: error: {error}", file=sys.stderr)
        return EXIT_USAGE
    print(output)
    return 0
