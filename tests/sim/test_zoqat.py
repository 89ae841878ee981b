"""Zeroth-order QAT (sim/zoqat): seeded perturbations, SPSA and P-GAP vs true gradients, GPTQ vs RTN on a layer's
output, the quantization grid, training (light and full) lowers the quantized loss, the caller's model is untouched,
bad input, and the memory measure sees allocations."""

from __future__ import annotations

import copy
import math
from dataclasses import replace

import pytest
import torch
from torch import nn
from torch.nn import functional as F

from coevo.sim.errors import UserInputError
from coevo.sim.zoqat import (
    PeakMemory,
    Perturbation,
    QuantLinear,
    Subspace,
    default_loss,
    estimate_subspaces,
    fake_quant,
    gptq,
    gptq_weight,
    qrange,
    quant_layers,
    quantize,
    train,
    trainable,
    zo_qat,
    zo_step,
)
from coevo.sim.zoqat.train import LossFn

SEEDS = range(40)
"""The fixed seed set of the statistical checks."""


class TinyLM(nn.Module):
    """A byte LM small enough to train in a second: embeddings, a causal running mean, one MLP, a head."""

    def __init__(self, d: int = 16, block: int = 16) -> None:
        super().__init__()
        self.embed = nn.Embedding(256, d)
        self.pos = nn.Embedding(block, d)
        self.fc1 = nn.Linear(d, 4 * d)
        self.fc2 = nn.Linear(4 * d, d)
        self.norm = nn.LayerNorm(d)
        self.head = nn.Linear(d, 256)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.embed(x) + self.pos(torch.arange(x.shape[1]))
        h = h + h.cumsum(1) / torch.arange(1, x.shape[1] + 1).view(1, -1, 1)
        h = h + self.fc2(F.gelu(self.fc1(h)))
        return self.head(self.norm(h))


