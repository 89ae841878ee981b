"""The quant figure on its second task (issue 31): the rows of cnn-mnist5k-small, the committed page, the search's model."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from coevo.figures import quant
from coevo.figures._cli import main
from coevo.figures._common import read_csv, strip_provenance
from coevo.sim.paths import ENV_CACHE
from coevo.sim.zoo import recipes

ROOT = Path(__file__).resolve().parents[2]
PAGE = ROOT / "docs" / "bench" / "quant" / "mnist5k-small"


@pytest.mark.slow  # about 14 s on the shared 2-core machine: it trains a one-epoch model
def test_second_task_rows_every_method_on_its_2500_test_images(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # a one-epoch float model in a fresh cache and round-to-nearest only: the rows, not the accuracy, are under test
    monkeypatch.setenv(ENV_CACHE, str(tmp_path / "cache"))
    monkeypatch.setitem(recipes.RECIPES["cnn-mnist5k-small"]["train"], "epochs", 1)
    out = tmp_path / "out"
    assert main(["quant", "--model", "cnn-mnist5k-small", "--seeds", "1", "--epochs", "0", "--bits", "3", "--out", str(out)]) == 0
    rows = list(read_csv(out / "quant.csv"))
    assert [r["method"] for r in rows] == list(quant.METHODS)
    assert {(r["model"], r["seed"], r["fold"], r["test_n"]) for r in rows} == {("cnn-mnist5k-small", "0", "0", "2500")}
    assert all(float(r["avg_bits"]) <= 3.0 + 1e-9 for r in rows)
    page = (out / "quant.md").read_text()
    assert f"quant --out {out} --model cnn-mnist5k-small`" in page and "over the 2500 test images of the split, per seed" in page


def test_report_only_rerenders_the_committed_second_task_page(tmp_path: Path) -> None:
    shutil.copytree(PAGE, tmp_path / "q")
    (tmp_path / "q" / "quant.md").unlink()
    assert main(["quant", "--model", "cnn-mnist5k-small", "--out", str(tmp_path / "q"), "--report-only"]) == 0
    rendered = strip_provenance((tmp_path / "q" / "quant.md").read_text()).replace(str(tmp_path / "q"), "docs/bench/quant/mnist5k-small")
    assert rendered == strip_provenance((PAGE / "quant.md").read_text())


def test_search_runs_on_the_page_model_only_when_the_quant_problem_offers_it() -> None:
    assert quant.search_model("cnn-mnist5k-small") == "cnn-mnist5k-small"
    assert quant.search_model("cnn-digits-cv") == quant.SEARCH_MODEL == "cnn-digits"
