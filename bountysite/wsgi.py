"""WSGI entry point, for servers that speak only WSGI (the websocket needs ASGI)."""

import os

from django.core.wsgi import get_wsgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "bountysite.settings")

application = get_wsgi_application()

from bountysite import statement_timeout  # noqa: E402  (after Django is set up)
from records.replicas import REPLICAS  # noqa: E402

statement_timeout.install()
REPLICAS.start(checked_first=True)
