"""Root URLconf of bench/api_asgi.py: the project's routes plus `/__floor`.

`/__floor` answers the bytes of the file named by BENCH_FLOOR_BODY (read once), through the same
middleware as every route: the cheapest Django view that returns what the hot page returns.
"""

import os
from pathlib import Path

from django.http import HttpRequest, HttpResponse
from django.urls import path

from bountysite.urls import handler400, handler403, handler404, handler500
from bountysite.urls import urlpatterns as project_urlpatterns

_body: dict[str, bytes] = {}


def floor(request: HttpRequest) -> HttpResponse:
    if "bytes" not in _body:
        _body["bytes"] = Path(os.environ["BENCH_FLOOR_BODY"]).read_bytes()
    return HttpResponse(_body["bytes"], content_type="application/json")


urlpatterns = [path("__floor", floor), *project_urlpatterns]
__all__ = ["handler400", "handler403", "handler404", "handler500", "urlpatterns"]
