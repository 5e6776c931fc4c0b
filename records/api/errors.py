"""One error shape everywhere: `{"detail": "<message>"}`, unknown routes and server errors too."""

from __future__ import annotations

from typing import Any

from django.http import HttpRequest, JsonResponse
from rest_framework.response import Response
from rest_framework.views import exception_handler


def api_exception_handler(exc: Exception, context: dict[str, Any]) -> Response | None:
    """DRF's handler, with every detail flattened to one string."""
    response = exception_handler(exc, context)
    if response is not None and not (isinstance(response.data, dict) and isinstance(response.data.get("detail"), str)):
        response.data = {"detail": _flatten(response.data)}
    return response


def _flatten(data: Any) -> str:
    if isinstance(data, dict):
        return "; ".join(f"{key}: {_flatten(value)}" for key, value in data.items())
    if isinstance(data, list):
        return "; ".join(_flatten(item) for item in data)
    return str(data)


def not_found(request: HttpRequest, exception: Exception | None = None) -> JsonResponse:
    return JsonResponse({"detail": f"no route {request.path}"}, status=404)


def server_error(request: HttpRequest) -> JsonResponse:
    return JsonResponse({"detail": "internal server error"}, status=500)


def bad_request(request: HttpRequest, exception: Exception | None = None) -> JsonResponse:
    return JsonResponse({"detail": "bad request"}, status=400)


def permission_denied(request: HttpRequest, exception: Exception | None = None) -> JsonResponse:
    return JsonResponse({"detail": "permission denied"}, status=403)
