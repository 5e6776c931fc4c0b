from django.contrib import admin
from django.urls import include, path, re_path
from drf_spectacular.views import SpectacularAPIView

from records.api.docs import redoc, swagger_ui
from records.api.errors import not_found
from records.metrics import metrics

urlpatterns = [
    path("", include("records.urls")),
    path("api/schema/", SpectacularAPIView.as_view(), name="schema"),
    path("api/docs/", swagger_ui(), name="swagger-ui"),
    path("api/redoc/", redoc(), name="redoc"),
    path("admin/", admin.site.urls),
    path("metrics", metrics, name="metrics"),  # for the operators' Prometheus only (records/metrics.py)
    # Unknown routes answer JSON in every mode (DEBUG's HTML 404 page included); the admin and
    # static files keep Django's own handling (the slash redirect, the admin's 404s).
    re_path(r"^(?!admin(?:/|$)|static/|metrics$).*$", not_found),
]

handler400 = "records.api.errors.bad_request"
handler403 = "records.api.errors.permission_denied"
handler404 = "records.api.errors.not_found"
handler500 = "records.api.errors.server_error"