def _text_batches(n: int, block: int = 16, seed: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
    from pydoc_data.topics import topics

    text = torch.tensor(list("".join(topics[k] for k in sorted(topics))[:50_000].encode()))
    idx = torch.randint(0, len(text) - block - 1, (n,), generator=torch.Generator().manual_seed(seed))
    x = torch.stack([text[i : i + block] for i in idx])
    y = torch.stack([text[i + 1 : i + block + 1] for i in idx])
    return x, y


def trained_tiny() -> TinyLM:
    """A TinyLM trained for 150 Adam steps on pydoc text (about a second), the same on every call."""
    torch.manual_seed(0)
    model = TinyLM()
    x, y = _text_batches(1024)
    opt = torch.optim.Adam(model.parameters(), lr=5e-3)
    for step in range(150):
        i = torch.arange(step * 32, step * 32 + 32) % len(x)
        loss = default_loss(model, x[i], y[i])
        opt.zero_grad()
        loss.backward()
        opt.step()
    return model.eval()


@pytest.fixture(scope="module")
def tiny() -> TinyLM:
    """:func:`trained_tiny`, once per module."""
    return trained_tiny()


@pytest.fixture(scope="module")
def batch() -> tuple[torch.Tensor, torch.Tensor]:
    return _text_batches(32, seed=1)


# -- the perturbation is regenerated from its seed -------------------------------------------------------------------


def test_perturbation_regenerated_from_seed_is_identical(tiny: TinyLM) -> None:
    q = quantize(tiny, 4, 8, [torch.zeros(2, 16, dtype=torch.long)])
    pert = Perturbation(trainable(q, train_weights=True))
    assert torch.equal(pert.flat(123), pert.flat(123))
    assert not torch.equal(pert.flat(123), pert.flat(124))
    w = next(i for i, p in enumerate(pert.params) if p is quant_layers(q)[0].weight)
    sub = Subspace.from_estimate(torch.randn(pert.params[w].shape, generator=torch.Generator().manual_seed(0)), 2)
    aligned = Perturbation(pert.params, {w: sub})
    assert torch.equal(aligned.flat(7), aligned.flat(7))
    z = dict(aligned.directions(7))[pert.params[w]]
    assert torch.linalg.matrix_rank(z) <= 2  # inside the matrix's rank-2 gradient space


@pytest.mark.parametrize("train_weights", [False, True])
def test_zo_step_with_zero_lr_restores_the_parameters(tiny: TinyLM, batch: tuple[torch.Tensor, torch.Tensor], train_weights: bool) -> None:
    q = quantize(tiny, 4, 8, [batch[0]])
    params = trainable(q, train_weights)
    before = [p.detach().clone() for p in params]
    eps = 1e-2
    g, _ = zo_step(q, default_loss, *batch, Perturbation(params), seed=5, lr=0.0, eps=eps)
    assert g != 0  # the two perturbed losses differed: the parameters really moved
    for p, b in zip(params, before, strict=True):
        # in-place +eps z, -2 eps z, +eps z (MeZO) restores up to float32 rounding; a z regenerated wrongly would
        # leave an error of order eps
        assert torch.allclose(p, b, rtol=1e-6, atol=1e-6 * float(b.abs().max()))
    moved = [p.detach().clone() for p in params]
    zo_step(q, default_loss, *batch, Perturbation(params), seed=5, lr=1e-3, eps=eps)
    assert any(not torch.allclose(p, m) for p, m in zip(params, moved, strict=True))


# -- SPSA's estimate points along the true gradient ------------------------------------------------------------------


class Quadratic(nn.Module):
    def __init__(self, d: int = 30) -> None:
        super().__init__()
        g = torch.Generator().manual_seed(0)
        m = torch.randn(d, d, generator=g)
        self.a = m @ m.T / d + torch.eye(d)
        self.b = torch.randn(d, generator=g)
        self.theta = nn.Parameter(torch.randn(d, generator=g))

    def value(self) -> torch.Tensor:
        return 0.5 * self.theta @ self.a @ self.theta + self.b @ self.theta

    def gradient(self) -> torch.Tensor:
        """Computed by hand: A theta + b (A symmetric)."""
        return (self.a @ self.theta + self.b).detach()


def _quadratic_loss(model: nn.Module, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    assert isinstance(model, Quadratic)
    return model.value()


def _cos(a: torch.Tensor, b: torch.Tensor) -> float:
    return float(F.cosine_similarity(a, b, dim=0))


def test_spsa_estimate_aligns_with_the_true_gradient_of_a_quadratic() -> None:
    model = Quadratic()
    true = model.gradient()
    pert = Perturbation([model.theta])
    estimates = []
    for s in SEEDS:
        g, _ = zo_step(model, _quadratic_loss, torch.zeros(1), torch.zeros(1), pert, s, lr=0.0, eps=1e-3)
        estimates.append(g * pert.flat(s))
    # each single-probe estimate is a noisy projection: positive alignment on average, not each time
    cosines = [_cos(e, true) for e in estimates]
    assert sum(cosines) / len(cosines) > 0.05
    # its expectation is the gradient (E[z z^T] = I): the mean of 40 estimates is close in direction (d = 30)
    assert _cos(torch.stack(estimates).mean(0), true) > 0.6
    # the scalar g is the directional derivative along z (central difference of a quadratic is exact)
    g0, _ = zo_step(model, _quadratic_loss, torch.zeros(1), torch.zeros(1), pert, 0, lr=0.0, eps=1e-3)
    assert g0 == pytest.approx(float(true @ pert.flat(0)), rel=1e-2)


def test_spsa_estimate_aligns_with_autograd_on_a_tiny_float_model(tiny: TinyLM, batch: tuple[torch.Tensor, torch.Tensor]) -> None:
    model = copy.deepcopy(tiny)
    params = [model.fc1.weight, model.fc2.weight]
    for p in model.parameters():
        p.requires_grad_(p is params[0] or p is params[1])
    default_loss(model, *batch).backward()
    true = torch.cat([p.grad.reshape(-1) for p in params if p.grad is not None])
    pert = Perturbation(params)
    cosines = []
    for s in SEEDS:
        g, _ = zo_step(model, default_loss, *batch, pert, s, lr=0.0, eps=1e-3)
        cosines.append(_cos(g * pert.flat(s), true))
    assert sum(cosines) / len(cosines) > 0  # d = 2,048: a single probe aligns weakly, but positively on average
    assert sum(c > 0 for c in cosines) > len(cosines) / 2


def test_pgap_perturbations_keep_a_fixed_component_along_the_projected_gradient() -> None:
    # P-GAP's alignment: <S, C> = xi sqrt(delta) |S| for every draw, xi = +-1 (computed here from U, V by hand)
    g = torch.Generator().manual_seed(3)
    w = torch.zeros(12, 9)
    sub = Subspace.from_estimate(torch.randn(12, 9, generator=g), 3)
    pert = Perturbation([w], {0: sub}, delta=0.5)
    signs = set()
    for seed in range(20):
        z = pert.flat(seed).view(12, 9)
        c = sub.u.T @ z @ sub.v / (math.sqrt(12 * 9) / 3)  # back to the r x r coordinates
        along = float((c * sub.s).sum() / sub.s.norm())
        assert abs(along) == pytest.approx(math.sqrt(0.5), rel=1e-4)
        signs.add(along > 0)
    assert signs == {True, False}


def test_pgap_estimate_is_closer_to_a_low_rank_gradient_than_spsa_at_the_same_forward_count() -> None:
    # a linear loss <G, W> with a rank-1 G (16 x 16): central differences are exact, so only the directions differ.
    # Both get 64 two-point evaluations: SPSA averages 64 estimates; P-GAP spends 40 on probing the gradient space
    # (rank 2) and averages the 24 aligned estimates inside it. Below about r (m + n) probes the subspace is noise
    # and P-GAP loses (measured while writing this: 10 probes of a 32 x 32 gave 0.10 against SPSA's 0.19).
    budget, probes, m = 64, 40, 16
    spsa_cos, pgap_cos = [], []
    for trial in range(8):
        g = torch.Generator().manual_seed(100 + trial)
        true = torch.randn(m, 1, generator=g) @ torch.randn(1, m, generator=g)
        w = torch.zeros(m, m)

        def loss(model: nn.Module, x: torch.Tensor, y: torch.Tensor, w: torch.Tensor = w, true: torch.Tensor = true) -> torch.Tensor:
            return (true * w).sum()

        seeds = [trial * 1000 + i for i in range(budget)]
        plain = Perturbation([w])

        def g_of(pert: Perturbation, s: int, loss: LossFn = loss) -> float:
            return zo_step(nn.Module(), loss, torch.zeros(1), torch.zeros(1), pert, s, lr=0.0, eps=1e-2)[0]

        spsa_cos.append(_cos(torch.stack([g_of(plain, s) * plain.flat(s) for s in seeds]).sum(0), true.flatten()))
        aligned = Perturbation([w], estimate_subspaces([w], [(s, g_of(plain, s)) for s in seeds[:probes]], 2))
        pgap = torch.stack([g_of(aligned, s) * aligned.flat(s) for s in seeds[probes:]]).sum(0)
        pgap_cos.append(_cos(pgap, true.flatten()))
    assert sum(pgap_cos) / len(pgap_cos) > sum(spsa_cos) / len(spsa_cos) + 0.1, (pgap_cos, spsa_cos)


# -- GPTQ beats round-to-nearest on a layer's output ------------------------------------------------------------------


def test_gptq_output_error_is_below_rtn_on_a_fixed_layer() -> None:
    g = torch.Generator().manual_seed(0)
    w = torch.randn(24, 32, generator=g)
    mix = torch.randn(32, 32, generator=g)
    x = torch.randn(512, 32, generator=g) @ mix  # correlated inputs: where GPTQ's compensation has room to work
    scale = w.abs().amax(1, keepdim=True) / 7  # 4-bit, RTN's per-row step
    rtn = (w / scale).round().clamp(-8, 7) * scale  # by hand, not with the code under test
    q = gptq_weight(w, scale, 4, x.T @ x / len(x))
    levels = q / scale
    assert torch.allclose(levels, levels.round(), atol=1e-4) and levels.round().abs().max() <= 8  # on RTN's grid
    err_rtn = float(((x @ (w - rtn).T) ** 2).mean())
    err_gptq = float(((x @ (w - q).T) ** 2).mean())
    assert err_gptq < 0.7 * err_rtn, (err_gptq, err_rtn)
    with pytest.raises(UserInputError, match="at least 2 weight bits"):
        gptq_weight(w, scale, 1, x.T @ x)


def test_gptq_on_a_model_beats_rtn_and_keeps_the_callers_model(tiny: TinyLM, batch: tuple[torch.Tensor, torch.Tensor]) -> None:
    before = {k: v.clone() for k, v in tiny.state_dict().items()}
    calib = [_text_batches(64, seed=7)[0]]
    rtn = quantize(tiny, 3, None, calib)
    done = gptq(quantize(tiny, 3, None, calib), calib)
    with torch.no_grad():
        loss_rtn, loss_gptq = float(default_loss(rtn, *batch)), float(default_loss(done, *batch))
    assert loss_gptq < loss_rtn, (loss_gptq, loss_rtn)
    assert all(torch.equal(before[k], v) for k, v in tiny.state_dict().items())


# -- the quantization grid -------------------------------------------------------------------------------------------


@pytest.mark.parametrize("bits", [1, 2, 4, 8])
def test_fake_quant_values_lie_on_the_grid_of_a_learnable_scale(bits: int) -> None:
    x = torch.randn(64, 32, generator=torch.Generator().manual_seed(bits)) * 3
    scale = torch.full((64, 1), 0.37, requires_grad=True)
    q = fake_quant(x, scale, bits)
    levels = (q / scale).detach()
    qmin, qmax = qrange(bits)
    assert torch.allclose(levels, levels.round(), atol=1e-5)
    assert levels.round().min() >= qmin and levels.round().max() <= qmax
    if bits == 1:
        assert set(levels.round().unique().tolist()) <= {-1.0, 1.0}
    q.sum().backward()  # the scale is learnable: LSQ gives it a gradient
    assert scale.grad is not None and bool(scale.grad.abs().sum() > 0)


def test_quantized_layers_after_training_stay_on_their_grid(tiny: TinyLM, batch: tuple[torch.Tensor, torch.Tensor]) -> None:
    run = zo_qat(tiny, [batch], w_bits=3, a_bits=4, method="spsa", steps=5, lr=1e-2, eps=1e-2)
    layers = quant_layers(run.model)
    assert len(layers) == 3 and all(isinstance(m, QuantLinear) for m in layers)
    inputs: dict[int, torch.Tensor] = {}

    def keep(m: nn.Module, args: tuple[torch.Tensor, ...]) -> None:
        inputs[id(m)] = args[0].detach()

    handles = [m.register_forward_pre_hook(keep) for m in layers]
    with torch.no_grad():
        run.model(batch[0])
    for h in handles:
        h.remove()
    rtn = dict(zip(layers, quant_layers(quantize(tiny, 3, 4, [batch[0]])), strict=True))
    for m in layers:
        # computed by hand, not with fake_quant: the grid of the learned scales, 3-bit weights, 4-bit inputs
        sw, sa = m.w_log_s.detach().exp(), m.a_log_s.detach().exp()
        assert not torch.allclose(sw, rtn[m].w_log_s.exp())  # training moved the scales off RTN
        w_grid = (m.weight / sw).round().clamp(-4, 3) * sw
        x = inputs[id(m)]
        x_grid = (x / sa).round().clamp(-8, 7) * sa
        with torch.no_grad():
            assert torch.allclose(m(x), x_grid @ w_grid.T + m.bias, atol=1e-4)
            w = m.quantized_weight() / sw
        assert torch.allclose(w, w.round(), atol=1e-4) and w.round().min() >= -4 and w.round().max() <= 3


# -- training lowers the quantized loss ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("method", "lr", "weights"),
    [("spsa", 2e-3, False), ("ste", 1e-2, False), ("spsa", 1e-4, True), ("pgap", 1e-4, True), ("ste", 1e-3, True)],
)
def test_training_lowers_the_loss_of_a_quantized_model_below_rtn(
    tiny: TinyLM, batch: tuple[torch.Tensor, torch.Tensor], method: str, lr: float, weights: bool
) -> None:
    rtn = zo_qat(tiny, [batch], w_bits=2, a_bits=8, method="rtn", steps=0)
    trained = zo_qat(
        tiny, [batch], w_bits=2, a_bits=8, method=method, steps=60, lr=lr, eps=1e-2, seed=0, train_weights=weights, refresh=20, probes=4
    )
    with torch.no_grad():
        before, after = float(default_loss(rtn.model, *batch)), float(default_loss(trained.model, *batch))
    assert after < before - 0.02, (before, after)
    assert trained.log.steps == 60 and trained.log.s_per_step > 0


def test_zo_keeps_no_optimizer_state_and_trains_only_the_scales_by_default(tiny: TinyLM, batch: tuple[torch.Tensor, torch.Tensor]) -> None:
    run = zo_qat(tiny, [batch], w_bits=4, a_bits=8, method="spsa", steps=3, lr=1e-3)
    q = quantize(tiny, 4, 8, [batch[0]])
    for (name, p), (_, p0) in zip(run.model.named_parameters(), q.named_parameters(), strict=True):
        if "log_s" not in name:
            assert torch.equal(p, p0), name  # weights, embeddings, norms untouched
    assert run.log.trainable_values == sum(m.w_log_s.numel() + 1 for m in quant_layers(q))


# -- the caller's model and bad input --------------------------------------------------------------------------------


@pytest.mark.parametrize("method", ["spsa", "pgap", "ste", "rtn", "gptq"])
def test_the_callers_model_is_unchanged(tiny: TinyLM, batch: tuple[torch.Tensor, torch.Tensor], method: str) -> None:
    state = {k: v.clone() for k, v in tiny.state_dict().items()}
    flags = [p.requires_grad for p in tiny.parameters()]
    zo_qat(tiny, [batch], w_bits=4, a_bits=8, method=method, steps=2, lr=1e-3, train_weights=True)
    assert all(torch.equal(state[k], v) for k, v in tiny.state_dict().items())
    assert [type(m) for m in tiny.modules()].count(nn.Linear) == 3 and not quant_layers(tiny)
    assert [p.requires_grad for p in tiny.parameters()] == flags


def test_bad_input_is_one_clear_error(tiny: TinyLM, batch: tuple[torch.Tensor, torch.Tensor]) -> None:
    conv = nn.Sequential(nn.Conv2d(1, 2, 3), nn.ReLU())
    with pytest.raises(UserInputError, match=r"no nn\.Linear"):
        zo_qat(conv, [(torch.zeros(1, 1, 4, 4), torch.zeros(1))])
    for bits in (0, -1, 2.5):
        with pytest.raises(UserInputError, match="w_bits must be an integer >= 1"):
            zo_qat(tiny, [batch], w_bits=bits)  # type: ignore[arg-type]
    with pytest.raises(UserInputError, match="a_bits must be an integer >= 1"):
        zo_qat(tiny, [batch], a_bits=0)
    with pytest.raises(UserInputError, match="unknown method 'adam'"):
        zo_qat(tiny, [batch], method="adam")
    with pytest.raises(UserInputError, match="lr must be a positive"):
        zo_qat(tiny, [batch], method="spsa", lr=-1.0, steps=1)
    with pytest.raises(UserInputError, match="eps must be a positive"):
        zo_qat(tiny, [batch], method="spsa", eps=0.0, steps=1)
    with pytest.raises(UserInputError, match="no batch"):
        zo_qat(tiny, [])
    with pytest.raises(UserInputError, match="quantize first"):
        train(tiny, [batch], "spsa", 1, lr=1e-3)


# -- peak memory is measured, not blind to torch's allocator ---------------------------------------------------------


def test_peak_memory_sees_a_torch_allocation() -> None:
    with PeakMemory() as small:
        torch.ones(1000).sum()
    with PeakMemory() as big:
        t = torch.ones(40_000_000)  # 160 MB from torch's CPU allocator
        t.add_(1)
        del t
    if not big.resettable:
        pytest.skip("the kernel does not allow resetting the RSS high-water mark here")
    assert big.added_mb > 120 > small.added_mb
    assert math.isfinite(big.peak_mb) and big.peak_mb >= big.before_mb


def test_an_untrained_architecture_run_measures_memory_and_time_without_evaluating() -> None:
    from coevo.sim.zoqat.job import Spec, run

    out = run(Spec(model="lm-pydoc-tiny", method="spsa", steps=2, lr=1e-3, batch_size=4, splits=(), untrained=True))
    assert out["s_per_step"] > 0 and out["peak_rss_train_mb"] > 0 and out["trainable_values"] > 0
    assert not any(k.startswith(("float_", "rtn_", "after_")) for k in out)  # no quality figure from random weights
    with pytest.raises(UserInputError, match="splits must be val and/or test"):
        run(Spec(model="lm-pydoc-tiny", splits=("train",), untrained=True))


@pytest.mark.slow  # 10 s on an idle 2-core machine: out of the fast loop (make test-fast), still in CI
def test_a_training_seed_gives_the_run_another_trained_model() -> None:
    from coevo.sim.zoqat.job import Spec, run

    spec = Spec(model="lm-pydoc-tiny", method="rtn", steps=0, batch_size=4, eval_batches=2, splits=("val",), threads=1)
    recipe_model, seed_one = run(spec), run(replace(spec, train_seed=1))
    assert seed_one["train_seed"] == 1 and recipe_model["train_seed"] is None
    assert seed_one["float_val"] != recipe_model["float_val"]  # another model, not only other perturbations
