"""The OpenAPI schema, generated once per process, and Swagger UI and Redoc that work offline:
their assets come from drf-spectacular-sidecar, Redoc's page leaves out its web fonts, and a
Content-Security-Policy keeps each page from reaching any other host (Redoc's sidebar would
otherwise fetch its vendor's logo from a CDN)."""

from __future__ import annotations

from collections.abc import Callable
from functools import cache, wraps
from typing import Any

from django.http import HttpRequest, HttpResponseBase
from drf_spectacular.views import SpectacularAPIView, SpectacularRedocView, SpectacularSwaggerView
from rest_framework.request import Request
from rest_framework.response import Response

ONLY_THIS_SERVICE = "; ".join((
    "default-src 'self'",
    "script-src 'self' 'unsafe-inline'",  # the pages start the viewers with an inline script
    "style-src 'self' 'unsafe-inline'",  # both viewers style their elements inline
    "img-src 'self' data:",
    "font-src 'self' data:",
    "worker-src 'self' blob:",  # Redoc's search runs in a worker built from a blob
    "connect-src 'self'",
    "frame-ancestors 'none'",
))


def swagger_ui() -> Callable[..., HttpResponseBase]:
    return _only_this_service(SpectacularSwaggerView.as_view(url_name="schema"))


def redoc() -> Callable[..., HttpResponseBase]:
    return _only_this_service(SpectacularRedocView.as_view(url_name="schema", template_name="api/redoc.html"))


def _only_this_service(view: Callable[..., HttpResponseBase]) -> Callable[..., HttpResponseBase]:
    @wraps(view)
    def page(request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponseBase:
        response = view(request, *args, **kwargs)
        response["Content-Security-Policy"] = ONLY_THIS_SERVICE
        return response

    return page


class SchemaView(SpectacularAPIView):
    """drf-spectacular's schema view, generating the schema once per process: it depends only on
    the code and the settings, and a generation walks every route and serializer (tens of
    milliseconds a request)."""

    def _get_schema_response(self, request: Request) -> Response:
        filename = self._get_filename(request, None)  # type: ignore[no-untyped-call]  # drf-spectacular's, untyped
        return Response(data=openapi_schema(), headers={"Content-Disposition": f'inline; filename="{filename}"'})


@cache
def openapi_schema() -> dict[str, Any]:
    generator = SpectacularAPIView.generator_class()
    schema: dict[str, Any] = generator.get_schema(request=None, public=True)  # type: ignore[no-untyped-call]
    return schema
