"""``python -m governed_memory.cli``: the same as ``gmem``."""

import sys

from governed_memory.cli import main

sys.exit(main())
