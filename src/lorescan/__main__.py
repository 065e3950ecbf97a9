"""``python -m lorescan``: the ``lorescan`` command."""
import sys

from .cli import main

sys.exit(main())
