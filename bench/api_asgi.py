"""ASGI entry point for the read-API benchmark: the project's application, with the floor route.

    PYTHONPATH=bench daphne api_asgi:application

Identical to bountysite.asgi except that the root URLconf is bench/api_floor_urls.py: the
project's routes plus `/__floor`, a plain view returning fixed bytes (the throughput floor).
"""

import os

import django
from django.conf import settings

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "bountysite.settings")
django.setup(set_prefix=False)
settings.ROOT_URLCONF = "api_floor_urls"

from django.core.asgi import get_asgi_application  # noqa: E402 (after the URLconf is switched)

application = get_asgi_application()
