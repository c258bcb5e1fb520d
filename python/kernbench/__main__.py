"""``python -m kernbench`` is the ``kernbench`` command."""

import sys

from kernbench.cli import main

sys.exit(main())
