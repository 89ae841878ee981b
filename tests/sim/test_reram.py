"""sim.reram: bit-slicing, hand-built faulty crossbars, votes, spare repair, budgets, conv via im2col, bad input."""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from torch import nn

from coevo.sim.errors import UserInputError
from coevo.sim.reram import (
    OK,
    SA0,
    SA1,
    CrossbarConfig,
    CrossbarLayer,
    Protection,
    check_budget,
    check_rate,
    crossbars_needed,
    faulty_model,
    harmful,
    layout_area,
    parse_ratio,
    plan_layer,
    plan_model,
    prune_masks,
    pruned_model,
    quantize_magnitudes,
    realise,
    repair_with_spares,
    sample_faults,
    slice_levels,
    unslice,
)

RNG = np.random.default_rng(0)


def test_slicing_by_hand() -> None:
    q = np.array([0, 5, 255, 100])
    # 5 = 1 + 1*4; 255 = 3+3*4+3*16+3*64; 100 = 0 + 1*4 + 2*16 + 1*64
    assert slice_levels(q, 2, 4).tolist() == [[0, 0, 0, 0], [1, 1, 0, 0], [3, 3, 3, 3], [0, 1, 2, 1]]
    assert slice_levels(np.array([6]), 1, 3).tolist() == [[0, 1, 1]]
    assert unslice(slice_levels(q, 2, 4), 2).tolist() == q.tolist()
    with pytest.raises(ValueError):
        slice_levels(np.array([256]), 2, 4)


def test_quantize_magnitudes_by_hand() -> None:
    pos, neg, scale = quantize_magnitudes(np.array([[0.5, -0.25], [0.0, 1.0]]), 2)
    assert scale == pytest.approx(1 / 3)  # max |w| = 1 over 2**2 - 1 levels
    assert pos.tolist() == [[2, 0], [0, 3]]  # 0.5*3 = 1.5 -> 2 (round half to even), 1.0*3 = 3
    assert neg.tolist() == [[0, 1], [0, 0]]  # 0.25*3 = 0.75 -> 1


def test_config_geometry_and_conductance() -> None:
    cfg = CrossbarConfig(rows=128, cols=128, weight_bits=8, bits_per_cell=3)
    assert cfg.levels == 8 and cfg.slices == 3  # ceil(8 / 3)
    assert cfg.conductance(np.array([0, 7])).tolist() == [1.0, 100.0]


def _tiny(msb: int = 0) -> tuple:
    """W [out=2, in=2] = [[15, -5], [0, 10]] on 2x4 crossbars, 4-bit weights, 2 bits per cell."""
    cfg = CrossbarConfig(rows=2, cols=4, weight_bits=4, bits_per_cell=2)
    w = np.array([[15.0, -5.0], [0.0, 10.0]])
    return cfg, w, plan_layer("fc", w, None, cfg, msb=msb)


def test_hand_built_faults_give_hand_derived_weights() -> None:
    cfg, _, plan = _tiny()
    assert plan.scale == 1.0 and plan.width == 4 and plan.height == 2
    # bitline of (column j, slice s) = 2j + s; rows are inputs.  pos: w00=15 -> [3,3]; w11=10 -> [2,2]; neg: w01=-5 -> [1,1]
    grid, used = plan.written(np.array([0, 1]))
    assert grid[0].tolist() == [[3, 3, 0, 0], [0, 0, 2, 2]]
    assert grid[1].tolist() == [[0, 0, 0, 0], [1, 1, 0, 0]]
    assert used.all()
    faults = np.zeros((2, 2, 4), dtype=np.int8)
    faults[0, 1, 3] = SA1  # w11's MSB reads 3: 2 + 3*4 = 14
    faults[1, 1, 0] = SA0  # w01's LSB (negative array) reads 0: -(0 + 1*4) = -4
    faults[0, 0, 1] = SA0  # w00's MSB reads 0: 3 + 0 = 3
    fl = realise(plan, RNG, 0.0, 0.9, faults=faults)
    assert fl.effective_weight().tolist() == [[3.0, -4.0], [0.0, 14.0]]
    x = torch.tensor([[1.0, 2.0], [-0.5, 3.0]], dtype=torch.float64)
    for per_bitline in (True, False):
        assert torch.allclose(fl.matmul(x, per_bitline), x @ torch.tensor([[3.0, -4.0], [0.0, 14.0]], dtype=torch.float64).T)
    # the same outputs from conductances: the differential current over (g_max - g_min) / (levels - 1)
    g = [torch.as_tensor(cfg.conductance(fl.read[a])) for a in (0, 1)]
    step = (cfg.g_max_us - cfg.g_min_us) / (cfg.levels - 1)
    currents = (x @ g[0] - x @ g[1]) / step  # [N, bitlines]; g_min cancels in the pair
    assert torch.allclose(currents[:, 0::2] + 4 * currents[:, 1::2], x @ torch.tensor([[3.0, -4.0], [0.0, 14.0]], dtype=torch.float64).T)


