"""Per-unit fake quantization, straight-through fine-tuning and mixed-precision allocation (sim.quant) on tiny models."""

from __future__ import annotations

import copy
import itertools
import random

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

from coevo.search.errors import UserInputError
from coevo.sim.quant import (
    METHODS,
    accuracy,
    allocate,
    average_bits,
    class_scores,
    fake_quant,
    finetune,
    greedy_search,
    hessian_traces,
    quant_layers,
    quantize,
    quantized_copy,
)
from coevo.sim.quant.mixed import allocate_groups, allocate_uniform


class Tiny(nn.Module):
    """conv 1->4 (3x3, no padding) on 6x6 inputs, then a Linear 64->3."""

    def __init__(self) -> None:
        super().__init__()
        self.conv = nn.Conv2d(1, 4, 3)
        self.fc = nn.Linear(4 * 4 * 4, 3)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc(F.relu(self.conv(x)).flatten(1))


def _data(n: int = 96, seed: int = 0) -> TensorDataset:
    gen = torch.Generator().manual_seed(seed)
    y = torch.arange(n) % 3
    centers = torch.randn(3, 1, 6, 6, generator=gen)
    x = centers[y] + 0.8 * torch.randn(n, 1, 6, 6, generator=gen)
    return TensorDataset(x, y)


@pytest.fixture(scope="module")
def setup() -> tuple[nn.Module, DataLoader, DataLoader]:
    torch.manual_seed(0)
    model = Tiny()
    train = DataLoader(_data(96, 0), batch_size=32, shuffle=False)
    opt = torch.optim.Adam(model.parameters(), lr=1e-2)
    for _ in range(15):
        for x, y in train:
            opt.zero_grad()
            F.cross_entropy(model(x), y).backward()
            opt.step()
    val = DataLoader(_data(60, 1), batch_size=30)
    return model.eval(), train, val


def test_known_codes_at_two_and_three_bits_and_binary() -> None:
    w = torch.tensor([[1.0, -0.4, 0.6, -1.0], [0.5, -0.25, 0.1, 0.0]])
    two = fake_quant(w, torch.tensor([2, 2]))  # one level each side: {-max, 0, max}
    assert torch.allclose(two, torch.tensor([[1.0, 0.0, 1.0, -1.0], [0.5, -0.0, 0.0, 0.0]]))
    three = fake_quant(w, torch.tensor([3, 3]))  # three levels each side, step max/3
    assert torch.allclose(three[0], torch.tensor([3.0, -1.0, 2.0, -3.0]) / 3)
    one = fake_quant(w, torch.tensor([1, 3]))
    assert torch.allclose(one[0], torch.tensor([1.0, -1.0, 1.0, -1.0]) * 0.75)  # sign * mean |w|
    assert torch.allclose(one[1], three[1])  # widths are per unit


def test_error_falls_with_bits_and_codes_fit_the_width() -> None:
    w = torch.randn(8, 50, generator=torch.Generator().manual_seed(0))
    errors = [float((fake_quant(w, torch.full((8,), b)) - w).pow(2).sum()) for b in range(2, 9)]
    assert all(a > b for a, b in itertools.pairwise(errors))
    for b in (2, 3, 4):
        q = fake_quant(w, torch.full((8,), b))
        assert all(len(torch.unique(row)) <= 2**b - 1 for row in q)


def test_layers_are_found_and_a_model_without_them_is_refused() -> None:
    assert [(la.name, la.units, la.weights_per_unit) for la in quant_layers(Tiny())] == [("conv", 4, 9), ("fc", 3, 64)]
    with pytest.raises(UserInputError, match="no Conv2d or Linear"):
        quant_layers(nn.Sequential(nn.ReLU(), nn.LayerNorm(4)))
    with pytest.raises(UserInputError, match="no Conv2d or Linear"):
        quantize(nn.Sequential(nn.ReLU()), [], [], avg_bits=4.0)
    lm = nn.Sequential(nn.Embedding(16, 4), nn.Linear(4, 16))  # logits [B, T, V]: not a classifier
    tokens = torch.randint(0, 16, (2, 5))
    with pytest.raises(UserInputError, match="needs a classifier"):
        allocate(lm, [(tokens, tokens)], avg_bits=4.0, method="class-based")


def test_bits_below_one_and_bad_targets_are_one_clear_error(setup: tuple[nn.Module, DataLoader, DataLoader]) -> None:
    model, train, _ = setup
    with pytest.raises(UserInputError, match="bits must be integers from 1 to 32; layer conv has 0"):
        quantized_copy(model, {"conv": [0, 4, 4, 4], "fc": [4, 4, 4]})
    with pytest.raises(UserInputError, match="missing"):
        quantized_copy(model, {"conv": [4] * 4})
    for target in (1.5, 8.5, -1.0):
        with pytest.raises(UserInputError, match="avg_bits must lie between"):
            allocate(model, train, avg_bits=target, method="uniform")
    with pytest.raises(UserInputError, match="unknown quantization method"):
        allocate(model, train, avg_bits=4.0, method="nope")
    with pytest.raises(UserInputError, match="candidate bit widths"):
        allocate(model, train, avg_bits=4.0, method="uniform", candidates=(0, 4))


