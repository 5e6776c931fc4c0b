"""Schemathesis against the served OpenAPI schema: requests generated from it, valid and invalid,
to every operation. None gets a 5xx; every response conforms to what the schema says of its
status, headers and body; every request the schema allows is accepted and every one it refuses is
refused (positive and negative data acceptance), so the schema states each bound the server
enforces and no other. The one rule the schema cannot state, that `chain_id` and
`contract_address` come together (docs/api.md, Deployments), is left out of the acceptance check
for the requests that send one alone."""

from __future__ import annotations

from typing import Any

import pytest
import schemathesis
from django.core import signals
from django.core.handlers.wsgi import WSGIHandler
from django.db import close_old_connections
from hypothesis import HealthCheck, settings
from schemathesis.checks import positive_data_acceptance

from records.models import Deployment
from tests.api import helpers as h

QUALIFIERS = {"chain_id", "contract_address"}


def application(environ: dict[str, Any], start_response: Any) -> list[bytes]:
    """The WSGI application, minus closing the database connection around each request (as
    Django's test client does): the test's transaction, and its records, would go with it."""
    signals.request_started.disconnect(close_old_connections)
    signals.request_finished.disconnect(close_old_connections)
    try:
        response = WSGIHandler()(environ, start_response)
        body = b"".join(response)
        response.close()
        return [body]
    finally:
        signals.request_started.connect(close_old_connections)
        signals.request_finished.connect(close_old_connections)


schema = schemathesis.openapi.from_wsgi("/api/schema/?format=json", application)


@pytest.fixture
def records(active: Deployment) -> h.Tree:
    """Records for generated IDs and filters to find (alongside many that find nothing)."""
    return h.make_tree(active)


@schema.parametrize()
@settings(max_examples=60, deadline=None, suppress_health_check=list(HealthCheck))
def test_every_operation_accepts_what_its_schema_allows_refuses_the_rest_and_answers_as_it_says(
        case: Any, records: h.Tree) -> None:
    one_alone = len(QUALIFIERS & set(case.query or {})) == 1
    case.call_and_validate(headers={"Accept": "application/json"},
                           excluded_checks=[positive_data_acceptance] if one_alone else [])
