"""``python -m kueued.cli``: the ``kueued`` command."""

import sys

from kueued.cli import main

sys.exit(main())
