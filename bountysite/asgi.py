"""ASGI entry point, served by daphne (`daphne bountysite.asgi:application`, and `manage.py
runserver`, which is daphne's): HTTP to Django (through bountysite/bodiless.py's layer that sends
no body for a HEAD, 204 or 304), the websocket `/ws/events` to Channels. It installs every bend of
daphne, each side's from its own module: bountysite/daphne_ws.py (close codes and reasons,
backpressure, prebuilt frames, denial responses, autobahn's debug lines formatted only when
written), bountysite/daphne_http.py (a body written as the client takes it, the stall limit, a
failure after the response started, reason phrases) and
bountysite/daphne_shutdown.py (a stop that tells websocket clients and ends within 2 s).

No origin validator wraps the websocket: the feed is public and read-only and reads no
credentials (records/ws/consumer.py), so a cross-origin page gains nothing by opening it.
"""

import gc
import os

from django.conf import settings
from django.core.asgi import get_asgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "bountysite.settings")

django_asgi_app = get_asgi_application()  # sets Django up before the consumers are imported

from channels.routing import ProtocolTypeRouter, URLRouter  # noqa: E402

from bountysite import daphne_http, daphne_shutdown, daphne_ws, statement_timeout  # noqa: E402
from bountysite.bodiless import BodilessResponses  # noqa: E402
from records.replicas import REPLICAS  # noqa: E402
from records.routing import websocket_urlpatterns  # noqa: E402

daphne_ws.install(send_buffer_bytes=settings.BOUNTY_WS_SEND_BUFFER_BYTES)
daphne_http.install(http_stall_seconds=settings.BOUNTY_HTTP_STALL_SECONDS)
daphne_shutdown.install()
statement_timeout.install()
REPLICAS.start(checked_first=True)

# Python's default collects its young generation every 700 new objects, promoting whatever is in
# flight at that moment; with 1,000 websocket connections the old generation grows fast and each
# full collection walks every connection's objects, stopping the event loop for 0.3-0.8 s several
# times a minute under a burst (bench/ws_broadcast.py). Collecting less often lets short-lived
# objects die by reference count first; memory grows by at most the garbage of 100,000 objects.
gc.set_threshold(100_000, 20, 100)

application = ProtocolTypeRouter({
    "http": BodilessResponses(django_asgi_app),
    "websocket": URLRouter(websocket_urlpatterns),
})
