"""``python -m renderers.cli``: the same as the ``renderers`` command."""

from __future__ import annotations

import sys

from renderers.cli import main

sys.exit(main())
