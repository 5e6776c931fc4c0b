"""bend_app.py's application, served by daphne with bountysite/daphne_bend.py installed as
bountysite/asgi.py installs it, with bend_app.py's stall limit."""

from bountysite import daphne_bend
from tests.websocket.bend_app import HTTP_STALL_SECONDS, SEND_BUFFER_BYTES, application

daphne_bend.install(http_stall_seconds=HTTP_STALL_SECONDS, send_buffer_bytes=SEND_BUFFER_BYTES)

__all__ = ["application"]
