"""sim.he: grid graphs, gate hardening, plan compilation against the torch model, depth by hand, CKKS against plaintext."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
import torch

from coevo.sim.errors import UserInputError
from coevo.sim.he.ckks import (
    HEParams,
    TenSEALBackend,
    chebyshev_relu,
    compile_plan,
    depth_and_counts,
    encrypted_forward,
    evaluate,
    params_for_depth,
    plain_logits,
)
from coevo.sim.he.data import grid_adjacency, grid_coords, load_dataset
from coevo.sim.he.model import GatedGCN, Recipe, harden, train
from coevo.sim.he.run import structural_depth


def test_grid_adjacency_by_hand() -> None:
    # 1x2: A + I is all ones, degrees 2 -> every entry 1/2
    assert np.allclose(grid_adjacency(1, 2), 0.5)
    # 2x2, 4 neighbours: each node has itself and 2 neighbours (degree 3); the diagonal partner is not linked
    a = grid_adjacency(2, 2, 4)
    expect = np.array([[1, 1, 1, 0], [1, 1, 0, 1], [1, 0, 1, 1], [0, 1, 1, 1]]) / 3.0
    assert np.allclose(a, expect)
    assert np.allclose(grid_adjacency(2, 2, 8), 0.25)  # 8 neighbours: all four linked
    corner, centre = grid_adjacency(3, 3, 4)[0], grid_adjacency(3, 3, 4)[4]
    assert np.isclose(corner[0], 1 / 3) and np.isclose(centre[4], 1 / 5) and np.isclose(centre[1], 1 / np.sqrt(4 * 5))


def test_dataset_splits_are_fixed_and_disjoint() -> None:
    d = load_dataset("digits-grid")
    assert d.adj.shape == (64, 64) and [len(d.y[s]) for s in ("train", "val", "test")] == [1257, 270, 270]
    assert d.x["train"].min() >= 0 and d.x["train"].max() <= 1
    again = load_dataset("digits-grid")
    assert np.array_equal(d.x["test"], again.x["test"])
    assert load_dataset("digits-grid4").adj.shape == (16, 16)
    with pytest.raises(UserInputError, match="digits-grid"):
        load_dataset("cora")
    with pytest.raises(UserInputError, match="4 or 8"):
        grid_adjacency(2, 2, 6)


def test_harden_keeps_the_requested_share_of_top_logits() -> None:
    logits = torch.tensor(np.random.default_rng(0).normal(size=(3, 64)), dtype=torch.float32)
    mask = harden(logits, [0.25, 0.5, 0.0])
    assert mask.sum(dim=1).tolist() == [16, 32, 0]
    top = set(torch.argsort(logits[0], descending=True)[:16].tolist())
    assert set(torch.nonzero(mask[0]).flatten().tolist()) == top
    assert harden(torch.zeros(1, 10), [0.3]).sum() == 3  # round(0.3 * 10); ties go to the lower index
    assert harden(torch.zeros(1, 10), [0.3])[0, :3].tolist() == [1, 1, 1]


def test_chebyshev_relu_error_falls_with_degree() -> None:
    x = np.linspace(-1, 1, 2001)
    errs = [np.abs(np.polynomial.polynomial.polyval(x, chebyshev_relu(d)) - np.maximum(x, 0)).max() for d in (2, 4, 8)]
    assert errs[0] > errs[1] > errs[2] and errs[2] < 0.05


def _tiny(kept: int, relu_degree: int = 4, layers: int = 1, seed: int = 0, classes: int = 2):
    rng = np.random.default_rng(seed)
    adj, coords = grid_adjacency(2, 2), grid_coords(2, 2)
    dims = [3] + [1] * layers
    convs = [(rng.uniform(0.2, 1.0, (a, b)), rng.uniform(-0.2, 0.2, b)) for a, b in itertools.pairwise(dims)]
    coef = rng.uniform(0.2, 0.6, (layers, 4, 3))
    mask = np.zeros((layers, 4))
    mask[0, :kept] = 1
    head = (rng.uniform(0.2, 1.0, (4 * dims[-1], classes)), rng.uniform(-0.5, 0.5, classes))
    plan = compile_plan(adj, coords, convs, coef, mask, [2.0] * layers, head, "flatten", relu_degree)
    return plan, (adj, coords, convs, coef, mask, head)


def test_depth_and_op_counts_by_hand() -> None:
    # 1 layer, 1 channel, 2x2 grid (3 neighbours per node incl. itself), poly degree 2, flatten head, 2 classes:
    # fused conv 1 level + square 1 level + fused head 1 level = 3
    plan, _ = _tiny(kept=0)
    depth, counts, per_layer = depth_and_counts(plan)
    assert depth == 3 and per_layer == [2]
    assert counts["mul_plain"] == 4 * 3 + 2 * 4 * 2  # conv: 4 nodes x 3 neighbours; head: 2 classes x 4 nodes x powers t, t^2
    assert counts["mul"] == 4  # one square per node
    # one kept ReLU of degree 4: t^2, t^3 = t^2 t, t^4 = t^2 t^2 -> 2 levels at that node, 3 ct x ct
    plan, _ = _tiny(kept=1, relu_degree=4)
    depth, counts, _ = depth_and_counts(plan)
    assert depth == 4 and counts["mul"] == 3 + 3
    assert depth_and_counts(_tiny(kept=1, relu_degree=8)[0])[0] == 5  # t^8 needs 3 squarings
    assert depth_and_counts(_tiny(kept=0, layers=2)[0])[0] == 5
    assert structural_depth(2, [False, True], 2, 4) == 6 and structural_depth(2, [False, False], 2, 4) == 5


def test_plan_equals_the_torch_model_when_no_relu_is_kept() -> None:
    """The fused, rescaled plan computes exactly the torch GatedGCN (all polynomial nodes): a reference check of the fusion."""
    plan, (adj, coords, convs, coef, mask, head) = _tiny(kept=0, layers=2)
    model = GatedGCN(adj, coords, [1, 1], 2, poly_degree=2, mode="gated").double()
    with torch.no_grad():
        for conv, (w, b) in zip(model.convs, convs, strict=True):
            conv.weight.copy_(torch.tensor(w.T))
            conv.bias.copy_(torch.tensor(b))
        model.coef.copy_(torch.tensor(coef))
        model.mask.copy_(torch.tensor(mask))
        model.head.weight.copy_(torch.tensor(head[0].T))
        model.head.bias.copy_(torch.tensor(head[1]))
        x = np.random.default_rng(1).uniform(0, 1, (7, 4))
        want = model(torch.tensor(x)).numpy()
    assert np.allclose(plain_logits(plan, x), want, atol=1e-9)


def test_encrypted_forward_matches_plaintext_and_uses_exactly_the_depth() -> None:
    plan, _ = _tiny(kept=1, relu_degree=4)
    x = np.random.default_rng(2).uniform(0, 1, (5, 4))
    run = encrypted_forward(plan, x)
    assert run.depth == 4 and run.levels_used == 4
    assert run.max_abs_error < 1e-2  # scale 2^28
    assert np.array_equal(run.logits.argmax(1), run.reference.argmax(1))


def test_one_level_short_fails_in_our_check_and_in_seal() -> None:
    plan, _ = _tiny(kept=1, relu_degree=4)  # depth 4
    short = HEParams(8192, (35, 28, 28, 28, 35))
    with pytest.raises(UserInputError, match=r"raise the length of coeff_mod_bit_sizes to 6"):
        encrypted_forward(plan, np.zeros((1, 4)), short)
    be = TenSEALBackend(short)  # bypassing our check: SEAL runs out of chain, so the analytic depth is tight
    with pytest.raises(ValueError):
        evaluate(plan, be, [be.encrypt(np.full(2, 0.5)) for _ in range(4)])


def test_parameter_errors_name_what_to_raise() -> None:
    assert params_for_depth(5).poly_modulus_degree == 8192  # 35 + 5 * 28 + 35 = 210 <= 218
    assert params_for_depth(6).poly_modulus_degree == 16384  # 238 > 218
    with pytest.raises(UserInputError, match="raise poly_modulus_degree to 16384"):
        HEParams(8192, (40, 30, 30, 30, 30, 30, 40)).check(5)  # 230 bits > 218
    with pytest.raises(UserInputError, match="poly_modulus_degree must be one of"):
        HEParams(1000, (30, 30)).check(0)
    with pytest.raises(UserInputError, match="coeff_mod_bit_sizes"):
        HEParams(8192, (35, 28, 35)).check(2)


def test_recipe_errors() -> None:
    with pytest.raises(UserInputError, match="one fraction per layer"):
        Recipe(hidden=(4, 4), keep=(0.5,)).check()
    with pytest.raises(UserInputError, match="poly_degree"):
        Recipe(poly_degree=5).check()


def test_training_hardens_to_the_keep_fraction_and_caches() -> None:
    recipe = Recipe(dataset="digits-grid4", hidden=(2, 2), keep=(0.25, 0.5), teacher_epochs=2, epochs=3)
    trained = train(recipe)
    assert trained.model.mask.sum(dim=1).tolist() == [4, 8]
    again = train(recipe)  # from the cache
    assert again.val_accuracy == trained.val_accuracy and torch.equal(again.model.mask, trained.model.mask)
    base = train(Recipe(dataset="digits-grid4", hidden=(2, 2), keep=(0.0, 0.0), teacher_epochs=2, epochs=3))
    assert base.model.mask.sum() == 0
