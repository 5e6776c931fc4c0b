from django.urls import path

from records.api import root, views

urlpatterns = [
    path("", root.ServiceRoot.as_view(), name="root"),
    path("health", views.Health.as_view(), name="health"),
    path("bounties", views.BountyList.as_view(), name="bounty-list"),
    path("bounties/<int:record_id>", views.BountyDetail.as_view(), name="bounty-detail"),
    path("bounties/<int:record_id>/overview", views.BountyOverview.as_view(), name="bounty-overview"),
    path("submissions", views.SubmissionList.as_view(), name="submission-list"),
    path("submissions/<int:record_id>", views.SubmissionDetail.as_view(), name="submission-detail"),
    path("submissions/<int:record_id>/overview", views.SubmissionOverview.as_view(), name="submission-overview"),
    path("disputes", views.DisputeList.as_view(), name="dispute-list"),
    path("disputes/<int:record_id>", views.DisputeDetail.as_view(), name="dispute-detail"),
    path("disputes/<int:record_id>/overview", views.DisputeOverview.as_view(), name="dispute-overview"),
]
