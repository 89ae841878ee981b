"""sim.he (LinGCN): structured indicators, linear nodes that really remove levels, plan vs torch, distillation, CKKS."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from coevo.sim.errors import UserInputError
from coevo.sim.he.ckks import (
    MAX_SCALE_BITS,
    SEAL_MAX_BITS,
    HEParams,
    LevelBackend,
    TenSEALBackend,
    compile_plan,
    depth_and_counts,
    encrypted_forward,
    evaluate,
    params_for_depth,
    plain_logits,
)
from coevo.sim.he.data import GraphData, grid_adjacency, grid_coords, load_dataset
from coevo.sim.he.model import LinGCN, Recipe, StructuredSTE, Trained, harden, structured_mask, train
from coevo.sim.he.run import he_gcn, plan_of, structural_depth


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
    big = load_dataset("digits-grid16")
    assert big.adj.shape == (256, 256) and np.array_equal(big.y["test"], d.y["test"])
    # every pixel (r, c) of the 8x8 image becomes the 4 nodes (2r + a, 2c + b) of the 16x16 grid
    img, up = d.x["test"][5].reshape(8, 8), big.x["test"][5].reshape(16, 16)
    assert all(up[2 * r + a, 2 * c + b] == img[r, c] for r in range(8) for c in range(8) for a in (0, 1) for b in (0, 1))
    with pytest.raises(UserInputError, match="digits-grid"):
        load_dataset("cora")
    with pytest.raises(UserInputError, match="4 or 8"):
        grid_adjacency(2, 2, 6)


def test_structured_mask_by_hand() -> None:
    # 2 nodes. block 0: node 0 (2, -1), node 1 (-3, 0.5): sorted per node (2, -1), (0.5, -3); S = (2.5, -4) -> k = 1,
    # node 0 keeps position 0, node 1 position 1. block 1: S = (1.2, 0.4) -> k = 2. block 2: S = (-0.9, -2.5) -> k = 0.
    aux = torch.tensor(
        [
            [[2.0, -3.0], [-1.0, 0.5]],
            [[1.0, 0.2], [0.5, -0.1]],
            [[-1.0, -0.5], [-2.0, 0.1]],
        ]
    )  # (blocks, positions, nodes)
    want = torch.tensor([[[1.0, 0.0], [0.0, 1.0]], [[1.0, 1.0], [1.0, 1.0]], [[0.0, 0.0], [0.0, 0.0]]])
    assert torch.equal(structured_mask(aux), want)


def test_structured_ste_same_count_per_node_and_softplus_gradient() -> None:
    shift = np.array([2.0, 0.0, -2.0, 0.5])[:, None, None]  # per-block offsets: blocks with k_l = 2, 1, 0
    draw = np.random.default_rng(0).normal(0.0, 1.0, size=(4, 2, 32)) + shift
    aux = torch.tensor(draw, dtype=torch.float32, requires_grad=True)
    mask = StructuredSTE.apply(aux)
    counts = mask.sum(dim=1)  # (blocks, nodes): positions kept per node
    s = torch.sort(aux.detach(), dim=1, descending=True).values.sum(dim=2)
    for block in range(4):
        assert set(counts[block].tolist()) == {float((s[block] > 0).sum())}  # every node keeps k_l = #{r: S[l, r] > 0}
    assert len({int(k) for k in counts[:, 0]}) > 1  # the draw has blocks with different k_l
    g = torch.tensor(np.random.default_rng(1).normal(size=(4, 2, 32)), dtype=torch.float32)
    (mask * g).sum().backward()
    assert aux.grad is not None
    assert torch.allclose(aux.grad, g * torch.log1p(torch.exp(aux.detach())))


def test_harden_keeps_exactly_the_budget_rows_by_largest_rank_sum() -> None:
    aux = torch.tensor(np.random.default_rng(2).normal(size=(3, 2, 16)), dtype=torch.float32)
    s = torch.sort(aux, dim=1, descending=True).values.sum(dim=2)  # (blocks, ranks)
    for rows in range(7):
        mask = harden(aux, rows)
        k = mask.sum(dim=1)  # (blocks, nodes)
        assert all(len(set(k[b].tolist())) == 1 for b in range(3))  # the same count for every node of a block
        assert int(k[:, 0].sum()) == rows
        chosen = sorted(float(s[b, r]) for b in range(3) for r in range(int(k[b, 0])))
        assert chosen == sorted(s.flatten().tolist(), reverse=True)[:rows][::-1]
        # each node keeps its own top-k positions: a kept position's aux is >= a removed one's at the same node
        kept_min = torch.where(mask > 0, aux, torch.full_like(aux, np.inf)).min(dim=1).values
        removed_max = torch.where(mask > 0, torch.full_like(aux, -np.inf), aux).max(dim=1).values
        assert bool((kept_min >= removed_max).all())
    with pytest.raises(UserInputError, match=r"\[0, 6\], got 7"):
        harden(aux, 7)


def _two_node_plan(kept: list[list[int]]):  # type: ignore[no-untyped-def]
    """One block on the 2-node graph (A_hat = 1/2 everywhere), 1 channel, flatten head with 2 classes."""
    rng = np.random.default_rng(0)
    adj, coords = grid_adjacency(1, 2), grid_coords(1, 2)
    linears = [(rng.uniform(0.5, 1.0, (3, 1)), np.array([0.1]), True), (rng.uniform(0.5, 1.0, (1, 1)), np.array([0.2]), False)]
    coef = rng.uniform(0.2, 0.6, (2, 2, 3))
    head = (rng.uniform(0.5, 1.0, (2, 2)), np.array([0.1, -0.1]))
    return compile_plan(adj, coords, linears, coef, np.array(kept, dtype=float), [2.0, 2.0], head, "flatten")


def test_a_linear_node_really_removes_levels_two_node_graph() -> None:
    # mask rows: position 0 (after the graph conv), position 1 (after the node-wise linear); columns: nodes 0, 1.
    # All kept: per node t (lincomb, level 1), t^2 (2), then t (3), t^2 (4); head (5).
    # ops: layer 0 two lincombs of the 2 inputs (4 pt x ct), layer 1 two lincombs of {t, t^2} (4), head 2 classes x
    # 2 nodes x {t, t^2} (8): 16 pt x ct; 4 squares.
    depth, counts, levels = depth_and_counts(_two_node_plan([[1, 1], [1, 1]]))
    assert (depth, counts["mul_plain"], counts["mul"], levels) == (5, 16, 4, [2, 4])
    # Structured, one kept per node (node 0 at position 0, node 1 at position 1): every path meets one square.
    # Layer 0: node 0 materialises t from x0, x1 (2 pt x ct) and t^2; node 1 stays lazy (x0, x1). Layer 1: node 0 is
    # linear (lazy in t0, t0^2); node 1 materialises t from its lazy x0, x1 (2 pt x ct) and t^2. Head: 2 x 4 terms.
    depth, counts, levels = depth_and_counts(_two_node_plan([[1, 0], [0, 1]]))
    assert (depth, counts["mul_plain"], counts["mul"], levels) == (3, 12, 2, [2, 2])
    # Unstructured: node 1 linear at position 0 but node 0 keeps both: the mixed graph conv of the next layer (here:
    # the head) still meets node 0's path of two squares, so nothing is saved in depth.
    assert depth_and_counts(_two_node_plan([[1, 0], [1, 1]]))[0] == 5
    # Everything linear: the whole block fuses into the head's combination of the two inputs: 2 x 2 pt x ct, depth 1.
    depth, counts, levels = depth_and_counts(_two_node_plan([[0, 0], [0, 0]]))
    assert (depth, counts["mul_plain"], counts["mul"], levels) == (1, 4, 0, [0, 0])
    assert [structural_depth([k]) for k in (2, 1, 0)] == [5, 3, 1]


def test_linear_node_fuses_and_real_ckks_consumes_the_counted_levels() -> None:
    plan = _two_node_plan([[1, 0], [0, 1]])
    x = np.random.default_rng(3).uniform(0, 1, (3, 2))
    run = encrypted_forward(plan, x)
    assert run.depth == 3 and run.levels_used == 3
    assert run.max_abs_error < 1e-2


def _random_model(hidden: tuple[int, ...], side: int = 2, seed: int = 0) -> tuple[LinGCN, GraphData]:
    torch.manual_seed(seed)
    adj, coords = grid_adjacency(side, side), grid_coords(side, side)
    n = side * side
    model = LinGCN(adj, coords, hidden, 3, "poly").double()
    with torch.no_grad():
        model.coef.copy_(torch.tensor(np.random.default_rng(seed).uniform(-0.5, 0.5, (len(hidden), 2, n, 3))))
        model.aux.copy_(torch.tensor(np.random.default_rng(seed + 1).normal(size=(len(hidden), 2, n))))
        model.mask.copy_(harden(model.aux, len(hidden)))  # half the rows kept, positions differing between nodes
    data = GraphData(adj, coords, {}, {}, 3)
    return model, data


def test_compiled_plan_equals_the_torch_model() -> None:
    """Plaintext evaluation of the compiled, fused, lazily linear plan computes exactly the torch student's logits."""
    model, data = _random_model((2, 3), side=3)
    assert len({tuple(model.mask[b, :, i].tolist()) for b in range(2) for i in range(9)}) > 1  # mixed positions
    x = torch.tensor(np.random.default_rng(4).uniform(0, 1, (7, 9)))
    pre: list[torch.Tensor] = []
    with torch.no_grad():
        want = model(x, pre).numpy()
    trained = Trained(Recipe(hidden=(2, 3)), model, data, 0.0, 0.0, [float(z.abs().max()) for z in pre])
    plan = plan_of(trained)
    assert np.allclose(plain_logits(plan, x.numpy()), want, atol=1e-9)
    depth, _, _ = depth_and_counts(plan)
    assert depth == structural_depth([int(model.mask[b, :, 0].sum()) for b in range(2)]) == 1 + 2 * 2


