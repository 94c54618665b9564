"""``python -m kanedyn``: the same as the ``kanedyn`` console script."""

import sys

from kanedyn.cli import main

sys.exit(main())
