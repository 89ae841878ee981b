"""The prune figure: seeds that vary the trained model (--vary-model), and scores paired against Wanda by seed."""

from __future__ import annotations

import csv
import math
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from coevo.figures import prune
from coevo.figures._common import strip_provenance

BENCH = Path(__file__).resolve().parents[2] / "docs" / "bench" / "prune"


class _FakeZoo:
    """A stand-in zoo model whose dense perplexity tells which training seed made it."""

    def __init__(self, train_seed: int | None) -> None:
        self.train_seed = train_seed
        self.model = object()

    def evaluate(self, model: object, split: str, max_batches: int | None = None) -> float:
        return 10.0 + (self.train_seed or 0)


def test_vary_model_trains_a_model_per_seed_and_records_it(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    asked: list[tuple[str, int | None]] = []

    def fake_zoo_model(name: str, train_seed: int | None = None) -> _FakeZoo:
        asked.append((name, train_seed))
        return _FakeZoo(train_seed)

    def fake_prune(zm: _FakeZoo, sparsity: float, **kw: Any) -> SimpleNamespace:
        return SimpleNamespace(sparsity=sparsity, test_pruned=kw["dense"]["test"] * 1.5, wall_s=0.01)

    monkeypatch.setattr(prune, "zoo_model", fake_zoo_model)
    monkeypatch.setattr(prune, "prune_zoo", fake_prune)
    path = tmp_path / "prune.csv"
    prune.run("lm-pydoc-tiny", [3, 5], [32], None, path, "cmd", vary_model=True)
    assert asked == [("lm-pydoc-tiny", 3), ("lm-pydoc-tiny", 5)]  # one trained model per seed, its own training seed
    rows = list(csv.DictReader(path.open()))
    assert {(r["seed"], r["train_seed"], r["test_ppl_dense"]) for r in rows} == {("3", "3", "13.0"), ("5", "5", "15.0")}
    assert len(rows) == 2 * len(prune.PATTERNS) * len(prune.SCORES)
    asked.clear()
    prune.run("lm-pydoc-tiny", [3, 5], [32], None, path, "cmd")  # without: the recipe's one model for every seed
    assert asked == [("lm-pydoc-tiny", None)]
    assert {r["train_seed"] for r in csv.DictReader(path.open())} == {""}


def _row(score: str, seed: int, ppl: float) -> dict[str, object]:
    return {
        "model": "m", "pattern": prune.PATTERNS[0], "score": score, "calib_tokens": 32, "seed": seed, "train_seed": seed,
        "sparsity": 0.5, "test_ppl_dense": 10.0 + seed, "test_ppl": ppl, "wall_s": 0.1,
    }  # fmt: skip


def test_scores_are_paired_against_wanda_by_seed(tmp_path: Path) -> None:
    # cos+var's ln-perplexity exceeds Wanda's by 0.1, 0.2, 0.3 on seeds 0-2: mean 0.2, sd 0.1,
    # half-width t(0.975, 2) x 0.1 / sqrt(3) = 4.3027 x 0.057735 = 0.2484: the interval holds 0
    rows = []
    for seed, gap in enumerate((0.1, 0.2, 0.3)):
        rows += [_row("wanda", seed, 20.0), _row("cos+var", seed, 20.0 * math.exp(gap)), _row("magnitude", seed, 10.0)]
    path = tmp_path / "prune.csv"
    with path.open("w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=prune.FIELDS)
        w.writeheader()
        w.writerows(rows)
    text = prune.report(path, tmp_path / "prune.md", "note", "cmd")
    line = next(x for x in text.splitlines() if x.startswith(f"| {prune.PATTERNS[0]} | cos+var |"))
    assert "+0.2000 ± 0.2484 (+22.1 %, no difference)" in line
    line = next(x for x in text.splitlines() if x.startswith(f"| {prune.PATTERNS[0]} | magnitude |"))
    assert f"{math.log(0.5):+.4f} ± 0.0000" in line and "lower" in line  # half the perplexity on every seed
    assert "trains the zoo model with training seed s" in text and "11.000 [10.000-12.000]" in text.replace("*", "")


@pytest.mark.parametrize("folder", [".", "prune-tiny", "prune-pystdlib", "prune-tiny-vary", "prune-pystdlib-tiny-vary"])
def test_committed_pages_re_render_from_their_data(folder: str, tmp_path: Path) -> None:
    out = BENCH / folder
    if not (out / "prune.csv").exists():
        pytest.fail(f"{out / 'prune.csv'} is missing")
    text = prune.report(out / "prune.csv", tmp_path / "prune.md", _note(out / "prune.md"), "cmd")
    assert strip_provenance(text) == strip_provenance((out / "prune.md").read_text())


def _note(page: Path) -> str:
    """The run's note as the committed page states it (between 'from `prune.csv` (' and the dense sentence)."""
    text = page.read_text()
    return text.split("from `prune.csv` (", 1)[1].split("). Dense", 1)[0]
