"""``coevo problems describe NAME`` lists the design variables a search chooses, with their levels or ranges (issue 33, item 6)."""

from __future__ import annotations

import io
import json
from types import SimpleNamespace
from typing import Any

import pytest
from optuna.distributions import CategoricalDistribution, FloatDistribution, IntDistribution
from rich.console import Console

from coevo.agent.cli import main
from coevo.agent.cli import problems as problems_cli
from coevo.search.problems import problem_names
from tests.agent.test_tables_cli import WIDTHS, assert_whole

NB201_OPS = ["none", "skip_connect", "nor_conv_1x1", "nor_conv_3x3", "avg_pool_3x3"]
NB201_EDGES = ["edge_0_1", "edge_0_2", "edge_1_2", "edge_0_3", "edge_1_3", "edge_2_3"]
NOC = {
    "subchannels": [1, 2, 3, 4, 6, 8],
    "routing": ["xy", "adaptive", "widest-shortest", "k-shortest", "bee-qos"],
    "scouts": [2, 4, 8, 16],
    "alpha": [0.5, 1.0, 2.0, 4.0],
    "detour": [0.0, 0.1, 0.3],
}


def _describe_json(name: str, capsys: pytest.CaptureFixture[str]) -> dict[str, Any]:
    assert main(["problems", "describe", name, "--json"]) == 0
    record: dict[str, Any] = json.loads(capsys.readouterr().out)
    return record


def test_noc_and_nb201_list_their_variables(capsys: pytest.CaptureFixture[str]) -> None:
    noc = _describe_json("noc", capsys)["design_variables"]
    assert [(v["name"], v["kind"], v["levels"]) for v in noc] == [(name, "categorical", levels) for name, levels in NOC.items()]
    nb = _describe_json("nb201", capsys)["design_variables"]
    assert [v["name"] for v in nb] == NB201_EDGES
    assert all(v["kind"] == "categorical" and v["levels"] == NB201_OPS for v in nb)


@pytest.mark.parametrize("name", problem_names())
def test_every_builtin_problem_lists_its_variables(name: str, capsys: pytest.CaptureFixture[str]) -> None:
    variables = _describe_json(name, capsys)["design_variables"]
    assert isinstance(variables, list) and variables, variables  # every built-in builds with its example options
    for v in variables:
        assert v["kind"] == "categorical" and len(v["levels"]) == len({json.dumps(x) for x in v["levels"]}) >= 1
    assert len({v["name"] for v in variables}) == len(variables)
    assert main(["problems", "describe", name]) == 0
    text = capsys.readouterr().out
    assert "design variables" in text and all(v["name"] in text for v in variables)


def test_ranges_are_written_with_step_and_scale() -> None:
    space = {
        "layers": IntDistribution(2, 16, step=2),
        "width": IntDistribution(8, 512, log=True),
        "rate": FloatDistribution(1e-4, 0.1, log=True),
        "share": FloatDistribution(0.0, 1.0),
        "act": CategoricalDistribution(("relu", "gelu")),
    }
    variables = problems_cli.design_variables(SimpleNamespace(distributions=lambda: space))  # type: ignore[arg-type]
    assert variables[0] == {"name": "layers", "kind": "int", "low": 2, "high": 16, "step": 2, "log": False}
    assert variables[3] == {"name": "share", "kind": "float", "low": 0.0, "high": 1.0, "step": None, "log": False}
    assert [problems_cli._values_text(v) for v in variables] == [
        "2 to 16, step 2",
        "8 to 512, log scale",
        "0.0001 to 0.1, log scale",
        "0.0 to 1.0",
        "relu, gelu",
    ]


def test_a_problem_that_cannot_be_built_says_why(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    import coevo.search.problems

    def broken(name: str, options: dict[str, Any]) -> None:
        raise FileNotFoundError("no cluster file")

    monkeypatch.setattr(coevo.search.problems, "make_problem", broken)
    record = _describe_json("noc", capsys)
    assert record["design_variables"] == record["niches"]
    assert record["design_variables"].startswith("(not shown:") and "no cluster file" in record["design_variables"]
    assert main(["problems", "describe", "noc"]) == 0
    assert "design variables: (not shown:" in capsys.readouterr().out


@pytest.mark.parametrize("width", WIDTHS, ids=lambda w: f"width{w}" if w else "piped")
@pytest.mark.parametrize("name", ["noc", "nb201", "fpga-transformer"])
def test_describe_tables_keep_names_whole(name: str, width: int | None, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("COLUMNS", raising=False)
    console = Console(file=io.StringIO(), width=width, force_terminal=False, color_system=None)
    monkeypatch.setattr(problems_cli, "out", console)
    assert main(["problems", "describe", name]) == 0
    record = problems_cli.describe(name)
    tokens = [v["name"] for v in record["design_variables"]] + [str(x) for v in record["design_variables"] for x in v["levels"]]
    tokens += [o["name"] for o in record["options"]] + [o["name"] for o in record["objectives"]]
    text = console.file.getvalue()  # type: ignore[attr-defined]
    assert_whole(text, tokens, console.width)
