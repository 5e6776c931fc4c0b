"""Websocket routes, served beside the HTTP application by bountysite/asgi.py."""

from django.urls import path

from records.ws.consumer import EventsConsumer

websocket_urlpatterns = [
    path("ws/events", EventsConsumer.as_asgi()),
]
