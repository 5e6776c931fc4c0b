from django.urls import URLPattern, path

from records.api import root, views


def _routes(prefix: str, viewset: type[views.RecordViewSet], basename: str) -> list[URLPattern]:
    """A resource's list, record and overview, at the spec's paths (no trailing slash; an ID of
    more digits than Python converts is no route, like any other unknown path)."""
    return [
        path(prefix, viewset.as_view({"get": "list"}), name=f"{basename}-list"),
        path(f"{prefix}/<int:record_id>", viewset.as_view({"get": "retrieve"}), name=f"{basename}-detail"),
        path(f"{prefix}/<int:record_id>/overview", viewset.as_view({"get": "overview"}), name=f"{basename}-overview"),
    ]


urlpatterns = [
    path("", root.ServiceRoot.as_view(), name="root"),
    path("health", views.Health.as_view(), name="health"),
    *_routes("bounties", views.BountyViewSet, "bounty"),
    *_routes("submissions", views.SubmissionViewSet, "submission"),
    *_routes("disputes", views.DisputeViewSet, "dispute"),
]
