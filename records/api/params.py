"""Query parameters of the read routes, as docs/api.md (Lists, Deployments) describes them.

Lenient parameters never fail: `limit` is clamped to 1..100 (anything but an integer means 50),
a `cursor` that is not a non-negative integer reads from offset 0, an unknown `sort` means `id`
and an unknown `dir` means `desc`. Filters are strict: a malformed `chain_id`,
`contract_address`, `bounty_id` or `submission_id`, or `contract_address` without `chain_id`,
is a 400 that names the parameter.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from django.http import QueryDict
from rest_framework.exceptions import ParseError

from records.models import Deployment
from records.selectors import DeploymentFilter, ListQuery, Resource, active_deployment, deployment_get

DEFAULT_LIMIT = 50
MAX_LIMIT = 100
BIGINT_MAX = 2**63 - 1
BEYOND_BIGINT = BIGINT_MAX + 1  # stands for any larger number: nothing is stored that large
_INTEGER = re.compile(r"[+-]?[0-9]+")
_NON_NEGATIVE = re.compile(r"[0-9]+")
_ADDRESS = re.compile(r"0x[0-9a-fA-F]{40}")
PAGING_PARAMS = ("limit", "cursor", "q")
PARENT_FILTERS: dict[Resource, tuple[str, ...]] = {
    "bounties": (),
    "submissions": ("bounty_id",),
    "disputes": ("bounty_id", "submission_id"),
}


class NoSuchDeployment(Exception):
    """A single-record route qualified by a deployment the service does not index."""


@dataclass(frozen=True)
class Page:
    offset: int
    limit: int
    cursor: str | None


def _bounded_int(digits: str) -> int:
    """A decimal string of any length as an int, BEYOND_BIGINT for anything above BIGINT_MAX
    (Python refuses to convert strings of more than 4,300 digits)."""
    significant = digits.lstrip("+-").lstrip("0") or "0"
    value = BEYOND_BIGINT if len(significant) > 19 else min(int(significant), BEYOND_BIGINT)
    return -value if digits.startswith("-") else value


def parse_limit(raw: str | None) -> int:
    if raw is None or not _INTEGER.fullmatch(raw.strip()):
        return DEFAULT_LIMIT
    return max(1, min(MAX_LIMIT, _bounded_int(raw.strip())))


def parse_cursor(raw: str | None) -> tuple[int, str | None]:
    """(offset, the page's `cursor`: the offset as a string, None when absent or invalid).
    An offset past every row (even past what a database integer holds) reads nothing."""
    if raw is None or not _NON_NEGATIVE.fullmatch(raw):
        return 0, None
    return _bounded_int(raw), raw.lstrip("0") or "0"


def parse_id(name: str, raw: str) -> int:
    """A non-negative integer filter value; 400 naming the parameter otherwise."""
    if not _NON_NEGATIVE.fullmatch(raw):
        raise ParseError(f"{name} must be a non-negative integer, got {raw!r}")
    return _bounded_int(raw)


def parse_deployment_filter(params: QueryDict) -> DeploymentFilter:
    chain_raw = params.get("chain_id")
    address_raw = params.get("contract_address")
    if address_raw is not None and chain_raw is None:
        raise ParseError("contract_address must be sent together with chain_id")
    chain_id = None
    if chain_raw is not None:
        chain_id = parse_id("chain_id", chain_raw)
    address = None
    if address_raw is not None:
        if not _ADDRESS.fullmatch(address_raw):
            raise ParseError(f"contract_address must be 0x followed by 40 hex digits, got {address_raw!r}")
        address = address_raw.lower()
    return DeploymentFilter(chain_id=chain_id, contract_address=address)


def qualified_deployment(params: QueryDict) -> Deployment:
    """The deployment a single-record route or parent filter addresses (docs/api.md, Deployments).

    Both `chain_id` and `contract_address`: that deployment; neither: the active deployment;
    one of them: 400. NoSuchDeployment when the service does not index it."""
    has_chain, has_address = "chain_id" in params, "contract_address" in params
    if has_chain != has_address:
        raise ParseError("chain_id and contract_address must be sent together (or both left out "
                         "for the active deployment)")
    if has_chain:
        wanted = parse_deployment_filter(params)
        assert wanted.chain_id is not None and wanted.contract_address is not None
        deployment = None if wanted.chain_id > BIGINT_MAX else deployment_get(wanted.chain_id,
                                                                              wanted.contract_address)
    else:
        deployment = active_deployment()
    if deployment is None:
        raise NoSuchDeployment
    return deployment


def parse_list(resource: Resource, params: QueryDict) -> tuple[ListQuery, Page | None]:
    """The list query and, when the response is a page object, the page to cut."""
    deployments = parse_deployment_filter(params)
    parents = tuple((name, parse_id(name, str(params.get(name, ""))))
                    for name in PARENT_FILTERS[resource] if name in params)
    q = params.get("q") or None
    matches_nothing = (
        (deployments.chain_id is not None and deployments.chain_id > BIGINT_MAX)
        or any(value > BIGINT_MAX for _, value in parents)
    )
    if parents:
        try:
            deployment = qualified_deployment(params)
        except NoSuchDeployment:
            matches_nothing = True
        else:
            deployments = DeploymentFilter(chain_id=deployment.chain_id,
                                           contract_address=deployment.contract_address)
    direction = (params.get("dir") or "").lower()
    query = ListQuery(
        resource=resource,
        deployments=deployments,
        parents=parents,
        q=q,
        sort=params.get("sort") or "id",
        descending=direction != "asc",
        matches_nothing=matches_nothing,
    )
    always_paged = resource == "disputes" and "bounty_id" in params
    if not always_paged and not any(name in params for name in PAGING_PARAMS):
        return query, None
    offset, cursor = parse_cursor(params.get("cursor"))
    return query, Page(offset=offset, limit=parse_limit(params.get("limit")), cursor=cursor)
