"""Entry point of `python -m bounty_client`."""

import sys

from bounty_client.cli import main

sys.exit(main())