def test_no_method_changes_the_callers_model(setup: tuple[nn.Module, DataLoader, DataLoader]) -> None:
    model, train, val = setup
    before = copy.deepcopy(model.state_dict())
    grads = [p.requires_grad for p in model.parameters()]
    for method in METHODS:
        result = quantize(model, train, val, avg_bits=3.0, method=method, finetune_epochs=1)
        assert result.model is not model
    greedy_search(model, train, val, max_drop=5.0, finetune_epochs=1)
    assert all(torch.equal(before[k], v) for k, v in model.state_dict().items())
    assert [p.requires_grad for p in model.parameters()] == grads and not model.training


def test_average_bits_target_is_met(setup: tuple[nn.Module, DataLoader, DataLoader]) -> None:
    model, train, _ = setup
    layers = quant_layers(model)
    total = sum(la.weights for la in layers)
    biggest_step = 2 * max(la.weights_per_unit for la in layers)  # the widest gap between candidates is 2 bits (4->6, 6->8)
    for target in (2.0, 3.0, 4.0, 6.0, 3.5):
        for method in METHODS:
            alloc = allocate(model, train, avg_bits=target, method=method)
            assert alloc.avg_bits == pytest.approx(average_bits(alloc.bits, layers))
            assert alloc.avg_bits <= target + 1e-9
            if method in (
                "class-based",
                "class-count",
                "taylor",
                "magnitude",
            ):  # per unit: below the target by less than one unit's upgrade
                assert (target - alloc.avg_bits) * total < biggest_step
            if method == "uniform" and target in (2.0, 3.0, 4.0, 6.0):
                assert alloc.avg_bits == target and {b for v in alloc.bits.values() for b in v} == {int(target)}


def test_uniform_between_candidates_fills_the_budget_best() -> None:
    assert allocate_uniform([100, 300], 5.0) == [6, 4]  # 6*100 + 4*300 = 1800 <= 2000; 6 for the second does not fit
    widths = allocate_uniform([100, 100], 5.0)
    assert widths == [6, 4] and sum(w * 100 for w in widths) == 5.0 * 200
    sizes = [144, 4608, 18432, 16384, 640]  # the digits CNN's layers
    budget = 2.5 * sum(sizes)
    fits = [sum(n * (3 if x else 2) for n, x in zip(sizes, f, strict=True)) for f in itertools.product((0, 1), repeat=5)]
    best = max(u for u in fits if u <= budget)
    assert sum(n * b for n, b in zip(sizes, allocate_uniform(sizes, 2.5), strict=True)) == best


def test_allocator_is_monotone_in_priority_and_minimises_noise_on_a_small_case() -> None:
    rng = random.Random(0)
    for _ in range(20):
        n = 12
        prio = [rng.choice([1.0, 2.0, 3.0, 5.0]) for _ in range(n)]
        sizes = [rng.choice([9, 16, 64]) for _ in range(n)]
        target = rng.uniform(2.0, 8.0)
        bits = allocate_groups(prio, sizes, target)
        assert sum(b * s for b, s in zip(bits, sizes, strict=True)) <= target * sum(sizes) + 1e-6
        for i, j in itertools.product(range(n), repeat=2):
            if prio[i] > prio[j]:
                assert bits[i] >= bits[j]
    # two groups of equal size, one 64x as sensitive: at 4 bits on average it gets the wider code (brute force agrees)
    best = min(((a, b) for a in (2, 3, 4, 6, 8) for b in (2, 3, 4, 6, 8) if a + b <= 8), key=lambda ab: 64 * 4.0 ** -ab[0] + 4.0 ** -ab[1])
    assert tuple(allocate_groups([64.0, 1.0], [10, 10], 4.0)) == best == (6, 2)


def test_class_based_priority_is_class_importance_times_error_scale_and_bits_follow_it(
    setup: tuple[nn.Module, DataLoader, DataLoader],
) -> None:
    model, train, _ = setup
    ranges = {  # max |w|^2 per unit, computed here from the weights
        "conv": model.conv.weight.detach().reshape(4, -1).abs().max(dim=1).values ** 2,
        "fc": model.fc.weight.detach().abs().max(dim=1).values ** 2,
    }
    for target in (2.5, 3.5):
        alloc = allocate(model, train, avg_bits=target, method="class-based")
        counts, prio = alloc.detail["class_counts"], alloc.detail["priority"]
        magnitude = allocate(model, train, avg_bits=target, method="magnitude").detail["priority"]
        units = []
        for name in counts:
            for u, (c, p, b) in enumerate(zip(counts[name], prio[name], alloc.bits[name], strict=True)):
                assert p == pytest.approx((1 + c) * float(ranges[name][u]), rel=1e-5)
                assert magnitude[name][u] == pytest.approx(float(ranges[name][u]), rel=1e-5)
                units.append((p, c, b))
        assert len({c for _, c, _ in units}) > 1 and len({b for _, _, b in units}) > 1  # not vacuous
        for (pa, _, ba), (pb, _, bb) in itertools.product(units, repeat=2):
            if pa > pb:
                assert ba >= bb