def test_one_level_short_fails_in_our_check_and_in_seal() -> None:
    plan = _two_node_plan([[1, 1], [1, 1]])  # depth 5
    short = HEParams(8192, (35, 28, 28, 28, 28, 35))
    with pytest.raises(UserInputError, match=r"needs multiplicative depth 5 .* raise the length of coeff_mod_bit_sizes to 7"):
        encrypted_forward(plan, np.zeros((1, 2)), short)
    be = TenSEALBackend(short)  # bypassing our check: SEAL runs out of chain, so the analytic depth is tight
    with pytest.raises(ValueError):
        evaluate(plan, be, [be.encrypt(np.full(2, 0.5)) for _ in range(2)])
    assert LevelBackend().mul(2, 3) == 4


def test_parameter_errors_name_what_to_raise() -> None:
    assert params_for_depth(5).poly_modulus_degree == 8192  # 35 + 5 * 28 + 35 = 210 <= 218
    assert params_for_depth(6).poly_modulus_degree == 16384  # 238 > 218
    with pytest.raises(UserInputError, match="raise poly_modulus_degree to 16384"):
        HEParams(8192, (40, 30, 30, 30, 30, 30, 40)).check(5)  # 230 bits > 218
    with pytest.raises(UserInputError, match="poly_modulus_degree must be one of"):
        HEParams(1000, (30, 30)).check(0)


