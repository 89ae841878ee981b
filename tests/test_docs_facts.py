"""Facts the hand-written docs state about the code and its data are the code's.

tests/test_docs_numbers.py checks that a measured number the prose quotes is on a figure page. The
sentences here state no measurement but a property of the code or its shipped data (a design
space's size, a corpus's statistics, a model's weight count); each is recomputed and must appear
in the page as written, so a change to the code that moves it fails until the page moves too.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np
import pytest
import torch
from optuna.distributions import CategoricalDistribution

from coevo.search.problems import make_problem
from tests.test_docs import ROOT


def _designs(problem: str) -> str:
    distributions = make_problem(problem, {}).distributions().values()
    assert all(isinstance(d, CategoricalDistribution) for d in distributions)  # a count of designs needs finite levels
    sizes = [len(d.choices) for d in distributions if isinstance(d, CategoricalDistribution)]
    return f"{math.prod(sizes):,} designs"


def _corpus() -> str:
    from coevo.sim.fpga import corpus_lengths

    lengths = np.array(corpus_lengths())
    return (
        f"{len(lengths):,} sentences, median {np.median(lengths):.0f} bytes, 95th percentile "
        f"{np.percentile(lengths, 95):.0f}, max {lengths.max():,}"
    )


def _build(name: str) -> torch.nn.Module:
    """Zoo model ``name`` as built before training (its architecture: no weights are trained or loaded)."""
    from coevo.sim.zoo.recipes import recipe
    from coevo.sim.zoo.registry import build

    return build(recipe(name))


def _weights(name: str) -> dict[str, torch.Tensor]:
    return {n: p for n, p in _build(name).named_parameters() if p.dim() > 1}  # conv and linear weights


def _cnn_cv_weights() -> str:
    return f"{sum(p.numel() for p in _weights('cnn-digits-cv').values()):,} weights"


def _conv3_unit() -> str:
    conv3 = _weights("cnn-digits-cv")["conv3.weight"]
    total = sum(p.numel() for p in _weights("cnn-digits-cv").values())
    return f"conv3 units hold {conv3[0].numel()} of its {total:,} weights"  # a unit is one output channel


def _mlp_crossbars() -> str:
    from coevo.sim.reram import crossbars_needed
    from coevo.sim.reram.config import ReramConfig

    cfg = ReramConfig().crossbar()
    model = _build("mlp-digits")
    return (
        f"{crossbars_needed(model, cfg)} crossbars of {cfg.rows}x{cfg.cols} at {cfg.weight_bits} bits / {cfg.bits_per_cell} bits per cell"
    )


FACTS: dict[str, tuple[str, Callable[[], str]]] = {
    "fpga-transformer designs": ("docs/fpga.md", lambda: _designs("fpga-transformer")),
    "stepping designs": ("docs/stepping.md", lambda: _designs("stepping")),
    "pydoc sentence lengths": ("docs/fpga.md", _corpus),
    "cnn-digits-cv weights": ("docs/quant.md", _cnn_cv_weights),
    "cnn-digits-cv conv3 unit": ("docs/quant.md", _conv3_unit),
    "mlp-digits crossbars": ("docs/reram.md", _mlp_crossbars),
}


def test_the_families_page_lists_every_zoo_model_with_its_parameter_count() -> None:
    from coevo.sim.zoo.recipes import RECIPES, recipe_parameter_count

    rows = {line.split("|")[1].strip(): line for line in (ROOT / "docs" / "families.md").read_text().splitlines() if line.startswith("| `")}
    for name, rec in RECIPES.items():
        assert f"`{name}`" in rows, f"docs/families.md's zoo table lacks {name}"
        assert f"| {recipe_parameter_count(rec):,} |" in rows[f"`{name}`"], f"{name}: its parameter count in docs/families.md"


@pytest.mark.parametrize("name", FACTS)
def test_a_stated_fact_is_the_codes(name: str) -> None:
    page, fact = FACTS[name]
    text = " ".join((ROOT / page).read_text(encoding="utf-8").split())
    expected = fact()
    assert expected in text, f"{page} should say {expected!r} (recomputed from the code)"