def test_class_based_gives_more_bits_to_a_unit_whose_rounding_error_grows(setup: tuple[nn.Module, DataLoader, DataLoader]) -> None:
    """Scale conv unit 0 up by 8 and its fc inputs down by 8: the function and the Taylor scores (class counts) are the same,
    the unit's quantization step is 8x larger, so it must get more bits (the class count alone would not move it)."""
    model, train, _ = setup
    before = allocate(model, train, avg_bits=3.0, method="class-based")
    scaled = copy.deepcopy(model)
    with torch.no_grad():
        scaled.conv.weight[0] *= 8.0
        scaled.conv.bias[0] *= 8.0
        scaled.fc.weight[:, :16] /= 8.0  # channel 0's 4x4 map is the first 16 inputs of fc (ReLU is positively homogeneous)
    x = next(iter(train))[0]
    assert torch.allclose(model(x), scaled(x), atol=1e-5)
    after = allocate(scaled, train, avg_bits=3.0, method="class-based")
    assert after.detail["class_counts"] == before.detail["class_counts"]
    assert before.bits["conv"][0] < 8 and after.bits["conv"][0] > before.bits["conv"][0]
    # the ablation without the error scale does not see the change
    assert (
        allocate(scaled, train, avg_bits=3.0, method="class-count").bits == allocate(model, train, avg_bits=3.0, method="class-count").bits
    )


def test_class_scores_match_the_closed_form_taylor_score_of_a_linear_model() -> None:
    torch.manual_seed(1)
    model = nn.Linear(5, 3)
    data = _data(30, 2)
    x, y = data.tensors[0].flatten(1)[:, :5], data.tensors[1]
    scores = class_scores(model, DataLoader(TensorDataset(x, y), batch_size=7))[""]
    w = model.weight.detach().numpy()
    p = torch.softmax(model(x), dim=1).detach().numpy()
    xs, ys = x.numpy(), y.numpy()
    for c in range(3):
        rows = ys == c
        grad = ((p[rows] - np.eye(3)[ys[rows]]).T @ xs[rows]) / rows.sum()  # dL_c/dW of the mean class-c cross-entropy
        raw = np.abs((w * grad).sum(axis=1))
        assert np.allclose(scores[c].numpy(), raw / raw.mean(), rtol=1e-4)


def test_hutchinson_trace_matches_the_exact_trace_of_a_linear_model() -> None:
    torch.manual_seed(2)
    model = nn.Sequential(nn.Linear(4, 3))
    x = torch.randn(16, 4)
    y = torch.arange(16) % 3
    traces = hessian_traces(model, [(x, y)], samples=400, max_batches=1)
    p = torch.softmax(model(x), dim=1).detach()
    exact = float(((p * (1 - p)).sum(dim=1) * x.pow(2).sum(dim=1)).mean())  # tr[(diag p - p p^T) (x) x x^T], averaged
    assert traces["0"] == pytest.approx(exact, rel=0.1)


def test_finetuning_keeps_the_widths_and_never_loses_validation_accuracy(setup: tuple[nn.Module, DataLoader, DataLoader]) -> None:
    model, train, val = setup
    bits = {"conv": [2, 3, 2, 4], "fc": [2, 2, 3]}
    tuned, record = finetune(model, bits, train, val, epochs=3, seed=0)
    assert len(record.val_accuracy) == 4 and record.val_accuracy[0] == accuracy(quantized_copy(model, bits), val)
    assert accuracy(tuned, val) == max(record.val_accuracy)
    mods = dict(tuned.named_modules())
    for name, widths in bits.items():
        for row, b in zip(mods[name].weight.detach().reshape(len(widths), -1), widths, strict=True):
            assert len(torch.unique(row)) <= 2**b - 1  # still a b-bit code per unit


def test_greedy_search_keeps_the_accuracy_constraint(setup: tuple[nn.Module, DataLoader, DataLoader]) -> None:
    model, train, val = setup
    fp = accuracy(model, val)
    result = greedy_search(model, train, val, max_drop=2.0, finetune_epochs=1)
    assert result.result.val_after >= fp - 2.0 and result.result.val_ptq >= fp - 2.0
    assert result.trace and result.result.allocation.avg_bits < 8.0
    assert all(a["avg_bits"] > b["avg_bits"] for a, b in itertools.pairwise(result.trace))