def test_the_scale_fills_the_ring_without_growing_it_and_cuts_the_error() -> None:
    for depth in range(1, 13):  # (depth 0 has no middle prime: scale_bits reads the outer one)
        filled, bare = params_for_depth(depth), params_for_depth(depth, fill=False)
        assert filled.poly_modulus_degree == bare.poly_modulus_degree  # same ring: the pass costs the same
        assert filled.levels == bare.levels == depth and filled.total_bits <= SEAL_MAX_BITS[filled.poly_modulus_degree]
        assert 28 <= filled.scale_bits <= MAX_SCALE_BITS
    # depth 9 at 28 bits needs N=16384 (35 + 9 * 28 + 35 = 322 <= 438); filled: 11 s + 14 <= 438 gives s = 38.
    assert params_for_depth(9).coeff_mod_bit_sizes == (45, *([38] * 9), 45)
    plan = _two_node_plan([[1, 1], [1, 1]])  # depth 5: N=8192 at 28 bits; filled, 7 s + 14 <= 218 gives s = 29
    x = np.random.default_rng(1).uniform(-1, 1, (4, 2))
    bare_err = encrypted_forward(plan, x, params_for_depth(5, fill=False)).max_abs_error
    plan16 = params_for_depth(5, poly_modulus_degree=16384)  # the larger ring's room: s = 40
    assert plan16.scale_bits == 40
    assert encrypted_forward(plan, x, plan16).max_abs_error < bare_err / 50  # 12 more bits of scale: ~4000x less noise


