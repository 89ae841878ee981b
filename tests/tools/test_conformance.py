"""Every registered tool passes the shipped conformance suite (coevo.testing.tools); adding a tool adds it here automatically.

What the suite needs to know about a tool is declared on its class (``measured_fields``,
``slow_example``), so nothing here lists tools.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from coevo.search.nb201 import NB201Problem
from coevo.search.runner import run_search
from coevo.testing import Check
from coevo.testing import tools as tool_suite
from coevo.tools import REGISTRY, Tool

CASES = [
    pytest.param(tool, check, id=f"{tool.name}-{check}", marks=[pytest.mark.slow] if tool.slow_example and check.runs_example else [])
    for tool in REGISTRY
    for check in tool_suite.CHECKS
]
"""Every (tool, check) pair; a tool whose example takes minutes makes the checks that run it slow."""


@pytest.fixture(scope="module")
def example_world(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A folder whose default storage holds study ``example``: a small pelnas search with a knowledge base."""
    folder = tmp_path_factory.mktemp("world")
    storage = f"sqlite:///{folder / 'runs' / 'coevo.sqlite3'}"
    (folder / "runs").mkdir()
    run_search(NB201Problem(dataset="cifar10", device="fpga"), "pelnas", budget=30, storage=storage, study_name="example")
    return folder


@pytest.fixture(autouse=True)
def _in_example_world(example_world: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # tool examples use the default storage (./runs/coevo.sqlite3) and study "example"
    monkeypatch.chdir(example_world)


@pytest.mark.parametrize(("tool", "check"), CASES)
def test_tool_conforms(tool: Tool, check: Check[Tool]) -> None:
    missing = [p for p in tool.programs if shutil.which(p) is None]
    if check.runs_example and missing:
        if os.environ.get("CI") == "true":
            pytest.fail(f"CI needs {', '.join(missing)} for {tool.name}'s example (.ci/run installs it)")
        pytest.skip(f"{', '.join(missing)} not installed: {tool.name}'s example cannot run here")
    check(tool)