def test_fault_free_crossbars_compute_the_quantized_weights() -> None:
    cfg = CrossbarConfig(rows=16, cols=16, weight_bits=6, bits_per_cell=2)
    w = np.random.default_rng(1).normal(size=(10, 37))
    plan = plan_layer("fc", w, None, cfg)
    fl = realise(plan, RNG, 0.0, 0.5)
    assert np.array_equal(fl.effective_weight(), plan.quantized_weight)
    assert np.abs(plan.quantized_weight - w).max() <= plan.scale / 2 + 1e-12  # round to nearest
    assert plan.scale == pytest.approx(np.abs(w).max() / 63)


def test_msb_copy_is_chosen_with_known_maps_and_voted_without() -> None:
    cfg, w, plan = _tiny(msb=1)
    # 2-bit values, scale 15/3 = 5: q = [[3, 1], [0, 2]]; each column copy = [value slice, its MSB copy]
    assert plan.value_slices == 1 and plan.scale == 5.0
    assert np.array_equal(plan.quantized_weight, [[15.0, -5.0], [0.0, 10.0]])
    faults = np.zeros((2, 2, 4), dtype=np.int8)
    faults[0, 0, 2] = SA1  # column 1's cell for input 0 (holds 0) sticks at 3: it would read w10 = 15
    known = realise(plan, RNG, 0.0, 0.9, knowledge="known", faults=faults)
    assert np.array_equal(known.effective_weight(), plan.quantized_weight)  # the copy on bitline 3 is read instead
    unknown = realise(plan, RNG, 0.0, 0.9, knowledge="unknown", faults=faults)
    x = torch.tensor([[1.0, 0.5], [2.0, 0.0]], dtype=torch.float64)  # non-negative inputs: the smaller sum is the clean one
    assert torch.allclose(unknown.matmul(x), x @ torch.as_tensor(plan.quantized_weight).T)
    assert not torch.allclose(
        realise(plan_layer("fc", w, None, cfg), RNG, 0.0, 0.9, faults=faults).matmul(x), x @ torch.as_tensor(w).T
    )  # without the MSB copy the fault shows


def test_three_copies_outvote_one_faulty_copy_per_bitline() -> None:
    cfg = CrossbarConfig(rows=2, cols=8, weight_bits=4, bits_per_cell=2)
    w = np.array(
        [[7.0, -15.0]]
    )  # scale 1: w0 = 3 + 1*4 (positive array), w1 = 3 + 3*4 (negative); one output: 2 bitlines per copy, 4 copy slots in the 8 bitlines
    plan = plan_layer("fc", w, None, cfg, dup=True)
    assert plan.capacity == 4
    faults = np.zeros((2, 2, 8), dtype=np.int8)
    faults[0, 0, 1] = SA1  # original copy, MSB of w0
    faults[1, 1, 2] = SA0  # second copy, LSB of w1 (negative array): another bitline, so every vote still has 2 of 3 clean
    fl = realise(plan, RNG, 0.0, 0.9, knowledge="unknown", faults=faults)
    assert fl.copies.tolist() == [0, 0, 0, -1]  # a vote of three
    x = torch.tensor([[1.0, 1.0], [-2.0, 0.5]], dtype=torch.float64)
    assert torch.allclose(fl.matmul(x), x @ torch.as_tensor(plan.quantized_weight).T)
    assert fl.crossbars == 2
    known = realise(plan, RNG, 0.0, 0.9, knowledge="known", faults=faults)
    assert known.copies.tolist() == [0, 0, 0, 0]  # the only hurt column gets every free slot
    assert np.array_equal(known.effective_weight(), plan.quantized_weight)


