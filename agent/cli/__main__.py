"""``python -m agent.cli``: the ``coevo`` command (worker processes are started this way)."""

from __future__ import annotations

import sys

from coevo.agent.cli import main

sys.exit(main())
