"""The lm-wide figure at toy size on the CPU: corpus round trip, training with checkpoints, pruning, the page, bad options."""

from __future__ import annotations

import gzip
import json
import random
from pathlib import Path

import pytest

from coevo.figures import lm_wide
from coevo.figures._common import read_csv
from coevo.figures._lm_wide_run import SPLIT_FILES, WideSettings, read_corpus

TOY = ["--device", "cpu", "--widths", "32,64", "--layers", "1", "--steps", "20", "--batch", "4", "--block", "32", "--checkpoints", "2"]


@pytest.fixture(scope="module")
def corpus(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A small code-like corpus in the exported layout (one gzip file of bytes per split)."""
    folder = tmp_path_factory.mktemp("corpus")
    rng = random.Random(0)
    words = [b"def ", b"return ", b"self", b"(", b")", b":\n    ", b"import os\n", b"x = 1\n", b"for i in range(10):\n"]
    for split, n in (("train", 60_000), ("val", 12_000), ("test", 12_000)):
        with gzip.open(folder / SPLIT_FILES[split], "wb") as f:
            f.write(b"".join(rng.choice(words) for _ in range(n // 6)))
    return folder


@pytest.fixture(scope="module")
def measured(corpus: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("wide")
    assert lm_wide.main([*TOY, "--corpus", str(corpus), "--calib-seeds", "2", "--out", str(out), "--commit", "abc123"]) == 0
    return out


def test_every_width_is_measured_at_every_checkpoint_on_every_layer_input(measured: Path) -> None:
    rows = read_csv(measured / lm_wide.TRAJECTORY)
    seen = {(int(r["width"]), int(r["step"])) for r in rows}
    assert seen == {(32, 10), (32, 20), (64, 10), (64, 20)}
    # one block: q (k and v read the same input, so they are not counted again), o, fc1, fc2 (the head is not pruned)
    assert all(sum(1 for r in rows if (int(r["width"]), int(r["step"])) == key) == 4 for key in seen)
    assert all(int(r["tokens_seen"]) == int(r["step"]) * 4 * 32 for r in rows)


def test_pruning_rows_cover_every_score_pattern_and_seed_at_the_asked_sparsity(measured: Path) -> None:
    rows = read_csv(measured / lm_wide.PRUNE)
    settings = WideSettings()
    assert len(rows) == 2 * len(settings.scores) * len(settings.patterns) * 2  # widths x scores x patterns x seeds
    for r in rows:
        assert abs(float(r["sparsity"]) - 0.5) < 0.02, r  # 50 % unstructured and 2:4 both prune half
        assert float(r["test_ppl"]) > 1.0
    magnitude = {r["test_ppl"] for r in rows if r["score"] == "magnitude" and r["width"] == "64" and r["pattern"] == "2:4"}
    assert len(magnitude) == 1  # no calibration data: the seeds repeat one model


def test_the_run_file_records_the_commit_device_and_each_width(measured: Path) -> None:
    info = json.loads((measured / lm_wide.RUN).read_text())
    assert info["commit"] == "abc123" and info["device"].startswith("cpu")
    assert [(m["width"], m["seed"]) for m in info["models"]] == [(64, 0), (32, 0)] and info["skipped"] == []
    pruned = read_csv(measured / lm_wide.PRUNE)
    for m in info["models"]:  # a model's pruning time holds each of its prunings' (rounded to 0.1 s and 0.01 s)
        rows = [float(r["prune_s"]) for r in pruned if int(r["width"]) == m["width"]]
        assert len(rows) == 16 and m["prune_s"] >= sum(rows) - 0.1 and m["pruning_cut"] is False
    assert info["settings"]["steps"] == 20


def test_the_page_renders_from_the_saved_files_alone(measured: Path) -> None:
    first = (measured / lm_wide.PAGE).read_text()
    assert lm_wide.main(["--report-only", "--out", str(measured)]) == 0
    again = (measured / lm_wide.PAGE).read_text()
    assert first.split("\n", 1)[1] == again.split("\n", 1)[1]  # the provenance line aside
    assert "| 64 | 2:4 |" in again and "wanda vs" not in again and "magnitude vs wanda" in again
    assert "56.25 %" in again  # 36 / 64, the share |x| = 6 needs at width 64


def test_training_seeds_give_one_model_each_and_the_page_takes_intervals_over_them(corpus: Path, tmp_path: Path) -> None:
    toy = [*TOY[:3], "32", *TOY[4:]]  # one width
    assert lm_wide.main([*toy, "--seeds", "3,5", "--calib-seeds", "2", "--corpus", str(corpus), "--out", str(tmp_path)]) == 0
    trajectory = read_csv(tmp_path / lm_wide.TRAJECTORY)
    assert {(r["seed"], r["step"]) for r in trajectory} == {("3", "10"), ("3", "20"), ("5", "10"), ("5", "20")}
    pruned = read_csv(tmp_path / lm_wide.PRUNE)
    assert {(r["seed"], r["calib_seed"]) for r in pruned} == {("3", "0"), ("3", "1"), ("5", "0"), ("5", "1")}
    # the seeds change the initial weights and the windows: two different trained models
    dense = {r["seed"]: r["dense_test_ppl"] for r in pruned}
    assert dense["3"] != dense["5"]
    page = (tmp_path / lm_wide.PAGE).read_text()
    assert (
        "| width | pattern | models |" in page
        and "| 32 | 2:4 | 2 |" in page
        and "Width 32, 2 training seeds" in page
        and "training seeds 3, 5" in page
    )
    assert "One training per width" not in page
    assert "Each trained model" in page and "| 32 | 3 |" in page and "| 32 | 5 |" in page  # the per-model table


def test_several_unstructured_sparsities_each_get_a_row_of_their_own(corpus: Path, tmp_path: Path) -> None:
    toy = [*TOY[:3], "32", *TOY[4:]]
    argv = [*toy, "--patterns", "unstructured,1:4", "--sparsities", "0.6,0.8", "--calib-seeds", "1"]
    assert lm_wide.main([*argv, "--corpus", str(corpus), "--out", str(tmp_path)]) == 0
    pruned = read_csv(tmp_path / lm_wide.PRUNE)
    targets = {(r["pattern"], r["target_sparsity"]) for r in pruned}
    assert targets == {("unstructured", "0.6"), ("unstructured", "0.8"), ("1:4", "0.75")}
    for r in pruned:  # the measured sparsity is the target's, to the rows' rounding (32 inputs: 1/32 a step)
        assert abs(float(r["sparsity"]) - float(r["target_sparsity"])) < 1 / 32, r
    page = (tmp_path / lm_wide.PAGE).read_text()
    assert "| 32 | unstructured 60 % |" in page and "| 32 | unstructured 80 % |" in page and "| 32 | 1:4 |" in page


def test_the_estimate_takes_the_same_widths_last_time_else_scales_by_parameters() -> None:
    from coevo.figures._lm_wide_run import estimate_s

    assert estimate_s(1024, []) == 0.0
    assert estimate_s(1024, [(1024, 130.0), (256, 70.0)]) == 130.0  # a seed loop: not 16 x the narrow model's
    assert estimate_s(512, [(256, 10.0)]) == 40.0  # (512 / 256)^2


def test_a_pruning_past_its_deadline_stops_and_says_it_was_cut(corpus: Path) -> None:
    import torch

    from coevo.figures._lm_wide_run import DeviceCorpus, Trained, prune_width, read_corpus
    from coevo.sim.zoo.models import ByteGPT

    settings = WideSettings(widths=(32,), layers=1, block=32, calib_windows=4)
    data = DeviceCorpus.of(read_corpus(corpus), settings.block, torch.device("cpu"))
    trained = Trained(32, 0, ByteGPT(32, 1, 1, 32).eval(), 0, 0.0, 0.0)
    rows: list[dict[str, object]] = []
    assert prune_width(trained, settings, data, torch.device("cpu"), deadline=0.0, on_row=rows.append) is False
    assert rows == []


def test_a_cell_of_the_pruning_table_by_hand() -> None:
    from coevo.figures.lm_wide import _prune_section

    ppl = {("wanda", 0): (2.0, 4.0), ("wanda", 1): (2.0, 2.0), ("magnitude", 0): (1.0, 3.0), ("magnitude", 1): (3.0, 3.0)}
    rows = [
        {"width": "64", "seed": str(seed), "score": score, "pattern": "2:4", "target_sparsity": "0.5", "sparsity": "0.5",
         "calib_seed": str(c), "test_ppl": str(value), "dense_test_ppl": "1.5"}
        for (score, seed), values in ppl.items() for c, value in enumerate(values)
    ]  # fmt: skip
    page = "\n".join(_prune_section(rows))
    # per model, paired by calibration seed: seed 0 (-50 %, -25 %) -> -37.5; seed 1 (+50 %, +50 %) -> +50;
    # mean +6.25, sd 87.5 / sqrt 2, t(0.975, 1) = 12.7062: half-width 12.7062 * 87.5 / 2 = 555.90
    assert "| 64 | 2:4 | 2 | 1.500 |" in page and "+6.25 ± 555.90 %" in page
    # levels: magnitude's per-model means 2.0 and 3.0; wanda's 3.0 and 2.0 -> 2.500 ± 6.353 (12.7062 * 0.5)
    assert page.count("2.500 ± 6.353") == 2
    assert "Intervals over 2 trained models: a Student t interval over fewer than 5 values" in page


def test_pruning_differences_pair_calibration_seeds_within_training_seeds() -> None:
    from coevo.figures.lm_wide import _diff_units, _units

    wanda = {0: {0: 2.0, 1: 4.0}, 1: {0: 2.0, 1: 2.0}}
    magnitude = {0: {0: 1.0, 1: 3.0}, 1: {0: 3.0, 1: 3.0}}
    # seed 0: -50 % and -25 % -> -37.5; seed 1: +50 % twice -> +50
    assert _diff_units(magnitude, wanda, many=True) == [-37.5, 50.0]
    assert _diff_units(magnitude, wanda, many=False) == [-50.0, -25.0, 50.0, 50.0]
    assert _units(wanda, many=True) == [3.0, 2.0]


def test_the_first_runs_files_without_a_seed_column_read_as_seed_0() -> None:
    from coevo.figures.lm_wide import _seed

    assert _seed({"width": "64"}) == 0 and _seed({"width": "64", "seed": "2"}) == 2


def test_a_deadline_that_has_passed_skips_every_width_and_says_so(corpus: Path, tmp_path: Path) -> None:
    assert lm_wide.main([*TOY, "--corpus", str(corpus), "--deadline-s", "0", "--out", str(tmp_path)]) == 2
    info = json.loads((tmp_path / lm_wide.RUN).read_text())
    assert [x["width"] for x in info["skipped"]] == [64, 32]


def test_export_writes_splits_that_read_back(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from coevo.figures import _lm_wide_run
    from coevo.sim.zoo import registry

    monkeypatch.setattr(registry, "lm_text", lambda rec: {"train": b"t" * 100, "val": b"v" * 10, "test": b"x" * 10})
    sizes = _lm_wide_run.export_corpus(tmp_path / "c")
    assert sizes == {"train": 100, "val": 10, "test": 10}
    assert read_corpus(tmp_path / "c") == {"train": b"t" * 100, "val": b"v" * 10, "test": b"x" * 10}


@pytest.mark.parametrize(
    ("extra", "says"),
    [
        (["--widths", "100"], "--widths"),
        (["--steps", "0"], "--steps 0"),
        (["--steps", "19"], "--steps 19: at least 20"),
        (["--checkpoints", "21"], "--checkpoints 21"),
        (["--lr", "0"], "--lr 0"),
        (["--seeds", "1,1"], "--seeds 1,1: distinct"),
        (["--seeds", "a"], "--seeds 'a'"),
        (["--sparsities", "0.5,1"], "--sparsities [1.0]: each must be in (0, 1)"),
        (["--sparsities", "half"], "--sparsities 'half'"),
        (["--patterns", "4:2"], "--patterns '4:2'"),
    ],
)
def test_bad_options_exit_2_with_one_line_and_write_nothing(
    corpus: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], extra: list[str], says: str
) -> None:
    out = tmp_path / "out"
    assert lm_wide.main([*TOY, *extra, "--corpus", str(corpus), "--out", str(out)]) == 2
    err = capsys.readouterr().err.strip()
    assert says in err and len(err.splitlines()) == 1
    assert not out.exists()


def test_a_missing_corpus_is_named(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert lm_wide.main([*TOY, "--corpus", str(tmp_path / "nowhere"), "--out", str(tmp_path / "out")]) == 2
    assert "--export-corpus" in capsys.readouterr().err
