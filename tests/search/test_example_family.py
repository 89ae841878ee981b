"""The worked example family (docs/examples/family/cachetile): simulator, problem and tool, each declared once, run end to end."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from coevo.agent.cli import main
from coevo.search.problems import check_problem_class, make_problem
from coevo.search.runner import run_search
from coevo.tools._base import check_tool
from coevo.tools._call import call_tool
from coevo.tools._registry import Registry

FAMILY = Path(__file__).resolve().parents[2] / "docs" / "examples" / "family"


@pytest.fixture
def family(monkeypatch: pytest.MonkeyPatch) -> Any:
    monkeypatch.syspath_prepend(str(FAMILY))
    import cachetile.problem
    import cachetile.sim
    import cachetile.tool

    return cachetile


def test_the_simulator_counts_what_an_lru_cache_must(family: Any) -> None:
    sim = family.sim
    big = sim.CacheConfig(size=16, capacity_kib=1024)  # everything fits: only the first touch of each line misses
    stats = sim.simulate(big, 4, 4, 4, "ijk")
    assert stats.accesses == 3 * 16**3
    assert stats.misses == 3 * 16 * 16 * 4 // 64
    misses = [sim.simulate(sim.CacheConfig(size=16, capacity_kib=c), 8, 2, 4, "kij").misses for c in (0.0625, 0.25, 1, 4)]
    assert misses == sorted(misses, reverse=True) and misses[0] > misses[-1]  # LRU's inclusion property: more room, no more misses
    assert sim.tile_kib(big, 4, 8, 2) == (4 * 2 + 2 * 8 + 4 * 8) * 4 / 1024
    with pytest.raises(ValueError, match="capacity_kib=0"):
        sim.CacheConfig(capacity_kib=0)


def test_the_problem_and_the_tool_share_one_configuration_and_one_simulator(family: Any, storage: str) -> None:
    problem_cls, tool = family.problem.CacheTiling, family.tool.CacheMatmul()
    check_problem_class(problem_cls, "cache-tiling")
    check_tool(tool)
    Registry([tool])  # registers cleanly
    default = family.sim.CacheConfig()
    for name in ("size", "capacity_kib", "line_bytes", "element_bytes"):
        assert problem_cls.Options.model_fields[name].default == tool.Args.model_fields[name].default == getattr(default, name)
    problem = make_problem("cachetile.problem:CacheTiling", {"size": 16})
    point = problem.parse_design("tile_m=4 tile_n=8 tile_k=2 order=kij")
    value = call_tool(tool, {"size": 16, "tile_m": 4, "tile_n": 8, "tile_k": 2, "order": "kij"}).value
    assert problem.evaluate(point) == {"hit_pct": pytest.approx(value["hit_pct"], abs=1e-4), "tile_kib": value["tile_kib"]}
    result = run_search(problem, "pelnas", budget=8, storage=storage)
    assert result.evaluations == 8 and result.front


def test_the_cli_searches_the_family_by_module_name(family: Any, storage: str, capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["search", "--problem", "cachetile.problem:CacheTiling", "--size", "8", "--budget", "5", "--storage", storage, "--json"]
    assert main(argv) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["evaluations"] == 5 and all(0 <= row["hit_pct"] <= 100 for row in data["front"])
