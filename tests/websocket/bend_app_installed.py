"""bend_app.py's application, served by daphne with bountysite/daphne_ws.py and
bountysite/daphne_http.py installed as bountysite/asgi.py installs them, with bend_app.py's
settings; installed twice, as each install() must change nothing the second time (a bend that
wrapped itself would recurse)."""

from bountysite import daphne_http, daphne_ws
from tests.websocket.bend_app import HTTP_STALL_SECONDS, SEND_BUFFER_BYTES, application

for _ in range(2):
    daphne_ws.install(send_buffer_bytes=SEND_BUFFER_BYTES)
    daphne_http.install(http_stall_seconds=HTTP_STALL_SECONDS)

__all__ = ["application"]
