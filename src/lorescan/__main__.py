"""``python -m lorescan``: the ``lorescan`` command."""
import sys

from .app.cli import main

sys.exit(main())
