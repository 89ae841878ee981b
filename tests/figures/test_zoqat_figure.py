"""The zoqat figure: paired differences are taken seed by seed, and --report-only re-renders the committed page."""

from __future__ import annotations

import shutil
from pathlib import Path

from coevo.figures._cli import main
from coevo.figures._common import strip_provenance
from coevo.figures.zoqat import findings, paired, rows_by_label, table

ROOT = Path(__file__).resolve().parents[2]


def _row(label: str, method: str, seed: int, after: float, steps: int = 300) -> dict[str, str]:
    return {
        "phase": "test",
        "label": label,
        "model": "m",
        "method": method,
        "w_bits": "4",
        "a_bits": "8",
        "steps": str(steps),
        "lr": "0.01",
        "seed": str(seed),
        "metric": "perplexity",
        "after_test": str(after),
        "float_test": "10.0",
        "peak_rss_train_mb": "300",
        "s_per_step": "0.1",
        "trainable_values": "7",
    }


def test_paired_differences_follow_the_seed_not_the_order() -> None:
    # RTN differs a lot between seeds; spsa-light is RTN minus exactly 0.1 on every seed: the paired difference is
    # -0.1 with no spread, though the unpaired means' intervals overlap
    rtn = [_row("rtn", "rtn", s, v, steps=0) for s, v in [(0, 12.0), (1, 13.0), (2, 11.0)]]
    spsa = [_row("spsa-light", "spsa", s, v) for s, v in [(2, 10.9), (0, 11.9), (1, 12.9)]]
    by = rows_by_label(rtn + spsa, "m", 300, 4, 8)
    diff = paired(by["spsa-light"], by["rtn"])
    assert [round(d, 6) for d in diff] == [-0.1, -0.1, -0.1]
    assert "-0.100 ± 0.000" in table(rtn + spsa, "m", 300, 4, 8)
    assert "**spsa-light** vs **rtn**: test perplexity difference -0.100 ± 0.000 (paired, 3 seeds): better." in findings(
        rtn + spsa, "m", 300, 4, 8
    )


def test_report_only_rerenders_the_committed_page(tmp_path: Path) -> None:
    shutil.copytree(ROOT / "docs" / "bench" / "quant", tmp_path / "quant")
    assert main(["zoqat", "--out", str(tmp_path / "quant"), "--report-only", "--model", "lm-pydoc-tiny"]) == 0
    rendered = (tmp_path / "quant" / "zoqat.md").read_text()
    assert strip_provenance(rendered) == strip_provenance((ROOT / "docs" / "bench" / "quant" / "zoqat.md").read_text())
