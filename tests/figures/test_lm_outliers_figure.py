"""The lm-outliers figure: its page is rendered from its CSV alone, and the summary counts what the rows say."""

from __future__ import annotations

import shutil
from pathlib import Path

from coevo.figures import lm_outliers
from coevo.figures._common import strip_provenance

BENCH = Path(__file__).resolve().parents[2] / "docs" / "bench" / "prune"


def test_report_only_rewrites_the_committed_page_from_the_committed_csv(tmp_path: Path) -> None:
    shutil.copy(BENCH / "outliers.csv", tmp_path / "outliers.csv")
    lm_outliers.main(["--report-only", "--out", str(tmp_path)])
    assert strip_provenance((tmp_path / "outliers.md").read_text()) == strip_provenance((BENCH / "outliers.md").read_text())


def test_a_layer_with_an_outlier_channel_is_counted(tmp_path: Path) -> None:
    row = {
        "model": "m", "seed": 0, "params": 10, "val_ppl": 3.0, "layer": "blocks.0.attn.q", "channels": 8, "tokens": 64,
        "absmax": 9.0, "absmax_ratio": 5.0, "norm_ratio": 4.0, "kurtosis": 30.0, "outlier_channels": "", "systematic": "3",
    }  # fmt: skip
    rows = [row, {**row, "layer": "blocks.0.mlp.fc1", "outlier_channels": "3"}]
    lm_outliers.write_csv(tmp_path / "outliers.csv", rows, lm_outliers.FIELDS)
    text = lm_outliers.report(tmp_path / "outliers.csv", tmp_path / "outliers.md", "test")
    line = next(x for x in text.splitlines() if x.startswith("| m |"))
    assert line.endswith("| 1 of 2 | 1 |") and "| 9.00 |" in line
