"""ASGI entry point, served by daphne (`daphne bountysite.asgi:application`)."""

import os

from django.core.asgi import get_asgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "bountysite.settings")

application = get_asgi_application()
