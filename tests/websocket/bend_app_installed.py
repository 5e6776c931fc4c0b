"""bend_app.py's application, served by daphne with bountysite/daphne_bend.py installed as
bountysite/asgi.py installs it."""

from bountysite import daphne_bend
from tests.websocket.bend_app import application

daphne_bend.install()

__all__ = ["application"]
