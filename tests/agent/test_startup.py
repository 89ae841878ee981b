"""Start-up cost: every coevo command (and every test that runs one) pays the imports of the CLI module.

Heavy libraries (torch, LangChain, numba, OR-Tools, scipy.stats) load where they are used, never
at start-up: these tests look at ``sys.modules`` in a fresh interpreter, not at a clock.
"""

from __future__ import annotations

import importlib
import json
import subprocess
import sys

import pytest

HEAVY = ("torch", "langchain_core", "openai", "numba", "ortools", "pandas", "matplotlib", "scipy.stats", "networkx")

ARCH = "|nor_conv_3x3~0|+|nor_conv_3x3~0|nor_conv_3x3~1|+|skip_connect~0|nor_conv_3x3~1|nor_conv_3x3~2|"


def loaded_after(code: str) -> list[str]:
    """The modules of :data:`HEAVY` that a fresh interpreter holds after running ``code``."""
    probe = f"{code}\nimport sys\nprint(__import__('json').dumps(sorted(m for m in {HEAVY!r} if m in sys.modules)))"
    proc = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    return list(json.loads(proc.stdout.strip().splitlines()[-1]))


def test_the_cli_does_not_import_scipy_stats_or_torch_at_start_up() -> None:
    # scipy.stats alone was ~1.5 s of every start-up; torch is several seconds: both are imported where they are used
    assert loaded_after("import coevo.agent.cli") == []


def test_the_registry_and_the_public_package_import_no_simulator() -> None:
    # the registry lists 33 tools by name; a tool's module (and its simulator) loads when the tool is used
    assert loaded_after("import coevo, coevo.tools\nassert len(coevo.tools.REGISTRY.names()) > 30") == []


@pytest.mark.parametrize(
    "argv",
    [
        pytest.param(
            ["tools", "run", "nb201.query", "--args", json.dumps({"arch": ARCH, "dataset": "cifar10", "device": "fpga"})], id="table-lookup"
        ),
        pytest.param(["problems", "list"], id="problems-list"),
        pytest.param(["problems", "list", "--json"], id="problems-list-json"),
        pytest.param(["models", "list"], id="models-list"),
        pytest.param(["chat", "--once", "/runs"], id="chat-once-runs"),
        pytest.param(["chat", "--once", "/session"], id="chat-once-session"),
    ],
)
def test_light_commands_run_without_torch_or_langchain(argv: list[str]) -> None:
    # the whole command, not only the import: a table lookup and a slash command need no simulator and no LLM client
    code = f"from coevo.agent.cli import main\nassert main({argv!r}) == 0, 'the command failed'"
    assert loaded_after(code) == []


# every built-in problem, written out here (not read from the registry) so that a new one must be added to the checks
BUILTIN_PROBLEMS = [
    "nb201",
    "pipeline",
    "noc",
    "compress",
    "prune",
    "quant",
    "spmm",
    "lingcn",
    "fpga-transformer",
    "reram",
    "stepping",
    "freeze",
    "nb201-accel",
    "deploy-cnn",
    "deploy-lm",
]


@pytest.mark.parametrize("name", BUILTIN_PROBLEMS)
def test_importing_a_problem_class_loads_no_simulator_library(name: str) -> None:
    # listing problems reads their classes: torch, OR-Tools, numba, networkx load when a problem is built or evaluated
    assert loaded_after(f"from coevo.search.problems import problem_class\nproblem_class({name!r})") == []


def test_the_builtin_problems_are_the_ones_checked_above() -> None:
    from coevo.search.problems import BUILTIN

    assert set(BUILTIN) == set(BUILTIN_PROBLEMS)


def test_lazy_package_exports_are_the_eager_names() -> None:
    # a lazy package (sim/_lazy.py) hands out the very objects its submodules define, and refuses unknown names
    import coevo.sim.quant as quant
    from coevo.sim.quant import mixed

    assert quant.class_groups is mixed.class_groups and quant.CANDIDATES == (2, 3, 4, 6, 8)
    for package in ("fpga", "freeze", "prune", "quant", "reram", "stepping", "zoo"):
        module = importlib.import_module(f"coevo.sim.{package}")
        assert [n for n in module.__all__ if not hasattr(module, n)] == [], package  # every exported name resolves
    from coevo.sim.freeze import train  # an export named like its submodule stays the function, as the eager package had it

    assert callable(train) and train.__name__ == "train" and not isinstance(train, type(importlib))
    with pytest.raises(AttributeError, match="no attribute 'teleport'"):
        _ = quant.teleport


def test_the_zoo_counts_parameters_without_building_a_model() -> None:
    # models list shows recipe_parameter_count (no torch); it must equal what torch counts on the built model
    from coevo.sim.zoo import RECIPES, build, parameter_count, recipe_parameter_count

    for name, rec in RECIPES.items():
        assert recipe_parameter_count(rec) == parameter_count(build(rec)), name


def test_a_tool_loads_its_module_on_first_use() -> None:
    from coevo.tools import REGISTRY, LazyRegistry

    assert isinstance(REGISTRY, LazyRegistry)
    tool = REGISTRY.get("nb201_query")  # by its function-calling name too
    assert tool is REGISTRY.get("nb201.query") and tool.name == "nb201.query"
    assert [t.name for t in REGISTRY] == REGISTRY.names()  # iterating loads them all, in registration order


def test_a_lazy_registry_checks_names_and_classes() -> None:
    from coevo.search.errors import UserInputError
    from coevo.tools import LazyRegistry

    with pytest.raises(ValueError, match="duplicate"):
        LazyRegistry({"a.b": "coevo.tools.nb201:NB201Query", "a_b": "coevo.tools.nb201:NB201Query"})
    with pytest.raises(TypeError, match="not allowed"):
        LazyRegistry({"a b": "coevo.tools.nb201:NB201Query"})
    wrong = LazyRegistry({"nb201.lookup": "coevo.tools.nb201:NB201Query"})
    with pytest.raises(TypeError, match=r"declares the name 'nb201\.query'"):
        wrong.get("nb201.lookup")
    with pytest.raises(UserInputError, match=r"nb201\.lookup"):
        wrong.get("nb201.teleport")
