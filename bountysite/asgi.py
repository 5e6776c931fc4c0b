"""ASGI entry point, served by daphne (`daphne bountysite.asgi:application`, and `manage.py
runserver`, which is daphne's): HTTP to Django, the websocket `/ws/events` to Channels.

No origin validator wraps the websocket: the feed is public and read-only and reads no
credentials (records/consumers.py), so a cross-origin page gains nothing by opening it.
"""

import os

from django.core.asgi import get_asgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "bountysite.settings")

django_asgi_app = get_asgi_application()  # sets Django up before the consumers are imported

from channels.routing import ProtocolTypeRouter, URLRouter  # noqa: E402

from bountysite import daphne_backpressure, daphne_close_codes  # noqa: E402
from records.routing import websocket_urlpatterns  # noqa: E402

daphne_close_codes.install()
daphne_backpressure.install()

application = ProtocolTypeRouter({
    "http": django_asgi_app,
    "websocket": URLRouter(websocket_urlpatterns),
})