def test_known_choice_never_reads_a_worse_bitline_than_the_original() -> None:
    cfg = CrossbarConfig(rows=8, cols=16, weight_bits=8, bits_per_cell=2)
    w = np.random.default_rng(2).normal(size=(6, 20))
    plan = plan_layer("fc", w, None, cfg, rows_kept=np.arange(1, 20), cols_kept=np.arange(5), msb=1, dup=True)
    for seed in range(5):
        fl = realise(plan, np.random.default_rng(seed), 0.1, 0.5)
        written, _ = plan.written(fl.copies)
        k = len(plan.rows_kept)
        err = ((fl.read[:, :k] - written[:, :k]) ** 2).sum(axis=1)
        for a in (0, 1):
            for j in range(5):
                for s in range(plan.value_slices):
                    assert err[a, fl.choice[a, j, s]] <= err[a, plan.bitline(j, s)]


def test_spare_rows_replace_a_faulty_row() -> None:
    cfg = CrossbarConfig(rows=4, cols=4, weight_bits=4, bits_per_cell=2)
    w = np.arange(1.0, 9.0).reshape(2, 4)  # 2 outputs x 4 inputs, positive
    plan = plan_layer("fc", w, None, cfg)
    faults = np.zeros((2, 4, 4), dtype=np.int8)
    faults[0, 2, :] = SA0  # input 2's whole row in the positive array
    bad = realise(plan, RNG, 0.0, 0.9, faults=faults)
    assert not np.array_equal(bad.effective_weight(), plan.quantized_weight)
    fixed = realise(plan, RNG, 0.0, 0.9, spare_rows=1, faults=faults)  # rate 0: the spare row itself is clean
    assert np.array_equal(fixed.effective_weight(), plan.quantized_weight)
    # the greedy repair takes the line with most harmful faults: a column of 3 beats a row of 2
    written, used = plan.written(np.array([0, 1]))
    f2 = np.zeros((2, 4, 4), dtype=np.int8)
    f2[0, 0:3, 1] = SA1  # column 1 holds 0, 1, 1 there: 3 harmful; row 3 holds 3, 3 where SA0 sticks: 2 harmful
    f2[0, 3, 2:4] = SA0
    out = repair_with_spares(f2, written, used, cfg, RNG, 0.0, 0.5, 0, 1)
    assert (out[0, :, 1] == OK).all() and (out[0, 3, 2:4] == SA0).all()
    assert harmful(written, out, 3, used).sum() == harmful(written, f2, 3, used).sum() - 3


def test_fault_rate_and_ratio_are_sampled_as_asked() -> None:
    n = 400_000
    f = sample_faults(np.random.default_rng(5), (n,), 0.02, 0.9)
    faulty = int((f != OK).sum())
    assert abs(faulty - 0.02 * n) < 5 * math.sqrt(n * 0.02 * 0.98)
    sa0 = int((f == SA0).sum())
    assert abs(sa0 - 0.9 * faulty) < 5 * math.sqrt(faulty * 0.09)
    assert (f == SA1).sum() == faulty - sa0


