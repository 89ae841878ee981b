"""The zoqat figure: paired differences are taken seed by seed, --report-only re-renders the committed pages (main
and ablation), P-GAP's probes are counted against the steps, and rows follow an older CSV's header."""

from __future__ import annotations

import shutil
from pathlib import Path

from coevo.figures._cli import main
from coevo.figures._common import strip_provenance
from coevo.figures.zoqat import append, findings, paired, rows_by_label, table, updates

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


def test_ablation_report_only_rerenders_the_committed_page(tmp_path: Path) -> None:
    shutil.copytree(ROOT / "docs" / "bench" / "quant", tmp_path / "quant")
    assert main(["zoqat", "--ablation", "--out", str(tmp_path / "quant"), "--report-only"]) == 0
    rendered = (tmp_path / "quant" / "zoqat-ablation.md").read_text()
    committed = (ROOT / "docs" / "bench" / "quant" / "zoqat-ablation.md").read_text()
    assert strip_provenance(rendered) == strip_provenance(committed)


def test_pgap_updates_count_the_probes_against_the_steps() -> None:
    # 300 steps, windows of 50: 5 probes leave 270 updates, 20 probes 180; SPSA would update on all 300
    assert updates(300, 50, 5) == 270 and updates(300, 50, 20) == 180 and updates(300, 50, 0) == 300


def test_a_row_appended_to_an_older_csv_follows_that_files_header(tmp_path: Path) -> None:
    path = tmp_path / "old.csv"
    path.write_text("phase,label,after_test\ntest,rtn,12.0\n")  # written before smooth_alpha and most fields existed
    append(path, {"phase": "test", "label": "spsa-full", "after_test": 11.9, "smooth_alpha": 0.5})
    assert path.read_text().splitlines() == ["phase,label,after_test", "test,rtn,12.0", "test,spsa-full,11.9"]
