"""Start-up cost: every coevo command (and every test that runs one) pays the imports of the CLI module."""

from __future__ import annotations

import subprocess
import sys


def test_the_cli_does_not_import_scipy_stats_or_torch_at_start_up() -> None:
    # scipy.stats alone was ~1.5 s of every start-up; torch is several seconds: both are imported where they are used
    code = "import sys, coevo.agent.cli; print(sorted(m for m in ('scipy.stats', 'torch') if m in sys.modules))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.strip()
    assert out == "[]"
