"""``python -m benchmarks`` from a source checkout: the same as ``renderers bench``."""

from __future__ import annotations

import sys

from renderers.bench.__main__ import main

if __name__ == "__main__":
    sys.exit(main())
