"""gnn.circuit on tiny designs: the graph it reports is the synthesised netlist's, training beats the mean, bad input is one clear error."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from coevo.sim.gnn import load_graph
from coevo.tools import REGISTRY, ToolArgumentError, ToolExecutionError, call_tool

TOOL = next(t for t in REGISTRY if t.name == "gnn.circuit")
TINY = {"design": "adder8", "hidden": 16, "dynamic_relu_k": 4, "epochs": 40, "timing_repeats": 2}


@pytest.fixture(autouse=True)
def _yosys() -> None:
    if shutil.which("yosys") is None:
        if os.environ.get("CI") == "true":
            pytest.fail("CI needs yosys (apt-get install yosys; .ci/run installs it)")
        pytest.skip("yosys is not installed (apt-get install yosys)")


def test_reports_the_netlist_graph_label_error_and_timing() -> None:
    v = call_tool(TOOL, {**TINY, "concurrency": 2}).value
    g = load_graph("adder8")
    assert v["design"] == "adder8" and v["graph"]["cells"] == g.num_nodes("cell") and v["graph"]["nets"] == g.num_nodes("net")
    assert v["graph"]["edges"]["cell->drives->net"] == g.num_nodes("cell")  # one output pin per gate
    assert v["label_max"] == float(g.y["depth"].max())
    assert v["held_out_cells"] == round(0.3 * g.num_nodes("cell"))
    assert 0 <= v["model_test_mae"] < v["mean_predictor_test_mae"] and 0 <= v["dense_test_mae"] < v["mean_predictor_test_mae"]
    t = v["timing"]
    assert t["forward_ms"] > 0 and t["dense_backward_ms"] > 0
    assert t["forward_speedup"] == pytest.approx(t["dense_forward_ms"] / t["forward_ms"], rel=1e-2)


def test_same_seed_same_label_error_and_plain_relu_option() -> None:
    a = call_tool(TOOL, {**TINY, "timing_repeats": 0, "compare_dense": False}).value
    b = call_tool(TOOL, {**TINY, "timing_repeats": 0, "compare_dense": False, "concurrency": 1}).value
    assert a["model_test_mae"] == pytest.approx(b["model_test_mae"], abs=1e-4)  # threads change no result
    relu = call_tool(TOOL, {**TINY, "dynamic_relu_k": 0, "timing_repeats": 0}).value
    assert relu["model_test_mae"] == pytest.approx(relu["dense_test_mae"], abs=1e-4)  # k = 0 is the dense model's function
    assert "timing" not in relu


@pytest.mark.parametrize(
    ("args", "message"),
    [
        ({"design": "alu7"}, r"unknown design 'alu7'.*valid designs:.*alu32"),
        ({"dynamic_relu_k": 17}, "dynamic_relu_k = 17 must be in 1..hidden"),
        ({"concurrency": 0}, "concurrency"),
        ({"label": "slack"}, "label"),
        ({"design": "nowhere.v", "top": "m"}, "does not exist"),
    ],
)
def test_bad_input_is_one_clear_error(args: dict[str, object], message: str) -> None:
    with pytest.raises(ToolArgumentError, match=message) as exc:
        call_tool(TOOL, {**TINY, **args})
    assert "\n" not in str(exc.value)


def test_a_verilog_file_is_synthesised_and_its_errors_quoted(tmp_path: Path) -> None:
    good = tmp_path / "maj.v"
    good.write_text("module maj(input a, b, c, output y);\n  assign y = (a & b) | (a & c) | (b & c);\nendmodule\n")
    v = call_tool(TOOL, {**TINY, "design": str(good), "top": "maj", "epochs": 5, "dynamic_relu_k": 2}).value
    assert v["design"] == "maj" and v["graph"]["cells"] >= 3
    with pytest.raises(ToolArgumentError, match="top module"):
        call_tool(TOOL, {**TINY, "design": str(good)})
    bad = tmp_path / "bad.v"
    bad.write_text("module bad(input a, output y);\n  assign y = a +;\nendmodule\n")
    with pytest.raises(ToolArgumentError, match=r"Yosys could not synthesise 'bad': .*bad\.v:2: ERROR: syntax error"):
        call_tool(TOOL, {**TINY, "design": str(bad), "top": "bad"})


def test_missing_yosys_is_a_failure_naming_the_package(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("COEVO_YOSYS", "/nonexistent/yosys")
    src = tmp_path / "x.v"
    src.write_text("module x(input a, output y); assign y = ~a; endmodule\n")
    with pytest.raises(ToolExecutionError, match="apt-get install yosys"):
        call_tool(TOOL, {**TINY, "design": str(src), "top": "x"})
