from django.conf import settings
from django.contrib import admin
from django.http import Http404, HttpRequest, HttpResponseBase
from django.urls import URLPattern, URLResolver, include, path, re_path
from django.views.generic import RedirectView
from django.views.static import serve

from records.api.docs import SchemaView, redoc, swagger_ui
from records.api.errors import error_response, not_found
from records.metrics import metrics

EXAMPLE_DIR = settings.BASE_DIR / "examples" / "bounty-board" / "dist"


def example(request: HttpRequest, path: str = "index.html") -> HttpResponseBase:
    """The example front end, as `scripts/dev` builds it (examples/bounty-board/build)."""
    try:
        response = serve(request, path, document_root=str(EXAMPLE_DIR))
    except Http404:
        if not (EXAMPLE_DIR / "index.html").exists():
            return error_response("the example is not built: ./scripts/dev builds it", 404)
        return not_found(request)
    response["Cache-Control"] = "no-cache"  # a rebuild shows at the next load
    return response


urlpatterns: list[URLPattern | URLResolver] = [
    path("", include("records.urls")),
    path("api/schema/", SchemaView.as_view(), name="schema"),
    path("api/docs/", swagger_ui(), name="swagger-ui"),
    path("api/redoc/", redoc(), name="redoc"),
    path("admin/", admin.site.urls),
    path("metrics", metrics, name="metrics"),  # for the operators' Prometheus only (records/metrics.py)
]
if settings.DEBUG:
    # Development only (scripts/dev): a production server serves no files of the checkout.
    urlpatterns += [
        path("example", RedirectView.as_view(url="/example/")),
        path("example/", example, name="example"),
        re_path(r"^example/(?P<path>.+)$", example),
    ]
urlpatterns += [
    # Unknown routes answer JSON in every mode (DEBUG's HTML 404 page included); the admin and
    # static files keep Django's own handling (the slash redirect, the admin's 404s).
    re_path(r"^(?!admin(?:/|$)|static/|metrics$).*$", not_found),
]

handler400 = "records.api.errors.bad_request"
handler403 = "records.api.errors.permission_denied"
handler404 = "records.api.errors.not_found"
handler500 = "records.api.errors.server_error"