def test_crossbar_counts_by_hand_and_the_budget_message() -> None:
    cfg = CrossbarConfig()  # 64x64, 8 bits, 2 per cell: 4 slices
    model = nn.Sequential(nn.Linear(100, 30), nn.ReLU(), nn.Conv2d(3, 8, 3))
    # Linear: ceil(100/64)=2 row tiles x ceil(30*4/64)=2 column tiles, 2 arrays -> 8; Conv2d: im2col 27 rows, 32 bitlines -> 2
    assert crossbars_needed(model, cfg) == 10
    assert check_budget(model, cfg, 10) == 10
    with pytest.raises(UserInputError, match=r"needs 10 crossbars.*budget is 6: 4 more than available \(1.67x"):
        check_budget(model, cfg, 6)


def test_pruning_removes_the_smallest_lines_and_frees_column_slots() -> None:
    lin1, lin2 = nn.Linear(4, 5), nn.Linear(5, 2)
    with torch.no_grad():
        lin1.weight.copy_(torch.tensor([[1.0, 0.1, 2, 2], [1, 0.1, 2, 2], [0.01, 0.0, 0.0, 0.0], [1, 0.1, 2, 2], [1, 0.1, 2, 2]]))
    model = nn.Sequential(lin1, nn.ReLU(), lin2)
    masks = prune_masks(model, 0.25, 0.2)
    assert masks["0"][0].tolist() == [0, 2, 3]  # input 1 has the smallest column norm
    assert masks["0"][1].tolist() == [0, 1, 3, 4]  # output 2 has the smallest row norm
    assert len(masks["2"][1]) == 2  # the last layer keeps its outputs
    pm, masks = pruned_model(model, Protection(prune_rows=0.25, prune_cols=0.2, prune_method="l2"))
    assert float(pm[0].weight[2].detach().abs().sum()) == 0 and float(pm[0].weight[:, 1].detach().abs().sum()) == 0
    assert float(pm[0].bias[2].detach()) == 0
    cfg = CrossbarConfig(rows=4, cols=4, weight_bits=4, bits_per_cell=2)
    plan = plan_model(pm, cfg, Protection(prune_rows=0.25, prune_cols=0.2, dup=True), masks)
    first = plan.layers[0]
    assert first.budget == 3 and first.capacity == 6 and len(first.cols_kept) == 4  # 5 outputs x 2 slices -> 3 crossbars, 2 free slots


def test_conv_through_im2col_matches_conv2d_with_effective_weights() -> None:
    torch.manual_seed(0)
    conv = nn.Conv2d(3, 5, 3, stride=2, padding=1)
    model = nn.Sequential(conv)
    cfg = CrossbarConfig(rows=16, cols=16, weight_bits=6, bits_per_cell=2)
    plan = plan_model(model, cfg, Protection())
    fm, layers = faulty_model(plan, 0.05, 0.5, seed=3)
    assert isinstance(fm[0], CrossbarLayer)
    x2 = torch.randn(4, 27, dtype=torch.float64)
    assert torch.allclose(layers[0].matmul(x2, per_bitline=True), layers[0].matmul(x2))  # bitline by bitline = dense
    w = torch.as_tensor(layers[0].effective_weight(), dtype=torch.float32).view_as(conv.weight)
    x = torch.randn(2, 3, 9, 9)
    assert torch.allclose(fm(x), F.conv2d(x, w, conv.bias, stride=2, padding=1), atol=1e-5)
    assert not torch.allclose(w, conv.weight, atol=plan.layers[0].scale)  # 5 % faults did change weights


def test_zero_fault_model_equals_the_quantized_model_and_faults_hurt() -> None:
    torch.manual_seed(1)
    model = nn.Sequential(nn.Linear(12, 20), nn.ReLU(), nn.Linear(20, 3))
    cfg = CrossbarConfig(rows=8, cols=8)
    plan = plan_model(model, cfg, Protection(msb=1))
    x = torch.randn(7, 12)
    clean, _ = faulty_model(plan, 0.0, 0.9, seed=0)
    assert torch.allclose(clean(x), plan.quantized_model()(x), atol=1e-5)
    broken, _ = faulty_model(plan, 0.3, 0.1, seed=0)
    assert not torch.allclose(broken(x), clean(x), atol=1e-3)
    again, _ = faulty_model(plan, 0.3, 0.1, seed=0)
    assert torch.equal(broken(x), again(x))  # a seed is one fault map


