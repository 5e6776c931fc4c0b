"""GET /: the service's front page, so that a person who opens the server finds their way.

It links the read API, the websocket feed, the API's docs, the moderators' admin and /health:
as JSON by default and for `Accept: application/json`, as a small HTML page for browsers (which
ask for text/html). In development (DEBUG on) it also links the example front end that
`scripts/dev` serves at /example/. It reads no records and is not part of the documented read API.
"""

from __future__ import annotations

from typing import Any

from django.conf import settings
from drf_spectacular.utils import extend_schema
from rest_framework.renderers import TemplateHTMLRenderer
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from records.api.renderers import OrjsonRenderer
from records.kinds import KINDS

SERVICE_NAME = "Bounty read service"


def service_links(request: Request) -> dict[str, Any]:
    """Every entry point of the service as absolute URLs; `{id}` stands for a record's on-chain ID."""
    absolute = request.build_absolute_uri
    api: dict[str, str] = {"health": absolute("/health")}
    for kind in KINDS:
        listed = absolute(f"/{kind.resource}")
        api |= {kind.resource: listed, kind.name: f"{listed}/{{id}}",
                f"{kind.name}_overview": f"{listed}/{{id}}/overview"}
    links: dict[str, Any] = {
        "service": SERVICE_NAME,
        "version": settings.SERVICE_VERSION,
        "api": api,
        "events": f"{'wss' if request.is_secure() else 'ws'}://{request.get_host()}/ws/events",
        "docs": {
            "swagger_ui": absolute("/api/docs/"),
            "redoc": absolute("/api/redoc/"),
            "openapi_schema": absolute("/api/schema/"),
        },
        "admin": absolute("/admin/"),
    }
    if settings.DEBUG:  # bountysite/urls.py serves it in development only
        links["example"] = absolute("/example/")
    return links


@extend_schema(exclude=True)
class ServiceRoot(APIView):
    renderer_classes = [OrjsonRenderer, TemplateHTMLRenderer]  # the first is for clients that accept anything
    template_name = "api/root.html"

    def get(self, request: Request) -> Response:
        return Response(service_links(request))
