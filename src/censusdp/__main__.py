"""``python -m censusdp`` runs the command line."""

import sys

from censusdp.cli import main

sys.exit(main())
