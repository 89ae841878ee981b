"""quant.class_based: what it returns on the zoo CNN, and its bad input (one clear line each)."""

from __future__ import annotations

from pathlib import Path

import pytest

from coevo.tools import REGISTRY, ToolArgumentError, call_tool

TOOL = REGISTRY.get("quant.class_based")


def test_class_based_result_is_consistent() -> None:
    value = call_tool(TOOL, {"model": "cnn-digits", "avg_bits": 3.0, "method": "class-based", "finetune_epochs": 1}).value
    layers = value["layers"]
    weights = sum(row["weights"] for row in layers)
    assert [row["layer"] for row in layers] == ["conv1", "conv2", "conv3", "fc1", "fc2"]
    assert value["avg_bits"] == pytest.approx(sum(row["mean_bits"] * row["weights"] for row in layers) / weights, abs=1e-4)
    assert 2.95 < value["avg_bits"] <= 3.0
    assert all(2 <= row["min_bits"] <= row["max_bits"] <= 8 for row in layers)
    assert value["val_accuracy_after"] >= value["val_accuracy_rtn"]  # the kept epoch is the best on val, round-to-nearest included
    units = sum(row["units"] for row in layers)
    other = value["float32_bits"] // 32 - weights
    weight_bits = sum(row["mean_bits"] * row["weights"] for row in layers)
    assert value["model_bits"] == pytest.approx(weight_bits + 32 * units + 32 * other, abs=1e-6)
    assert 0 <= value["test_accuracy_after"] <= 100 and value["test_accuracy_float"] > 80


def test_uniform_four_bits_is_four_bits_everywhere() -> None:
    result = call_tool(TOOL, {"avg_bits": 4.0, "method": "uniform", "finetune_epochs": 0})
    value = result.value
    assert value["verdict"] in result.messages and "uniform at 4.00 average bits vs the float model" in value["verdict"]
    assert value["n_test"] == 500  # cnn-digits' test split: the verdict's noise counts its images
    assert value["avg_bits"] == 4.0 and all(row["min_bits"] == row["max_bits"] == 4 for row in value["layers"])
    assert value["val_accuracy_after"] == value["val_accuracy_rtn"]  # no fine-tuning: round-to-nearest


@pytest.mark.parametrize(
    ("args", "match"),
    [
        ({"avg_bits": 1.0}, "avg_bits must lie between"),
        ({"avg_bits": 0.5}, r"\(2 and 8\), got 0.5"),
        ({"avg_bits": 9.0}, "avg_bits must lie between"),
        ({"avg_bits": 0.5, "method": "greedy"}, r"got 0.5"),  # greedy picks its own bits, but a bad value is still refused
        ({"method": "nope"}, "method"),
        ({"finetune_epochs": -1}, "finetune_epochs"),
        ({"model": "cnn-mnist"}, "cnn-digits"),
    ],
)
def test_bad_input_is_one_clear_error(args: dict[str, object], match: str) -> None:
    with pytest.raises(ToolArgumentError, match=match) as exc:
        call_tool(TOOL, {"model": "cnn-digits", "avg_bits": 4.0, **args})
    assert "\n" not in str(exc.value).strip()


def test_a_language_model_is_refused_with_the_reason() -> None:
    with pytest.raises(ToolArgumentError, match="lm model; this tool needs a classify model"):
        call_tool(TOOL, {"model": "lm-pydoc-tiny", "avg_bits": 4.0})


@pytest.mark.slow  # about 25 s on 2 busy cores: every step tries every group (the logic is tested fast in tests/sim)
def test_greedy_stays_within_the_accuracy_drop_and_reports_its_groups() -> None:
    value = call_tool(TOOL, {"method": "greedy", "accuracy_drop_max": 1.0, "finetune_epochs": 0}).value
    assert value["target_avg_bits"] is None and 2.0 <= value["avg_bits"] < 8.0
    assert value["val_accuracy_after"] >= value["val_accuracy_float"] - 1.0
    # two groups per layer (units important to many classes, the rest); greedy drops an empty one, which happens
    # when every unit of a layer reaches the median class count (ties), so the trained weights decide 9 or 10
    layers = {name.rsplit(".", 1)[0] for name in value["groups"]}
    assert layers == {"conv1", "conv2", "conv3", "fc1", "fc2"} and 5 <= len(value["groups"]) <= 10
    assert {name.rsplit(".", 1)[1] for name in value["groups"]} <= {"many", "rest"}
    assert set(value["groups"].values()) <= {2, 3, 4, 6, 8}


def test_the_figure_refuses_average_bits_below_the_narrowest_width_in_one_line_and_writes_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from coevo.figures import quant

    out = tmp_path / "never"
    assert quant.main(["--bits", "3,0.5", "--out", str(out)]) == 2
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and "got 0.5" in err and "(2 and 8)" in err
    assert not out.exists()


def test_the_figure_pools_each_seed_over_the_folds_by_test_size() -> None:
    from coevo.figures.quant import pooled

    rows = [
        {"method": "uniform", "target_bits": "3.0", "seed": "0", "fold": "0", "test_n": "300", "test_after": "90.0"},
        {"method": "uniform", "target_bits": "3.0", "seed": "0", "fold": "1", "test_n": "100", "test_after": "50.0"},
        {"method": "uniform", "target_bits": "3.0", "seed": "1", "fold": "0", "test_n": "300", "test_after": "70.0"},
    ]
    got = pooled(rows, "test_after")
    assert got == {("uniform", "3.0", 0): pytest.approx(80.0), ("uniform", "3.0", 1): pytest.approx(70.0)}  # (270 + 50) / 400
