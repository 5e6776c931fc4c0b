"""The OpenAPI schema at /api/schema/: valid OpenAPI 3, and true to the routes, their parameters,
both list shapes, every error and the rate-limit headers; committed as clients/openapi.json, the
contract both clients are held to, it must be what the server generates now. (test_schemathesis.py
checks the answers against it; test_docs_in_a_browser.py the Swagger UI and Redoc pages;
tests/client/test_schema.py the Python client's types.)"""

from __future__ import annotations

import difflib
import json
import tomllib
from pathlib import Path
from typing import Any

import pytest
from django.conf import settings
from django.core.management import call_command
from django.test import Client
from drf_spectacular.generators import SchemaGenerator
from drf_spectacular.validation import validate_schema

from records.api.docs import openapi_schema
from records.kinds import BY_RESOURCE, Resource

RECORD_ROUTES = {
    f"/{resource}{suffix}"
    for resource in ("bounties", "submissions", "disputes") for suffix in ("", "/{record_id}", "/{record_id}/overview")
}
EXACT_FILTERS: dict[str, set[str]] = {
    "bounties": {"status", "poster"},
    "submissions": {"bounty_id", "status", "claimant"},
    "disputes": {"bounty_id", "submission_id", "status", "challenger"},
}
RATE_HEADERS = {"X-RateLimit-Limit", "X-RateLimit-Remaining", "X-RateLimit-Reset"}
COMMITTED_SCHEMA = Path(settings.BASE_DIR) / "clients" / "openapi.json"
REGENERATE = ("DJANGO_DEBUG=1 .venv/bin/python manage.py spectacular --format openapi-json --validate --fail-on-warn "
              "--file clients/openapi.json (then `npm run generate` in clients/typescript)")


@pytest.fixture
def schema(api: Client) -> dict[str, Any]:
    response = api.get("/api/schema/?format=json")
    assert response.status_code == 200
    document: dict[str, Any] = json.loads(response.content)
    return document


def _resolve(schema: dict[str, Any], node: dict[str, Any]) -> dict[str, Any]:
    while "$ref" in node:
        node = schema["components"]["schemas"][node["$ref"].rsplit("/", 1)[1]]
    return node


def test_the_schema_is_valid_openapi_3(schema: dict[str, Any]) -> None:
    assert schema["openapi"].startswith("3.")
    validate_schema(schema)  # type: ignore[no-untyped-call]  # drf-spectacular's check against the meta-schema of the schema's version (3.1); raises if invalid


def test_the_committed_schema_is_what_the_server_generates_now(tmp_path: Path) -> None:
    generated = tmp_path / "openapi.json"
    call_command("spectacular", "--format", "openapi-json", "--file", str(generated))
    diff = list(difflib.unified_diff(COMMITTED_SCHEMA.read_text("utf-8").splitlines(),
                                     generated.read_text("utf-8").splitlines(),
                                     "clients/openapi.json", "generated now", lineterm="", n=2))
    assert not diff, f"clients/openapi.json is stale; regenerate it: {REGENERATE}\n" + "\n".join(diff[:80])


def test_its_version_is_the_service_version_from_pyproject(schema: dict[str, Any]) -> None:
    project = tomllib.loads((Path(settings.BASE_DIR) / "pyproject.toml").read_text("utf-8"))["project"]
    assert schema["info"]["version"] == project["version"] == settings.SERVICE_VERSION


def test_it_documents_every_read_route_and_only_get(schema: dict[str, Any]) -> None:
    assert set(schema["paths"]) == RECORD_ROUTES | {"/health"}
    for path, operations in schema["paths"].items():
        assert set(operations) - {"parameters"} == {"get"}, path


@pytest.mark.parametrize("resource", ["bounties", "submissions", "disputes"])
def test_a_list_is_documented_as_an_array_or_a_page_object(schema: dict[str, Any], resource: str) -> None:
    ok = schema["paths"][f"/{resource}"]["get"]["responses"]["200"]["content"]["application/json"]["schema"]
    shapes = _resolve(schema, ok)["oneOf"]
    array = next(shape for shape in shapes if shape.get("type") == "array")
    page = _resolve(schema, next(shape for shape in shapes if shape is not array))
    assert set(page["properties"]) == {"items", "total", "limit", "cursor", "next_cursor"}
    assert set(page["required"]) == set(page["properties"])
    assert page["properties"]["items"]["type"] == "array"
    assert _resolve(schema, array["items"])["properties"]["id"]["type"] == "integer"


