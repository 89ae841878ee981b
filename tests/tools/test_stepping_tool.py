"""stepping.build and stepping.run: values agree with the plan, the chosen step fits the budget, bad input is a typed error."""

from __future__ import annotations

import re

import pytest

from coevo.agent.cli import main
from coevo.sim.stepping import budget_step, plan, stepping_root, zoo_setup
from coevo.tools import REGISTRY, ToolArgumentError, call_tool
from coevo.tools.stepping import verdict_line

STEPS = [0.25, 0.5, 0.75, 1.0]


def test_build_reports_macs_of_the_plan_and_the_same_mac_baselines() -> None:
    result = call_tool(REGISTRY.get("stepping.build"), {"model": "cnn-digits", "steps": [0.5, 1.0], "epochs": 1, "baselines": True})
    out = result.value
    # one verdict line per baseline, whatever the sign of the difference
    assert [m.split(":")[0] for m in result.messages if m.startswith("verdict")] == ["verdict vs slimmable", "verdict vs independent"]
    p = plan(zoo_setup("cnn-digits")[1], [0.5, 1.0])
    assert out["full_macs"] == p.full_macs == 616064
    assert [r["macs"] for r in out["steps"]] == [p.macs(0), p.macs(1)]
    for rows in (out["steps"], out["baselines"]["slimmable"]["steps"], out["baselines"]["independent"]["steps"]):
        assert [r["mac_fraction"] <= r["target_fraction"] for r in rows] == [True, True]
        assert all(0.0 <= r["test_accuracy"] <= 100.0 for r in rows)
    assert out["baselines"]["independent"]["widths_per_step"][-1] == [16, 32, 64, 64]  # the zoo model's widths
    assert out["units_per_step"]["conv1"] == list(p.cum[0])


def test_run_picks_the_largest_step_within_the_budget_and_measures_it() -> None:
    tool = REGISTRY.get("stepping.run")
    p = plan(zoo_setup("cnn-digits")[1], [0.5, 1.0])
    for budget in (0.6, 1.0):
        args = {"model": "cnn-digits", "mac_budget": budget, "steps": [0.5, 1.0], "epochs": 1, "repeats": 2, "assign": "index"}
        result = call_tool(tool, args)
        out = result.value
        # the on-the-fly path against the subnet from scratch: one verdict line on the 2 repeats' paired ratios
        said = out["latency_ms"]["verdict"]
        assert said.startswith(f"latency of step {out['chosen_step']} stepped up on the fly vs from scratch: "), said
        assert "(95 % t interval, 2 repeats)" in said and re.search(r"\): (better|worse|within noise)", said), said
        assert out["chosen_step"] == budget_step(p, budget) == (0 if budget < 0.98 else 1)
        assert out["macs"] == p.macs(out["chosen_step"]) <= budget * p.full_macs
        assert len(out["latency_ms"]["steps"]) == out["chosen_step"] + 1
        assert all(v["incremental"] > 0 and v["scratch"] > 0 for v in out["latency_ms"]["steps"])
    build = call_tool(REGISTRY.get("stepping.build"), {"model": "cnn-digits", "steps": [0.5, 1.0], "epochs": 1, "assign": "index"}).value
    assert out["test_accuracy"] == build["steps"][1]["test_accuracy"]  # the stepping path predicts what the net does


@pytest.mark.parametrize(
    ("tool", "args", "message"),
    [
        ("stepping.build", {"steps": [0.5, 0.25, 1.0]}, "strictly increasing"),
        ("stepping.build", {"steps": [0.5, 1.5]}, r"\(0, 1\]"),
        ("stepping.build", {"model": "mnist"}, "cnn-mnist5k"),  # an unknown name: the zoo's message lists the models
        ("stepping.build", {"model": "lm-pydoc-tiny"}, "lm model"),
        # step 0 of the default split has units 8, 16, 31, 31: 8*1*576 + 16*8*576 + 31*16*144 + 31*31*4 + 10*31 MACs
        ("stepping.run", {"mac_budget": 0.1}, "below the smallest subnet: step 0 needs 153914 MACs"),
        ("stepping.run", {"mac_budget": 1.5}, "mac_budget"),
        ("stepping.run", {"steps": [0.25, 0.25]}, "strictly increasing"),
    ],
)
def test_bad_input_is_a_typed_error_saying_what_to_change(tool: str, args: dict[str, object], message: str) -> None:
    with pytest.raises(ToolArgumentError, match=message):
        call_tool(REGISTRY.get(tool), {"epochs": 1, **args})


def test_the_issues_cnn_mnist_is_served_by_cnn_mnist5k_and_says_so() -> None:
    result = call_tool(
        REGISTRY.get("stepping.run"),
        {
            "model": "cnn-mnist",
            "mac_budget": 0.6,
            "steps": [0.5, 1.0],
            "epochs": 1,
            "repeats": 1,
            "assign": "index",
        },  # the alias is the point
    )
    assert result.value["model"] == "cnn-mnist5k"
    assert any("cnn-mnist5k" in m and "offline" in m for m in result.messages)
    assert result.value["full_macs"] == plan(zoo_setup("cnn-mnist5k")[1], [0.5, 1.0]).full_macs  # the 28x28 model, not digits'


def test_the_verdict_line_says_negative_beyond_two_standard_errors_and_noise_inside_them() -> None:
    # 90 % vs 95 % on 1,000 images: 2 SE = 200 * sqrt((0.09 + 0.0475) / 1000) = 2.35 points; -5 is beyond it
    assert verdict_line("independent", [90.0, 90.0], [95.0, 95.0], 1000).endswith("negative: stepping is behind")
    assert "2 SE 2.35" in verdict_line("independent", [90.0, 90.0], [95.0, 95.0], 1000)
    # 90 % vs 90.5 % on 100 images: 2 SE = 8.39 points
    assert verdict_line("slimmable", [90.0], [90.5], 100).endswith("inside its noise: no gain shown")
    assert "positive" in verdict_line("slimmable", [99.0], [90.0], 1000)


def test_a_mac_fraction_above_one_is_one_line_exit_2_and_nothing_written(capsys: pytest.CaptureFixture[str]) -> None:
    before = set(stepping_root().glob("*")) if stepping_root().exists() else set()
    assert main(["tools", "run", "stepping.build", "--args", '{"steps": [0.5, 1.5]}']) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "1.5" in err and "(0, 1]" in err
    assert (set(stepping_root().glob("*")) if stepping_root().exists() else set()) == before