def test_bad_input_is_refused_with_advice() -> None:
    for rate in (-0.01, 1.5, float("nan")):
        with pytest.raises(UserInputError, match="between 0 and 1"):
            check_rate(rate)
    assert parse_ratio("9:1") == 0.9 and parse_ratio(" 1 : 3 ") == 0.25 and parse_ratio("0:1") == 0.0
    for text in ("9-1", "a:b", "-1:2", "9:1:1", ""):
        with pytest.raises(UserInputError, match="SA0:SA1"):
            parse_ratio(text)
    with pytest.raises(UserInputError, match="both parts are zero"):
        parse_ratio("0:0")
    with pytest.raises(UserInputError, match="unknown part 'tmr'"):
        Protection.parse("prune+tmr")
    with pytest.raises(UserInputError, match="does not name 'msb'"):
        Protection.parse("dup", msb=2)
    with pytest.raises(UserInputError, match="knowledge='known'"):
        Protection.parse("spare", knowledge="unknown")
    with pytest.raises(UserInputError, match="prune_rows"):
        Protection(prune_rows=1.0)
    with pytest.raises(UserInputError, match="bits_per_cell"):
        CrossbarConfig(weight_bits=8, bits_per_cell=5)
    with pytest.raises(UserInputError, match="layer 0: msb=3"):
        plan_model(nn.Sequential(nn.Linear(2, 2)), CrossbarConfig(), Protection(msb=3))
    assert Protection.parse("prune+dup+msb") == Protection(0.1, 0.1, True, 1)
    with pytest.raises(UserInputError, match="prune_method='magnitude'"):
        Protection(prune_method="magnitude")
    with pytest.raises(UserInputError, match=r"finetune_epochs=0: learned pruning trains"):
        pruned_model(nn.Sequential(nn.Linear(4, 4), nn.Linear(4, 2)), Protection(prune_rows=0.25))


def _toy_task(seed: int = 0) -> tuple[nn.Module, Callable[[int], list[tuple[torch.Tensor, torch.Tensor]]], Callable[..., torch.Tensor]]:
    """A 6-8-3 MLP whose input 0 is always 0 in the data but has the largest weights, and whose input 5 alone carries the label.

    Magnitude pruning of one input row drops the informative input (the smallest weights); a
    pruning that looks at the loss keeps it.
    """
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(192, 6, generator=g)
    x[:, 0] = 0.0
    y = (x[:, 5] > 0.5).long() + (x[:, 5] > -0.5).long()  # 3 classes from input 5 alone
    torch.manual_seed(seed)
    model = nn.Sequential(nn.Linear(6, 8), nn.ReLU(), nn.Linear(8, 3))
    with torch.no_grad():
        model[0].weight[:, 0] *= 20.0  # the largest column norm, on a line the data never drive
        model[0].weight[:, 5] *= 0.05  # the smallest, on the informative line

    def batches(epoch: int) -> list[tuple[torch.Tensor, torch.Tensor]]:
        order = torch.randperm(len(x), generator=torch.Generator().manual_seed(100 + epoch))
        return [(x[order[i : i + 32]], y[order[i : i + 32]]) for i in range(0, len(x), 32)]

    def loss(m: nn.Module, xb: torch.Tensor, yb: torch.Tensor) -> torch.Tensor:
        return F.cross_entropy(m(xb), yb)

    return model, batches, loss


