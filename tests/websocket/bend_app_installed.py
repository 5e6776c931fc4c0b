"""bend_app.py's application, served by daphne with bountysite/daphne_bend.py installed as
bountysite/asgi.py installs it."""

from bountysite import daphne_bend
from tests.websocket.bend_app import SEND_BUFFER_BYTES, application

daphne_bend.install(send_buffer_bytes=SEND_BUFFER_BYTES)

__all__ = ["application"]
