"""The lm-outliers trajectory mode: the page from a hand-written CSV, runs accumulating in one file, bad options."""

from __future__ import annotations

import math
import shutil
from pathlib import Path

import pytest

from coevo.figures import _outlier_trajectory as trajectory
from coevo.figures import lm_outliers
from coevo.figures._common import read_csv, strip_provenance, write_csv

SETTINGS = {"model": "m", "train_seed": 0, "steps_multiplier": 3.0, "weight_decay": 0.1, "checkpoints": 3, "calib_tokens": 64}


def _row(step: int, layer: str, absmax: float, ratio: float, kurt: float, top: float, channels: str, ppl: float) -> dict[str, object]:
    return {
        **SETTINGS, "total_steps": 30, "git": "abc", "step": step, "elapsed_s": step / 10, "params": 1000, "val_ppl": ppl,
        "layer": layer, "channels": 8, "tokens": 64, "absmax": absmax, "absmax_ratio": ratio, "norm_ratio": 1.5,
        "kurtosis": kurt, "outlier_channels": channels, "top_share": top, "systematic": "",
    }  # fmt: skip


def _hand_rows() -> list[dict[str, object]]:
    return [  # written out of step order: the page sorts by step
        _row(30, "L1", 4.0, 2.0, 8.0, 0.25, "1", 8.0),
        _row(30, "L2", 6.0, 4.0, 9.0, 0.15, "", 8.0),
        _row(10, "L1", 3.0, 2.0, 4.0, 0.10, "", 9.0),
        _row(10, "L2", 5.0, 4.0, 6.0, 0.20, "", 9.0),
        _row(20, "L1", 7.0, 2.0, 12.0, 0.30, "1 2", 7.5),
        _row(20, "L2", 2.0, 4.0, 5.0, 0.05, "1", 7.5),
    ]


def test_the_page_reads_first_peak_and_last_checkpoint_from_the_csv(tmp_path: Path) -> None:
    write_csv(tmp_path / "t.csv", _hand_rows(), trajectory.FIELDS)
    text = trajectory.report(tmp_path / "t.csv", tmp_path / "t.md", "test")
    run = next(x for x in text.splitlines() if x.startswith("| m, seed 0"))
    # per checkpoint (10, 20, 30): max |x| 5, 7, 6; kurtosis max 6, 12, 9; top share 20, 30, 25 %;
    # outlier channels over both layers 0, 3, 1; val ppl 9, 7.5, 8 (lowest at 20)
    assert "| m, seed 0, 30 steps (x3), weight decay 0.1 | 3 |" in run
    assert "| 9.000 → 7.500 (step 20) → 8.000 |" in run
    assert "| 5.00 → 7.00 (step 20) → 6.00 |" in run
    assert "| 6.00 → 12.00 (step 20) → 9.00 |" in run
    assert "| 20.00 % → 30.00 % (step 20) → 25.00 % |" in run
    assert "| 0 → 3 (step 20) → 1 / 0 → 3 (step 20) → 1 |" in run  # both layers are of the hidden width (the first's)
    # the last checkpoint's heaviest tail is L2's, its largest top share L1's; 3.0 s of training at step 30
    assert run.endswith("| `L2` (9.00) / `L1` (25.00 %) | 3 |")
    steps = [x for x in text.splitlines() if x.startswith(("| 10 |", "| 20 |", "| 30 |"))]
    assert [x.split(" |")[0] for x in steps] == ["| 10", "| 20", "| 30"]
    # step 20: absmax ratio median (2 + 4) / 2 = 3; kurtosis median (12 + 5) / 2 = 8.5; channel 1 in both layers
    # and channel 2 in one of 2 (>= 25 %): 2 systematic
    assert steps[1] == "| 20 | 7.500 | 7.00 | 3.00 | 8.50 / 12.00 | `L1` | 30.00 % (`L1`) | 3 / 3 | 2 of 2 | 2 |"
    assert "| `L2` | 20.00 % (`L2`) |" in steps[0]
    assert steps[0].endswith("| 0 / 0 | 0 of 2 | 0 |") and steps[2].endswith("| 1 / 1 | 1 of 2 | 1 |")


def test_a_rerun_replaces_its_own_rows_and_keeps_other_runs(tmp_path: Path) -> None:
    path = tmp_path / "t.csv"
    other = [{**r, "train_seed": 1} for r in _hand_rows()]
    write_csv(path, _hand_rows() + other, trajectory.FIELDS)
    rerun = [{**r, "weight_decay": "0.10", "val_ppl": 1.0} for r in _hand_rows()[:2]]  # 0.10 is the same decay as 0.1
    merged = trajectory.merge(path, rerun)
    assert len(merged) == 6 + 2
    assert sorted({int(str(r["train_seed"])) for r in merged}) == [0, 1]
    assert [r["val_ppl"] for r in merged if int(str(r["train_seed"])) == 0] == [1.0, 1.0]
    new_decay = [{**r, "weight_decay": 0.0} for r in _hand_rows()]
    assert len(trajectory.merge(path, new_decay)) == 12 + 6


