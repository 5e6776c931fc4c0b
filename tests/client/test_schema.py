"""bounty_client.schema against the service's OpenAPI schema, committed as clients/openapi.json
(tests/api/test_schema.py keeps that file true to the server): every TypedDict has exactly the
properties of the components it stands for, required where they are (NotRequired where they are
not), nullable where they are (`X | None`), of the same types and with the same enum values."""

from __future__ import annotations

import json
import types
from pathlib import Path
from typing import (
    Any,
    Literal,
    NotRequired,
    Required,
    TypeVar,
    Union,
    get_args,
    get_origin,
    get_type_hints,
    is_typeddict,
)

import pytest

from bounty_client import schema, webhooks

COMPONENTS: dict[str, Any] = json.loads(
    (Path(__file__).resolve().parents[2] / "clients" / "openapi.json").read_text("utf-8")
)["components"]["schemas"]

# The TypedDict each component is read as. One record TypedDict stands for the plain record and
# its row (the record with its counter, in pages and overviews), the counter NotRequired.
TYPED_DICT_OF = {
    "Bounty": schema.BountyRecord, "BountyRow": schema.BountyRecord,
    "Submission": schema.SubmissionRecord, "SubmissionRow": schema.SubmissionRecord,
    "Dispute": schema.DisputeRecord,
    "BountyPage": schema.Page, "SubmissionPage": schema.Page, "DisputePage": schema.Page,
    "BountyOverview": schema.BountyOverview,
    "SubmissionOverview": schema.SubmissionOverview,
    "DisputeOverview": schema.DisputeOverview,
    "Health": schema.Health,
    "HealthDeployment": schema.HealthDeployment,
    "HealthIndexer": schema.HealthIndexer,
    "HealthBackfill": schema.HealthBackfill,
    "HealthIndexerProcess": schema.HealthIndexerProcess,
    "HealthRedis": schema.HealthRedis,
    "HealthReplica": schema.HealthReplica,
    "HealthWebhooks": schema.HealthWebhooks,
    "HealthWebhookWorker": schema.HealthWebhookWorker,
    # The payloads of webhook deliveries beyond the records (docs/api.md, Webhooks).
    "ResyncAfterBackfill": webhooks.ResyncAfterBackfill,
    "ResyncOfEndpoint": webhooks.ResyncOfEndpoint,
    "WebhookTest": webhooks.WebhookTest,
}
# Components the client has no TypedDict for: a list's two shapes (an array of records or a page)
# and the error body, which RequestFailedError.detail carries.
NOT_TYPED = {"BountyList", "SubmissionList", "DisputeList", "Error"}
PAGE_RECORD = {"BountyPage": schema.BountyRecord, "SubmissionPage": schema.SubmissionRecord,
               "DisputePage": schema.DisputeRecord}
JSON_TYPES = {"integer": "int", "string": "str", "boolean": "bool", "number": "float"}

Shape = dict[str, tuple[bool, str]]  # property: (required, type)


def _openapi_type(node: dict[str, Any]) -> str:
    """A property's schema as the Python annotation it asks for, spelt as `_python_type` spells it.
    OpenAPI 3.1 says null with a `null` type: beside another (`"type": ["string", "null"]`), or as
    one of a `oneOf` (drf-spectacular's spelling of a nullable $ref)."""
    nullable = False
    if isinstance(node.get("type"), list):
        (present,) = set(node["type"]) - {"null"}
        nullable, node = len(node["type"]) > 1, {**node, "type": present}
    if "allOf" in node:  # drf-spectacular's wrapping of a $ref that carries a description
        (node,) = node["allOf"]
    if "oneOf" in node:
        present = [option for option in node["oneOf"] if option != {"type": "null"}]
        nullable = nullable or len(present) < len(node["oneOf"])
        (node,) = present
    if "$ref" in node:
        spelt = TYPED_DICT_OF[node["$ref"].rsplit("/", 1)[1]].__name__
    elif "enum" in node:
        spelt = f"Literal{sorted(value for value in node['enum'] if value is not None)}"
    elif node["type"] == "array":
        spelt = f"list[{_openapi_type(node['items'])}]"
    elif node["type"] == "object" and "additionalProperties" in node:  # a map from names
        spelt = f"dict[str, {_openapi_type(node['additionalProperties'])}]"
    else:
        spelt = JSON_TYPES[node["type"]]
    return f"{spelt} | None" if nullable else spelt


def _python_type(annotation: Any, record: type | None) -> str:
    if isinstance(annotation, TypeVar):  # Page's RecordT
        assert record is not None
        annotation = record
    origin = get_origin(annotation)
    if origin in (Union, types.UnionType):
        present = [arg for arg in get_args(annotation) if arg is not type(None)]
        assert len(present) == 1, annotation
        spelt = _python_type(present[0], record)
        return f"{spelt} | None" if len(present) < len(get_args(annotation)) else spelt
    if origin is Literal:
        return f"Literal{sorted(get_args(annotation))}"
    if origin is list:
        return f"list[{_python_type(get_args(annotation)[0], record)}]"
    if origin is dict:
        key, value = get_args(annotation)
        return f"dict[{_python_type(key, record)}, {_python_type(value, record)}]"
    assert annotation in (int, str, bool, float) or is_typeddict(annotation), annotation
    return str(annotation.__name__)


def openapi_shape(names: list[str]) -> Shape:
    """The properties of these components together: required where every one of them requires it."""
    shape: Shape = {}
    for name in names:
        for prop, node in COMPONENTS[name]["properties"].items():
            described = (all(prop in COMPONENTS[other].get("required", []) for other in names), _openapi_type(node))
            assert shape.setdefault(prop, described) == described, f"{prop} differs between {names}"
    return shape


def python_shape(typed_dict: Any, record: type | None = None) -> Shape:
    # Required-ness from the annotations themselves: under `from __future__ import annotations`,
    # Python 3.11 cannot see NotRequired when it builds __required_keys__.
    shape: Shape = {}
    for name, hint in get_type_hints(typed_dict, include_extras=True).items():
        marked = get_origin(hint) in (NotRequired, Required)
        required = get_origin(hint) is Required if marked else typed_dict.__total__
        shape[name] = (required, _python_type(get_args(hint)[0] if marked else hint, record))
    return shape


def _components_by_typed_dict() -> dict[str, list[str]]:
    """Each TypedDict's components; each page apart, since Page's record type differs."""
    grouped: dict[str, list[str]] = {}
    for name, typed in TYPED_DICT_OF.items():
        grouped.setdefault(name if typed is schema.Page else typed.__name__, []).append(name)
    return grouped


CASES = [pytest.param(names, id=key) for key, names in _components_by_typed_dict().items()]


@pytest.mark.parametrize("names", CASES)
def test_each_typed_dict_agrees_with_the_openapi_schema(names: list[str]) -> None:
    typed_dict = TYPED_DICT_OF[names[0]]
    assert python_shape(typed_dict, PAGE_RECORD.get(names[0])) == openapi_shape(names)


def test_every_component_of_the_schema_has_a_typed_dict() -> None:
    assert set(COMPONENTS) - set(TYPED_DICT_OF) == NOT_TYPED