@pytest.mark.parametrize("resource", ["bounties", "submissions", "disputes"])
def test_every_list_parameter_is_documented_with_every_sort_key(schema: dict[str, Any], resource: Resource) -> None:
    parameters = {p["name"]: p for p in schema["paths"][f"/{resource}"]["get"]["parameters"]}
    expected = {"limit", "cursor", "q", "sort", "dir", "chain_id", "contract_address", *EXACT_FILTERS[resource]}
    assert set(parameters) == expected
    assert all(p["in"] == "query" and p.get("description") for p in parameters.values())
    # Lenient: the values they mean are stated first, and any other string is allowed.
    sort, direction = parameters["sort"]["schema"]["anyOf"], parameters["dir"]["schema"]["anyOf"]
    assert set(sort[0]["enum"]) == set(BY_RESOURCE[resource].sort_keys) and sort[1] == {"type": "string"}
    assert set(direction[0]["enum"]) == {"asc", "desc"} and direction[1] == {"type": "string"}
    assert parameters["q"]["schema"] == {"type": "string", "maxLength": settings.BOUNTY_Q_MAX_LENGTH}


@pytest.mark.parametrize("path", sorted(RECORD_ROUTES))
def test_every_error_and_the_rate_limit_headers_are_documented(schema: dict[str, Any], path: str) -> None:
    responses = schema["paths"][path]["get"]["responses"]
    errors = {"400", "405", "429"} | ({"404"} if "{record_id}" in path else set())
    assert {"200", "304"} | errors <= set(responses)
    for status in errors:
        body = responses[status]["content"]["application/json"]["schema"]
        assert _resolve(schema, body)["required"] == ["detail"], status
    for status, response in responses.items():
        assert set(response.get("headers", {})) >= RATE_HEADERS, status
    assert "Retry-After" in responses["429"]["headers"]
    assert {"ETag", "Cache-Control"} <= set(responses["200"]["headers"])


@pytest.mark.parametrize("resource", ["bounties", "submissions", "disputes"])
def test_a_list_documents_its_503_past_the_streams_a_server_may_hold(schema: dict[str, Any], resource: str) -> None:
    busy = schema["paths"][f"/{resource}"]["get"]["responses"]["503"]
    assert "BOUNTY_HTTP_MAX_STREAMS" in busy["description"]
    assert "Retry-After" in busy["headers"]
    assert _resolve(schema, busy["content"]["application/json"]["schema"])["required"] == ["detail"]


@pytest.mark.parametrize("path", sorted(RECORD_ROUTES))
def test_a_304_is_documented_with_the_tag_and_without_a_body(schema: dict[str, Any], path: str) -> None:
    not_modified = schema["paths"][path]["get"]["responses"]["304"]
    assert {"ETag", "Cache-Control"} <= set(not_modified["headers"])
    assert "content" not in not_modified


def test_health_documents_its_503_and_is_not_rate_limited(schema: dict[str, Any]) -> None:
    responses = schema["paths"]["/health"]["get"]["responses"]
    assert set(responses) == {"200", "503"}
    assert not any(RATE_HEADERS & set(response.get("headers", {})) for response in responses.values())


def test_the_schema_is_generated_once_per_process_and_served_as_generated(api: Client,
                                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    generated: list[dict[str, Any]] = []
    generate = SchemaGenerator.get_schema

    def counted(self: SchemaGenerator, *args: Any, **kwargs: Any) -> Any:
        generated.append(generate(self, *args, **kwargs))  # type: ignore[no-untyped-call]
        return generated[-1]

    monkeypatch.setattr(SchemaGenerator, "get_schema", counted)
    openapi_schema.cache_clear()  # whatever an earlier test of this process generated
    answers = [api.get(path) for path in ("/api/schema/?format=json", "/api/schema/", "/api/schema/?format=json")]
    assert [answer.status_code for answer in answers] == [200] * 3
    assert len(generated) == 1
    assert json.loads(answers[0].content) == json.loads(answers[2].content) == json.loads(json.dumps(generated[0]))
