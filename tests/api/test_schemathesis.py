"""Schemathesis against the served OpenAPI schema: generated requests to every operation get no
5xx, and every response conforms to what the schema says of its status, headers and body."""

from __future__ import annotations

from typing import Any

import pytest
import schemathesis
from django.core import signals
from django.core.handlers.wsgi import WSGIHandler
from django.db import close_old_connections
from hypothesis import HealthCheck, settings
from schemathesis.checks import negative_data_rejection, positive_data_acceptance

from records.models import Deployment
from tests.api import helpers as h


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
@settings(max_examples=40, deadline=None, suppress_health_check=list(HealthCheck))
def test_every_operation_answers_as_its_schema_says(case: Any, records: h.Tree) -> None:
    # Not checked: that every schema-valid request is accepted, since `chain_id` and
    # `contract_address` must come together (OpenAPI 3.0 cannot say so), nor that invalid values
    # are refused, since `limit`, `cursor`, `sort` and `dir` are lenient by design (docs/api.md,
    # Parameters).
    case.call_and_validate(headers={"Accept": "application/json"},
                           excluded_checks=[positive_data_acceptance, negative_data_rejection])
