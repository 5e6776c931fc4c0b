"""Swagger UI and Redoc that work offline: their assets come from drf-spectacular-sidecar, Redoc's
page leaves out its web fonts, and a Content-Security-Policy keeps each page from reaching any
other host (Redoc's sidebar would otherwise fetch its vendor's logo from a CDN)."""

from __future__ import annotations

from collections.abc import Callable
from functools import wraps
from typing import Any

from django.http import HttpRequest, HttpResponseBase
from drf_spectacular.views import SpectacularRedocView, SpectacularSwaggerView

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