def test_rows_saved_before_the_lr_multiplier_are_runs_at_the_recipes_rate(tmp_path: Path) -> None:
    path = tmp_path / "t.csv"
    old_fields = [f for f in trajectory.FIELDS if f != "lr_multiplier"]
    write_csv(path, [{k: v for k, v in r.items() if k in old_fields} for r in _hand_rows()], old_fields)
    faster = [{**r, "lr_multiplier": 3.0} for r in _hand_rows()]
    merged = trajectory.merge(path, faster)
    assert len(merged) == 12  # another learning rate is another run
    assert sorted({float(str(r["lr_multiplier"])) for r in merged}) == [1.0, 3.0]  # the old rows get the recipe's 1
    same = [{**r, "lr_multiplier": "1"} for r in _hand_rows()[:2]]
    assert len(trajectory.merge(path, same)) == 2  # rate 1 written out is the old rows' run: they are replaced
    write_csv(path, merged, trajectory.FIELDS)
    page = trajectory.report(path, tmp_path / "t.md", "test")
    titles = [x.split(" | ")[0] for x in page.splitlines() if x.startswith("| m, seed 0")]
    assert titles == ["| m, seed 0, 30 steps (x3), weight decay 0.1", "| m, seed 0, 30 steps (x3), weight decay 0.1, peak learning rate x3"]


def test_old_layer_rows_without_top_share_still_load() -> None:
    row = {k: str(v) for k, v in _row(10, "L1", 3.0, 2.0, 4.0, 0.1, "", 9.0).items() if k != "top_share"}
    layer = lm_outliers.layer_from_row(row)
    assert math.isnan(layer.top_share) and layer.kurtosis == 4.0


@pytest.mark.parametrize(
    "args",
    [
        ["--trajectory", "lm-pydoc-tiny", "--steps-multiplier", "0"],
        ["--trajectory", "lm-pydoc-tiny", "--steps-multiplier", "-2"],
        ["--trajectory", "lm-pydoc-tiny", "--checkpoints", "0"],
        ["--trajectory", "lm-pydoc-tiny", "--steps-multiplier", "0.01", "--checkpoints", "4"],  # 3 steps
        ["--trajectory", "lm-pydoc-tiny", "--weight-decay", "-1"],
        ["--trajectory", "lm-pydoc-tiny", "--lr-multiplier", "0"],
        ["--trajectory", "lm-nope"],
        ["--trajectory", "cnn-digits"],
    ],
)
def test_a_bad_option_is_one_line_and_exit_2_with_nothing_written(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], args: list[str]
) -> None:
    out = tmp_path / "out"
    assert lm_outliers.main([*args, "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and err.count("\n") == 1
    assert not out.exists()


@pytest.mark.slow  # trains the tiny LM three times (41 s on a shared 2-core machine): CI runs it, the fast loop does not
def test_runs_accumulate_in_one_csv_and_page(tmp_path: Path) -> None:
    base = ["--trajectory", "lm-pydoc-tiny", "--steps-multiplier", "0.02", "--checkpoints", "2", "--tokens", "256"]
    assert lm_outliers.main([*base, "--out", str(tmp_path)]) == 0  # 6 steps, checkpoints 3 and 6
    rows = read_csv(tmp_path / trajectory.CSV)
    assert sorted({int(r["step"]) for r in rows}) == [3, 6] and {r["weight_decay"] for r in rows} == {"0.1"}
    per_step = len(rows) // 2
    assert per_step == 8 and all(0 < float(r["top_share"]) <= 1 for r in rows)  # 8 distinct inputs of the 2-block model
    assert lm_outliers.main([*base, "--train-seed", "1", "--out", str(tmp_path)]) == 0
    assert lm_outliers.main([*base, "--out", str(tmp_path)]) == 0  # seed 0 again: replaces its rows
    rows = read_csv(tmp_path / trajectory.CSV)
    assert len(rows) == 2 * 2 * per_step and [r["train_seed"] for r in rows[:: 2 * per_step]] == ["1", "0"]
    page = (tmp_path / trajectory.PAGE).read_text()
    assert page.count("| lm-pydoc-tiny, seed ") == 2 and "6 steps (x0.02)" in page
    before = page.split("\n", 1)[1]
    assert lm_outliers.main(["--report-only", "--trajectory", "any", "--out", str(tmp_path)]) == 0
    assert (tmp_path / trajectory.PAGE).read_text().split("\n", 1)[1] == before


def test_report_only_rewrites_the_committed_trajectory_page_from_its_csv(tmp_path: Path) -> None:
    bench = Path(__file__).resolve().parents[2] / "docs" / "bench" / "prune"
    shutil.copy(bench / trajectory.CSV, tmp_path / trajectory.CSV)
    assert lm_outliers.main(["--report-only", "--trajectory", "any", "--out", str(tmp_path)]) == 0
    assert strip_provenance((tmp_path / trajectory.PAGE).read_text()) == strip_provenance((bench / trajectory.PAGE).read_text())