def test_every_scheme_gets_the_same_fine_tuning() -> None:
    model, batches, loss = _toy_task()
    seen: list[int] = []

    def counting(epoch: int) -> list[tuple[torch.Tensor, torch.Tensor]]:
        out = batches(epoch)
        seen.append(len(out))
        return out

    untouched = [p.detach().clone() for p in model.parameters()]
    none, _ = pruned_model(model, Protection(finetune_epochs=3), counting, loss, lr=1e-2)
    steps_none = sum(seen)
    seen.clear()
    pruned_model(model, Protection(prune_rows=0.2, prune_cols=0.25, finetune_epochs=3), counting, loss, lr=1e-2)
    assert steps_none == sum(seen) == 3 * 6  # 3 epochs of 6 batches each, pruned or not
    seen.clear()
    pruned_model(model, Protection(prune_rows=0.2, finetune_epochs=3, prune_method="l2"), counting, loss, lr=1e-2)
    assert sum(seen) == 3 * 6
    # the unprotected model was trained too (not handed back as it came), and the original is left alone
    assert any(not torch.equal(a, b) for a, b in zip(untouched, none.parameters(), strict=True))
    assert all(torch.equal(a, b) for a, b in zip(untouched, model.parameters(), strict=True))
    # the same seed and batches give the same fine-tuned model
    again, _ = pruned_model(model, Protection(finetune_epochs=3), batches, loss, lr=1e-2)
    assert all(torch.equal(a, b) for a, b in zip(none.parameters(), again.parameters(), strict=True))
    assert Protection(finetune_epochs=3).label == "none+ft3"
    assert Protection.parse("prune+dup", finetune_epochs=2, prune_method="l2").label == "prune(r0.1,c0.1,l2)+dup+ft2"


def test_learned_pruning_reaches_the_fraction_and_keeps_the_line_the_loss_needs() -> None:
    model, batches, loss = _toy_task()
    l2_model, l2_masks = pruned_model(model, Protection(prune_rows=1 / 6, finetune_epochs=6, prune_method="l2"), batches, loss, lr=1e-2)
    assert 5 not in l2_masks["0"][0]  # magnitude drops the informative input (its weights were scaled down)
    learned, masks = pruned_model(model, Protection(prune_rows=1 / 6, prune_cols=0.25, finetune_epochs=6), batches, loss, lr=1e-2)
    keep_r, keep_c = masks["0"]
    assert len(keep_r) == 5 and 5 in keep_r  # one of six inputs pruned, but not the informative one magnitude drops
    assert len(keep_c) == 6 and len(masks["2"][1]) == 3  # 25 % of 8 columns; the last layer keeps its classes
    assert len(masks["2"][0]) == 7  # floor(8 / 6) = 1 row of the second layer
    w = learned[0].weight.detach()
    pruned_row = [r for r in range(6) if r not in keep_r]
    assert float(w[:, pruned_row].abs().sum()) == 0.0 and w[[c for c in range(8) if c not in keep_c]].abs().sum() == 0
    assert float(learned[0].bias.detach()[[c for c in range(8) if c not in keep_c]].abs().sum()) == 0.0
    assert not any(hasattr(m, "parametrizations") for m in learned.modules())  # the masks are baked into plain weights
    xs = torch.cat([b[0] for b in batches(0)])
    ys = torch.cat([b[1] for b in batches(0)])
    with torch.no_grad():
        assert float(loss(learned, xs, ys)) < float(loss(l2_model, xs, ys))


@pytest.mark.parametrize(
    "protection",
    [
        Protection(finetune_epochs=2),
        Protection(prune_rows=0.5, prune_cols=0.5, finetune_epochs=2),  # learned
        Protection(prune_rows=0.5, prune_cols=0.5, dup=True, finetune_epochs=2),
        Protection(prune_rows=1 / 6, prune_cols=0.25, msb=1, spare_rows=1, spare_cols=2, finetune_epochs=2),
        Protection(prune_rows=0.5, prune_cols=0.5, dup=True, finetune_epochs=2, prune_method="l2"),
    ],
    ids=lambda p: p.label,
)
def test_the_area_of_a_layout_needs_no_training(protection: Protection) -> None:
    # the search's cheap objective: the area of the pruned, fine-tuned model's layout, from the line counts alone
    model, batches, loss = _toy_task()
    cfg = CrossbarConfig(rows=2, cols=4, weight_bits=4, bits_per_cell=2)  # small crossbars: pruning changes their count
    trained, masks = pruned_model(model, protection, batches, loss, lr=1e-2)
    area = plan_model(trained, cfg, protection, masks).area()
    assert layout_area(model, cfg, protection) == area
    if protection.prune_rows == 0.5 and not protection.dup:  # and the count moves with pruning (not a constant)
        assert area < plan_model(model, cfg, Protection()).area()


