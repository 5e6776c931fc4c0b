#!/usr/bin/env python
"""Django's command-line utility for the bounty read service."""

import os
import sys


def main() -> None:
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "bountysite.settings")
    from django.conf import settings
    from django.core.exceptions import ImproperlyConfigured
    from django.core.management import execute_from_command_line

    # Django's command runner swallows a settings error and fails later with "Models aren't
    # loaded yet"; stop here instead, with the message that names the variable.
    try:
        settings.INSTALLED_APPS  # noqa: B018 - loads the settings
    except ImproperlyConfigured as exc:
        sys.exit(f"configuration error: {exc}")
    execute_from_command_line(sys.argv)


if __name__ == "__main__":
    main()
