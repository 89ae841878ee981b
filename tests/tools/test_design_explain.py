"""design.explain reads a composition through its part structure (any composition, not only nb201-accel)."""

from __future__ import annotations

from pathlib import Path

import pytest

from coevo.search.nb201 import NB201Problem
from coevo.tools import REGISTRY, ToolArgumentError, call_tool
from coevo.tools.designs import explain_parts, objective_rows
from tests.search.test_compose import Chained

ARCH = "|nor_conv_3x3~0|+|nor_conv_1x1~0|skip_connect~1|+|skip_connect~0|nor_conv_3x3~1|avg_pool_3x3~2|"


def test_a_composition_is_explained_by_its_parts_and_what_each_hands_on() -> None:
    problem = Chained()  # width x clock: the width hands on width x 1000 operations, the clock a time of ops / MHz
    point = ((4,), (200, "b"))
    rows = explain_parts(problem, point)
    assert [(r["part"], r["problem"], r["parameters"], r["handed_on"]) for r in rows] == [
        ("width", "width", {"width": 4}, {"value": 4000}),
        ("clock", "clock", {"mhz": 200, "mode": "b"}, {"value": 20.0}),
    ]
    assert [r["design"] for r in rows] == ["width=4", "mhz=200 mode=b"]
    score, cost = objective_rows(problem, point, None)  # not evaluated: the cheap one computed, the expensive one unknown
    assert (cost["objective"], cost["value"], cost["source"]) == ("cost", 20.0, "computed now (cheap: free)")
    assert (score["objective"], score["value"]) == ("score", None) and "costs an evaluation" in score["source"]


def test_a_problem_that_is_not_composed_is_its_own_one_part() -> None:
    problem = NB201Problem(dataset="cifar10", device="fpga")
    (row,) = explain_parts(problem, problem.parse_design(ARCH))
    assert row["part"] == "nb201" and row["label"] == "arch" and "handed_on" not in row
    assert row["parameters"] == {
        "edge_0_1": "nor_conv_3x3",
        "edge_0_2": "nor_conv_1x1",
        "edge_1_2": "skip_connect",
        "edge_0_3": "skip_connect",
        "edge_1_3": "nor_conv_3x3",
        "edge_2_3": "avg_pool_3x3",
    }


def test_explaining_reads_and_creates_nothing(tmp_path: Path) -> None:
    missing = tmp_path / "none.sqlite3"
    with pytest.raises(ToolArgumentError, match="no storage at"):
        call_tool(REGISTRY.get("design.explain"), {"study": "s", "storage": f"sqlite:///{missing}", "trial": 0})
    assert not missing.exists()