def test_the_vote_never_looks_at_the_fault_map() -> None:
    cfg = CrossbarConfig(rows=8, cols=16, weight_bits=8, bits_per_cell=2)
    w = np.random.default_rng(4).normal(size=(6, 20))
    plan = plan_layer("fc", w, None, cfg, rows_kept=np.arange(2, 20), cols_kept=np.arange(5), msb=1, dup=True)
    layouts = {tuple(realise(plan, np.random.default_rng(s), 0.1, 0.5, knowledge="unknown").copies) for s in range(6)}
    assert len(layouts) == 1  # the same copies whatever the map: chosen before any test, by weight norm
    (copies,) = layouts
    norms = np.linalg.norm(w[:5, 2:], axis=1)
    duplicated = [c for c in range(5) if copies.count(c) == 3]
    assert duplicated and min(norms[duplicated]) >= max(np.delete(norms, duplicated))  # the largest columns get the copies
    # each output is the vote of its copies' partial sums: two faulty copies of three on one bitline outvote the clean one
    faults = np.zeros((2, plan.height, plan.width), dtype=np.int8)
    slots = [i for i, c in enumerate(copies) if c == duplicated[0]]
    faults[0, 2, plan.bitline(slots[0], 0)] = SA1
    fl = realise(plan, RNG, 0.0, 0.5, knowledge="unknown", faults=faults)
    x = torch.rand(3, 20, dtype=torch.float64, generator=torch.Generator().manual_seed(0))
    assert torch.allclose(fl.matmul(x), x @ torch.as_tensor(plan.quantized_weight).T)  # one faulty copy is outvoted
    faults[0, 2, plan.bitline(slots[1], 0)] = SA1
    fl2 = realise(plan, RNG, 0.0, 0.5, knowledge="unknown", faults=faults)
    assert not torch.allclose(fl2.matmul(x), x @ torch.as_tensor(plan.quantized_weight).T)


def test_protection_reduces_the_accuracy_lost_to_faults_at_the_same_crossbars() -> None:
    """mlp-digits, 5 % stuck cells half SA1, 4 fault maps: the vote (no fault map) and the known-map choice both lose less."""
    from coevo.sim.reram import evaluate_under_faults, prepare
    from coevo.sim.zoo import load

    zm = load("mlp-digits")
    cfg = CrossbarConfig()

    def metric(m: nn.Module) -> float:
        return float(zm.evaluate(m, "val"))

    drops, bars = {}, {}
    for name, prot in {
        "none": Protection(finetune_epochs=2),
        "vote": Protection.parse("prune+dup+msb", finetune_epochs=2, knowledge="unknown"),
        "known": Protection.parse("prune+dup+msb", finetune_epochs=2, knowledge="known"),
    }.items():
        plan = prepare(zm, cfg, prot)
        clean = metric(plan.quantized_model())
        values, _ = evaluate_under_faults(plan, metric, 0.05, 0.5, range(4))
        drops[name] = [clean - v for v in values]  # paired: fault map s of every scheme has the same seed
        bars[name] = plan.crossbars()
    assert bars["none"] == bars["vote"] == bars["known"] == 34  # no extra crossbar
    assert np.mean(drops["none"]) > 2.0  # the faults do hurt the unprotected model
    for scheme in ("vote", "known"):
        assert np.mean(drops[scheme]) < 0.5 * np.mean(drops["none"])
        assert sum(d < n for d, n in zip(drops[scheme], drops["none"], strict=True)) >= 3  # on most maps, not on average only
