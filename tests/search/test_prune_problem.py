"""The ``prune`` search problem on lm-pydoc-tiny: exact weight share, niches by sparsity band, perplexity, a short search."""

from __future__ import annotations

import json
import math

import pytest
import torch

from coevo.agent.cli import main
from coevo.search.errors import UserInputError
from coevo.search.niches import niche_of
from coevo.search.problems import make_problem
from coevo.search.prune.problem import PruneProblem
from coevo.search.prune.run import prune_zoo, zoo_model

OPTIONS = {"model": "lm-pydoc-tiny", "calib_tokens": 64, "eval_batches": 2}


def test_designs_round_trip_and_niches_follow_the_sparsity_band() -> None:
    p = make_problem("prune", OPTIONS)
    assert isinstance(p, PruneProblem) and p.genes == ["b0_attn", "b0_mlp", "b1_attn", "b1_mlp"]
    point = p.parse_design("b0_attn=0.25 b0_mlp=0.5 b1_attn=0 b1_mlp=0.75")
    assert point == (0.25, 0.5, 0.0, 0.75) and p.parse_design(p.describe(point)) == point
    # block weights: attention 4 d^2, MLP 8 d^2 per block; d = 64 divides evenly at these levels
    assert p.cheap_values([point])["weight_share"][0] == pytest.approx(1 - (4 * 0.25 + 8 * 0.5 + 0 + 8 * 0.75) / 24)
    niches = p.niches()
    assert [niche_of(niches, x) for x in ((0.0,) * 4, (0.4,) * 4, (0.25, 0.75, 0.25, 0.75))] == ["light", "medium", "heavy"]
    assert all(sum(a != b for a, b in zip(point, n, strict=True)) == 1 for n in p.neighbours(point))
    assert "q, k, v, o" in p.explain_encoding() and "b1_mlp" in p.explain_encoding()
    with pytest.raises(UserInputError, match=r"b0_mlp=0\.3 is outside the space"):
        p.parse_design("b0_attn=0.25 b0_mlp=0.3 b1_attn=0 b1_mlp=0.75")


def test_weight_share_is_what_the_masks_keep_and_perplexity_is_measured() -> None:
    p = make_problem("prune", OPTIONS)
    point = (0.4, 0.6, 0.25, 0.0)  # 0.4 * 64 and 0.6 * 256 round: the share counts the rounding
    out = prune_zoo("lm-pydoc-tiny", p.layer_sparsity(point), score="cos+var", calib_tokens=64, splits=("val",), max_batches=2)
    zm = zoo_model("lm-pydoc-tiny")
    linears = [(n, m) for n, m in zm.model.named_modules() if n.startswith("blocks.") and isinstance(m, torch.nn.Linear)]
    sizes = {n: m.weight.numel() for n, m in linears}
    pruned = sum(out.layer_sparsity.get(n, 0.0) * size for n, size in sizes.items())
    values = p.evaluate(point)
    assert values["weight_share"] == pytest.approx(1 - pruned / sum(sizes.values()), abs=1e-12)
    assert values["neg_log_ppl"] == pytest.approx(-math.log(out.val_pruned))
    dense = -math.log(zm.evaluate(zm.model, split="val", max_batches=2))
    assert p.evaluate((0.0,) * 4)["neg_log_ppl"] == pytest.approx(dense)
    assert p.evaluate((0.75,) * 4)["neg_log_ppl"] < p.evaluate((0.25,) * 4)["neg_log_ppl"] < dense + 0.05


def test_pelnas_search_on_the_prune_problem(capsys: pytest.CaptureFixture[str], storage: str) -> None:
    argv = ["search", "--problem", "prune", "--model", "lm-pydoc-tiny", "--calib-tokens", "32", "--eval-batches", "1"]
    assert main([*argv, "--proposer", "pelnas", "--budget", "8", "--storage", storage, "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["evaluations"] == 8 and data["front"]
    assert all(0 < row["weight_share"] <= 1 and row["neg_log_ppl"] < 0 for row in data["front"])
