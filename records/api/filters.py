"""The lists' filters, search and sort as DRF filter backends (docs/api.md, Lists).

A list's "queryset" here is a `records.selectors.ListQuery`, which each backend narrows in turn
(`GenericAPIView.filter_queryset` runs them in order); the selectors then read the page, the
total or the stream from it with the fast paths that only a whole query can choose.

- `RecordFilterBackend` validates the resource's FilterSet (django-filter): the deployment
  (`chain_id`, `contract_address`), the parents (`bounty_id`, `submission_id`), `status` and the
  actor (`poster`, `claimant`, `challenger`). Filters are strict: a malformed value is a 400 that
  names the parameter. The FilterSet's filters are the one declaration of the exact filters:
  their lookups become the query's `filters`, their help texts the OpenAPI parameters.
- `SearchBackend`: `q`, a substring of the record's search text, at most BOUNTY_Q_MAX_LENGTH characters.
- `SortBackend`: `sort` and `dir`, lenient: an unknown key sorts by `id`, an unknown direction
  means `desc`.
"""

from __future__ import annotations

import re
from dataclasses import replace
from functools import lru_cache
from typing import Any, cast

import django_filters
from django import forms
from django.conf import settings
from django.http import QueryDict
from rest_framework.exceptions import ParseError
from rest_framework.filters import BaseFilterBackend
from rest_framework.request import Request

from records.models import Bounty, BountyStatus, Deployment, Dispute, DisputeStatus, Submission, SubmissionStatus
from records.selectors import BIGINT_MAX, DeploymentFilter, ListQuery, deployment_qualified

BEYOND_BIGINT = BIGINT_MAX + 1  # stands for any larger number: nothing is stored that large
_NON_NEGATIVE = re.compile(r"[0-9]+")
_ADDRESS = re.compile(r"0x[0-9a-fA-F]{40}")
ADDRESS_PATTERN = f"^{_ADDRESS.pattern}$"  # the schema's
DEPLOYMENT_FILTERS = ("chain_id", "contract_address")


def bounded_int(digits: str) -> int:
    """A decimal string of any length as an int, BEYOND_BIGINT for anything above BIGINT_MAX
    (Python refuses to convert strings of more than 4,300 digits)."""
    significant = digits.lstrip("+-").lstrip("0") or "0"
    value = BEYOND_BIGINT if len(significant) > 19 else min(int(significant), BEYOND_BIGINT)
    return -value if digits.startswith("-") else value


class _IdField(forms.Field):
    """A non-negative integer of any length (above the database's integers: BEYOND_BIGINT)."""

    def to_python(self, value: Any) -> int | None:
        if value is None:  # absent (sent empty, it is malformed)
            return None
        if not _NON_NEGATIVE.fullmatch(str(value)):
            raise forms.ValidationError(f"must be a non-negative integer, got {value!r}")
        return bounded_int(str(value))


class _AddressField(forms.Field):
    """An EVM address in any letter case, lowercased."""

    def to_python(self, value: Any) -> str | None:
        if value is None:
            return None
        if not _ADDRESS.fullmatch(str(value)):
            raise forms.ValidationError(f"must be 0x followed by 40 hex digits, got {value!r}")
        return str(value).lower()


class _RepeatedOrCommaSeparated(forms.Widget):
    """`status=open,resolved` and `status=open&status=resolved` alike."""

    def value_from_datadict(self, data: Any, files: Any, name: str) -> str | None:
        if name not in data:
            return None
        values = data.getlist(name) if isinstance(data, QueryDict) else [data[name]]
        return ",".join(str(value) for value in values)


