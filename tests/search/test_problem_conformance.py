"""Every registered problem passes the shipped conformance suite (coevo.testing.problems).

Parametrised over every registered problem (built-ins and installed entry points, read from
the registry) and the worked example of docs/problems.md, each built with its own
``example_options``, once per session (some build tables or profiles).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from coevo.search.problems import problem_names
from coevo.testing import Check
from coevo.testing import problems as problem_suite

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = f"{ROOT / 'docs' / 'examples' / 'tiled_matmul.py'}:TiledMatmul"
NAMES = [*problem_names(), EXAMPLE]
IDS = [n if n != EXAMPLE else "docs-example" for n in NAMES]
SUBJECTS = {name: problem_suite.ProblemUnderTest(name) for name in NAMES}
"""What the checks run on, by name: each loads its class and builds its instance when a check first asks."""


SLOW = {("stepping", "evaluate"): 42, ("compress", "evaluate"): 15}
"""(problem, check) pairs that train a model (seconds on an idle 2-core machine): out of the fast loop, still in CI."""
CASES = [
    pytest.param(name, check, id=f"{pid}-{check}", marks=[pytest.mark.slow] if (pid, str(check)) in SLOW else [])
    for name, pid in zip(NAMES, IDS, strict=True)
    for check in problem_suite.CHECKS
]


@pytest.mark.parametrize(("name", "check"), CASES)
def test_problem_conforms(name: str, check: Check[problem_suite.ProblemUnderTest]) -> None:
    check(SUBJECTS[name])
