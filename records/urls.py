"""The service's routes: the root, /health, and each record kind's list, record and overview at
the spec's paths (no trailing slash), routed from the kinds' viewsets."""

from django.urls import URLPattern, URLResolver, path
from rest_framework.routers import SimpleRouter

from records.api import root, views

router = SimpleRouter(trailing_slash=False, use_regex_path=False)
for viewset in views.RECORD_VIEWSETS:
    router.register(viewset.kind.resource, viewset, basename=viewset.kind.name)

urlpatterns: list[URLPattern | URLResolver] = [
    path("", root.ServiceRoot.as_view(), name="root"),
    path("health", views.Health.as_view(), name="health"),
    *router.urls,
]