class _StatusesField(forms.Field):
    widget = _RepeatedOrCommaSeparated

    def __init__(self, *, choices: list[tuple[str, str]], **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.statuses = [value for value, _ in choices]

    def to_python(self, value: Any) -> tuple[str, ...] | None:
        if value is None:
            return None
        wanted = [part.strip().lower() for part in str(value).split(",")]
        unknown = [part for part in wanted if part not in self.statuses]
        if unknown:
            raise forms.ValidationError(f"must be one or several of {', '.join(self.statuses)} "
                                        f"(comma-separated or repeated), got {unknown[0]!r}")
        return tuple(dict.fromkeys(wanted))


class IdFilter(django_filters.Filter):
    field_class = _IdField


class AddressFilter(django_filters.Filter):
    field_class = _AddressField


class StatusFilter(django_filters.Filter):
    field_class = _StatusesField

    def __init__(self, *, choices: list[tuple[str, str]], **kwargs: Any) -> None:
        super().__init__(field_name="status", lookup_expr="in", choices=choices, **kwargs)


class RecordFilterSet(django_filters.FilterSet):
    """The filters every list has: the deployment, which picks the deployments to read (not a
    column), and the record's own exact filters declared by each resource's FilterSet."""

    chain_id = IdFilter(field_name="deployment__chain_id", help_text="only this chain's deployments")
    contract_address = AddressFilter(field_name="deployment__contract_address",
                                     help_text="only this deployment (needs chain_id; any letter case)")

    def lookups(self) -> tuple[tuple[str, Any], ...]:
        """The valid form's record filters as ORM lookups (the deployment's left out)."""
        found = []
        for name, value in self.form.cleaned_data.items():
            if value is None or name in DEPLOYMENT_FILTERS:
                continue
            declared = self.filters[name]
            lookup = declared.field_name if declared.lookup_expr == "exact" else \
                f"{declared.field_name}__{declared.lookup_expr}"
            found.append((lookup, value))
        return tuple(found)

    def error(self) -> str:
        """The first invalid parameter and why, as the 400 says it."""
        name, errors = next(iter(self.form.errors.items()))
        return f"{name} {errors[0]}"


def qualified_deployment(params: QueryDict) -> Deployment | None:
    """The deployment a single-record route or parent filter addresses (selectors.deployment_qualified),
    from `chain_id` and `contract_address`, which come together or not at all (else a 400); None
    when the service does not index it."""
    has_chain, has_address = "chain_id" in params, "contract_address" in params
    if has_chain != has_address:
        raise ParseError("chain_id and contract_address must be sent together (or both left out "
                         "for the active deployment)")
    if not has_chain:
        return deployment_qualified(None, None)
    cleaned, _ = validated_filters(RecordFilterSet, params)
    return deployment_qualified(cleaned["chain_id"], cleaned["contract_address"])


_PARENT_HELP = "records of this parent, within the deployment named by chain_id + contract_address (or the active one)"
_ACTOR_HELP = "only records whose {} is this address (any letter case)"


class BountyFilterSet(RecordFilterSet):
    status = StatusFilter(choices=BountyStatus.choices, help_text="only bounties in these statuses")
    poster = AddressFilter(help_text=_ACTOR_HELP.format("poster"))

    class Meta:
        model = Bounty
        fields: list[str] = []


class SubmissionFilterSet(RecordFilterSet):
    bounty_id = IdFilter(help_text=_PARENT_HELP)
    status = StatusFilter(choices=SubmissionStatus.choices, help_text="only submissions in these statuses")
    claimant = AddressFilter(help_text=_ACTOR_HELP.format("claimant"))

    class Meta:
        model = Submission
        fields: list[str] = []


class DisputeFilterSet(RecordFilterSet):
    bounty_id = IdFilter(help_text=_PARENT_HELP)
    submission_id = IdFilter(help_text=_PARENT_HELP)
    status = StatusFilter(choices=DisputeStatus.choices, help_text="only disputes in these statuses")
    challenger = AddressFilter(field_name="challenger_id", help_text=_ACTOR_HELP.format("challenger"))

    class Meta:
        model = Dispute
        fields: list[str] = []


def _parameter(name: str, description: str, kind: str = "string", **schema: Any) -> dict[str, Any]:
    return {"name": name, "in": "query", "required": False, "description": description,
            "schema": {"type": kind, **schema}}


def lenient_parameter(name: str, description: str, meant: dict[str, Any]) -> dict[str, Any]:
    """A parameter that takes any value (docs/api.md, Parameters), with the values it means stated
    first: the schema refuses nothing the server accepts."""
    return {"name": name, "in": "query", "required": False, "description": description,
            "schema": {"anyOf": [meant, {"type": "string"}]}}


Validated = tuple[tuple[tuple[str, Any], ...], tuple[tuple[str, Any], ...]] | str


@lru_cache(maxsize=4096)
def _validated(filterset_class: Any, sent: tuple[tuple[str, tuple[str, ...]], ...]) -> Validated:
    """The verdict of `filterset_class` (a RecordFilterSet) on the filter parameters sent: (its
    cleaned values, its lookups), or the 400's message. Remembered per set of values: a FilterSet
    builds a form class and copies its filters on every instance, which was a third of a cached
    page's time, and clients repeat the same filters."""
    data = QueryDict(mutable=True)
    for name, values in sent:
        data.setlist(name, list(values))
    filterset: RecordFilterSet = filterset_class(data, queryset=Deployment.objects.none())  # no queryset is read
    if not filterset.is_valid():
        return filterset.error()
    return tuple(filterset.form.cleaned_data.items()), filterset.lookups()


def validated_filters(filterset_class: type[RecordFilterSet],
                      params: QueryDict) -> tuple[dict[str, Any], tuple[tuple[str, Any], ...]]:
    """The FilterSet's cleaned values and record lookups for the request's parameters; a 400
    naming the first malformed one."""
    sent = tuple((name, tuple(params.getlist(name))) for name in filterset_class.base_filters if name in params)
    valid = _validated(cast(Any, filterset_class), sent)  # a class is hashable; mypy thinks not
    if isinstance(valid, str):
        raise ParseError(valid)
    return dict(valid[0]), valid[1]


class RecordFilterBackend(BaseFilterBackend):
    """The view's `filterset_class`, validated: the deployments a list spans and its exact filters.
    A parent filter reads within the deployment chain_id + contract_address name (or the active
    one); one that cannot exist (no such deployment, an ID beyond any stored) matches nothing."""

    def filter_queryset(self, request: Request, queryset: Any, view: Any) -> Any:
        query: ListQuery = queryset
        params = request.query_params
        if "contract_address" in params and "chain_id" not in params:
            raise ParseError("contract_address must be sent together with chain_id")
        filterset_class: type[RecordFilterSet] = view.filterset_class
        cleaned, lookups = validated_filters(filterset_class, params)
        chain_id, address = cleaned.get("chain_id"), cleaned.get("contract_address")
        deployments = DeploymentFilter(chain_id=chain_id, contract_address=address)
        beyond = [value for _, value in lookups if isinstance(value, int) and not isinstance(value, bool)]
        matches_nothing = (chain_id is not None and chain_id > BIGINT_MAX) or any(v > BIGINT_MAX for v in beyond)
        if any(cleaned.get(name) is not None for name in view.kind.parents):
            deployment = qualified_deployment(params)
            if deployment is None:
                matches_nothing = True
            else:
                deployments = DeploymentFilter(chain_id=deployment.chain_id,
                                               contract_address=deployment.contract_address)
        return replace(query, deployments=deployments, filters=lookups,
                       matches_nothing=query.matches_nothing or matches_nothing)

    def get_schema_operation_parameters(self, view: Any) -> list[dict[str, Any]]:
        parameters = []
        for name, declared in view.filterset_class.base_filters.items():
            description = str(declared.extra.get("help_text", ""))
            if isinstance(declared, IdFilter):
                parameters.append(_parameter(name, description, "integer", minimum=0))
            elif isinstance(declared, StatusFilter):
                statuses = [value for value, _ in declared.extra["choices"]]
                parameters.append({**_parameter(name, f"{description}: comma-separated, or the parameter "
                                                "repeated", "array", items={"type": "string", "enum": statuses},
                                                minItems=1),
                                   "style": "form", "explode": False})
            else:
                parameters.append(_parameter(name, description, pattern=ADDRESS_PATTERN))
        return parameters


class SearchBackend(BaseFilterBackend):
    """`q`: a case-insensitive substring of the IDs, status, addresses, metadata, transaction
    hash or text field. An empty `q` filters nothing (but still asks for a page object)."""

    def filter_queryset(self, request: Request, queryset: Any, view: Any) -> Any:
        query: ListQuery = queryset
        q = request.query_params.get("q") or None
        limit: int = settings.BOUNTY_Q_MAX_LENGTH
        if q is not None and len(q) > limit:
            raise ParseError(f"q must be at most {limit} characters, got {len(q)}")
        return replace(query, q=q)

    def get_schema_operation_parameters(self, view: Any) -> list[dict[str, Any]]:
        return [_parameter("q", "case-insensitive substring of IDs, status, addresses, metadata, transaction hash "
                           f"or the text field, at most {settings.BOUNTY_Q_MAX_LENGTH} characters. Asks for a "
                           "page object, even empty.", maxLength=settings.BOUNTY_Q_MAX_LENGTH)]


class SortBackend(BaseFilterBackend):
    """`sort` (the resource's keys and their aliases; anything else sorts by id) and `dir`
    (asc or desc in any case; anything else means desc). Ties break by id, then deployment."""

    def filter_queryset(self, request: Request, queryset: Any, view: Any) -> Any:
        query: ListQuery = queryset
        direction = (request.query_params.get("dir") or "").lower()
        return replace(query, sort=request.query_params.get("sort") or "id", descending=direction != "asc")

    def get_schema_operation_parameters(self, view: Any) -> list[dict[str, Any]]:
        return [
            lenient_parameter("sort", "sort key (the list's keys and aliases); any other value sorts by id; ties "
                              "break by id", {"type": "string", "enum": sorted(view.kind.sort_keys)}),
            lenient_parameter("dir", "asc or desc, any case; any other value means desc",
                              {"type": "string", "enum": ["asc", "desc"]}),
        ]