def test_budget_outside_unit_interval_is_a_user_input_error() -> None:
    for bad in (-0.25, 1.5):
        with pytest.raises(UserInputError, match=rf"budget .*must lie in \[0, 1\], got {bad}"):
            Recipe(budget=bad).check()
        with pytest.raises(UserInputError, match="budget"):
            train(Recipe(dataset="digits-grid4", hidden=(1,), budget=bad, teacher_epochs=1, epochs=0))
    assert Recipe(hidden=(4, 4), budget=0.75).kept_rows == 3 and Recipe(hidden=(4, 4, 4), budget=0.5).kept_rows == 3


TINY = {"dataset": "digits-grid4", "hidden": (2, 2), "teacher_epochs": 2, "epochs": 3}


def test_training_hardens_to_the_budget_and_caches() -> None:
    trained = train(Recipe(budget=0.5, **TINY))
    assert sum(trained.kept_per_block()) == 2  # round(0.5 * 2 * 2) rows
    assert all(len(set(trained.model.mask[b].sum(dim=0).tolist())) == 1 for b in range(2))
    again = train(Recipe(budget=0.5, **TINY))  # from the cache
    assert again.val_accuracy == trained.val_accuracy and torch.equal(again.model.mask, trained.model.mask)
    base = train(Recipe(budget=1.0, **TINY))
    assert bool((base.model.mask == 1).all())


def test_feature_distillation_changes_training() -> None:
    # same seed, data, teacher and schedule: only beta differs; without beta's term the runs would be bit-identical
    runs = [train(Recipe(budget=0.5, feature_distill=beta, **TINY), rebuild=True) for beta in (1.0, 1.0, 0.0)]
    w = [torch.cat([p.detach().flatten() for p in r.model.parameters()]) for r in runs]
    assert torch.equal(w[0], w[1])  # deterministic: the difference below is beta's
    assert not torch.allclose(w[0], w[2])


def test_tiny_encrypted_run_agrees_with_plaintext_and_uses_exactly_the_depth() -> None:
    r = he_gcn(Recipe(dataset="digits-grid4", hidden=(2,), budget=0.5, teacher_epochs=2, epochs=3), encrypted_samples=4, predict=False)
    assert r.kept_per_block == [1]
    assert r.depth == structural_depth(r.kept_per_block) == 3 == r.levels_used
    assert r.encrypted_agreement == 100.0 and r.max_abs_error is not None and r.max_abs_error < 0.05
    assert r.params.poly_modulus_degree == 8192  # 35 + 3 * 28 + 35 = 154 bits: over 4096's 109, within 8192's 218
