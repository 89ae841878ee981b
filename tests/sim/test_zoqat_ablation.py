"""Issue 31 item 3 (sim/zoqat): ZeroQAT's smoothing factors (exact migration in float, SmoothQuant's init, trained
with the scales, helps an outlier channel at low activation bits), P-GAP's perturbation inside the estimated
subspace with its stated alignment, and one-line bad input for the new settings."""

from __future__ import annotations

import math

import pytest
import torch
from torch import nn
from torch.nn import functional as F

from coevo.agent.cli import main
from coevo.sim.errors import UserInputError
from coevo.sim.zoqat import Perturbation, Subspace, quant_layers, quantize, train, trainable, zo_qat
from coevo.sim.zoqat.fakequant import qrange
from tests.sim.test_zoqat import TinyLM, _text_batches, trained_tiny


@pytest.fixture(scope="module")
def tiny() -> TinyLM:
    """test_zoqat's TinyLM, trained the same way (150 Adam steps on pydoc text)."""
    return trained_tiny()


@pytest.fixture(scope="module")
def batch() -> tuple[torch.Tensor, torch.Tensor]:
    return _text_batches(32, seed=1)


def _outlier_mlp() -> tuple[nn.Sequential, torch.Tensor]:
    """An 8-6-4 MLP and inputs whose channel 3 is 50 times the others (an activation outlier channel)."""
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(8, 6), nn.ReLU(), nn.Linear(6, 4)).eval()
    x = torch.randn(256, 8)
    x[:, 3] *= 50.0
    return model, x


# -- smoothing: exact before quantization, SmoothQuant's init, trained, useful against an outlier ---------------------


def test_smoothing_at_init_leaves_the_float_function_unchanged(tiny: TinyLM, batch: tuple[torch.Tensor, torch.Tensor]) -> None:
    x, _ = batch
    q = quantize(tiny, 16, None, [x], smooth_alpha=0.5)
    for m in quant_layers(q):
        assert m.log_smooth is not None and float(m.log_smooth.abs().max()) > 0.05  # non-trivial factors, not all ones
        h = torch.randn(5, m.in_features)
        migrated = F.linear(m.smoothed_input(h), m.smoothed_weight(), m.bias)  # (X diag(s)^-1)(diag(s) W)
        torch.testing.assert_close(migrated, F.linear(h, m.weight, m.bias), rtol=1e-5, atol=1e-5)
    with torch.no_grad():  # the whole model at 16-bit weights, float activations: the float model's output
        torch.testing.assert_close(q(x), tiny(x), rtol=0, atol=2e-3)


def test_smoothquant_init_follows_its_formula_and_rtn_of_the_smoothed_operands() -> None:
    model, x = _outlier_mlp()
    q = quantize(model, 8, 8, [x], smooth_alpha=0.5)
    first = quant_layers(q)[0]
    w = model[0].weight.detach()
    expected = x.abs().amax(0) ** 0.5 / w.abs().amax(0) ** 0.5
    assert first.log_smooth is not None
    torch.testing.assert_close(first.log_smooth.exp(), expected, rtol=1e-5, atol=0)
    torch.testing.assert_close(first.w_log_s.exp().squeeze(1), (w * expected).abs().amax(1) / qrange(8)[1], rtol=1e-5, atol=0)
    assert math.exp(float(first.a_log_s.detach())) == pytest.approx(float((x / expected).abs().max()) / qrange(8)[1], rel=1e-5)
    # alpha 0.5 balances the two maxima per channel: max|X_j / s_j| = max|W_j s_j|
    torch.testing.assert_close((x / expected).abs().amax(0), (w * expected).abs().amax(0), rtol=1e-4, atol=0)


def test_smoothing_lowers_the_output_error_of_an_outlier_channel_at_four_bit_activations() -> None:
    # a 32-16-4 MLP whose input channel 3 is 50 times the others, W8A4 per tensor: without smoothing the outlier sets
    # the activation step and the other 31 channels round to a few levels; SmoothQuant's migration shrinks that range
    # (measured while writing this: the output error falls by 21 to 46 % over these 5 seeds)
    ratios = []
    for seed in range(5):
        torch.manual_seed(seed)
        model = nn.Sequential(nn.Linear(32, 16), nn.ReLU(), nn.Linear(16, 4)).eval()
        x = torch.randn(256, 32)
        x[:, 3] *= 50.0
        with torch.no_grad():
            ref = model(x)
            plain = float((quantize(model, 8, 4, [x])(x) - ref).pow(2).mean())
            smooth = float((quantize(model, 8, 4, [x], smooth_alpha=0.5)(x) - ref).pow(2).mean())
        ratios.append(smooth / plain)
    assert max(ratios) < 0.9 and sum(ratios) / len(ratios) < 0.8, ratios


def test_zo_training_moves_the_smoothing_factors_with_the_weights(tiny: TinyLM, batch: tuple[torch.Tensor, torch.Tensor]) -> None:
    x, _ = batch
    init = quantize(tiny, 4, 8, [x], smooth_alpha=0.5)
    run = zo_qat(tiny, [batch], w_bits=4, a_bits=8, method="spsa", steps=3, lr=1e-3, train_weights=True, smooth_alpha=0.5)
    before = [m.log_smooth for m in quant_layers(init)]
    after = [m.log_smooth for m in quant_layers(run.model)]
    assert all(a is not None and b is not None and not torch.equal(a, b) for a, b in zip(after, before, strict=True))
    assert run.log.trainable_values == sum(p.numel() for p in trainable(init, True))
    assert run.log.trainable_values == sum(p.numel() for p in trainable(quantize(tiny, 4, 8, [x]), True)) + sum(
        m.in_features for m in quant_layers(init)
    )


# -- P-GAP: the perturbation lies in the estimated subspace, aligned as stated -----------------------------------------


def test_pgap_perturbation_lies_in_the_estimated_subspace_with_its_stated_alignment() -> None:
    m, n, r, delta = 12, 9, 3, 0.5
    g = torch.Generator().manual_seed(3)
    sub = Subspace.from_estimate(torch.randn(m, n, generator=g), r)
    w, b = torch.zeros(m, n), torch.zeros(5)
    pert = Perturbation([w, b], {0: sub}, delta=delta)
    for seed in range(10):
        flat = pert.flat(seed)
        z = flat[: m * n].view(m, n)
        # in the subspace: nothing outside span(U) on the left or span(V) on the right
        torch.testing.assert_close(sub.u @ (sub.u.T @ z), z, rtol=0, atol=1e-5)
        torch.testing.assert_close((z @ sub.v) @ sub.v.T, z, rtol=0, atol=1e-5)
        # the stated mixing, regenerated by hand: C = C0 - (<S, C0> - xi sqrt(delta) |S|) / |S|^2 S, Z = c U C V^T
        gen = torch.Generator().manual_seed(seed)
        c0 = torch.randn((r, r), generator=gen)
        xi = 1.0 if torch.rand((), generator=gen) < 0.5 else -1.0
        norm = float(sub.s.norm())
        c = c0 - (float((sub.s * c0).sum()) - xi * math.sqrt(delta) * norm) / norm**2 * sub.s
        torch.testing.assert_close(z, sub.u @ c @ sub.v.T * (math.sqrt(m * n) / r), rtol=1e-5, atol=1e-6)
        # a vector (bias, scale) keeps a Gaussian draw from the same stream
        torch.testing.assert_close(flat[m * n :], torch.randn(5, generator=gen), rtol=0, atol=0)


# -- bad input: one line naming the value and its bound -----------------------------------------------------------------


def test_bad_smoothing_and_pgap_settings_are_one_clear_error(tiny: TinyLM, batch: tuple[torch.Tensor, torch.Tensor]) -> None:
    for alpha in (1.5, -0.1):
        with pytest.raises(UserInputError, match=rf"smooth_alpha must lie in \[0, 1\].*{alpha}"):
            zo_qat(tiny, [batch], smooth_alpha=alpha)
    with pytest.raises(UserInputError, match="not combined with gptq"):
        zo_qat(tiny, [batch], method="gptq", smooth_alpha=0.5)
    q = quantize(tiny, 4, 8, [batch[0]])
    with pytest.raises(UserInputError, match="rank must be an integer >= 1, got 0"):
        train(q, [batch], "pgap", 1, lr=1e-4, train_weights=True, rank=0)
    with pytest.raises(UserInputError, match=r"probes must be an integer >= rank \(4\), got 2"):
        train(q, [batch], "pgap", 1, lr=1e-4, train_weights=True, rank=4, probes=2)
    train(q, [batch], "spsa", 1, lr=1e-4, rank=4, probes=2)  # settings of another method are not its business


@pytest.mark.parametrize(
    ("args", "words"),
    [
        ('{"method": "pgap", "train_weights": true, "rank": 4, "probes": 2}', ("probes", ">= rank (4)", "2")),
        ('{"method": "pgap", "train_weights": true, "rank": 0}', ("rank", "0")),
        ('{"method": "spsa", "smooth_alpha": 1.5}', ("smooth_alpha", "1.5")),
    ],
)
def test_the_tool_refuses_bad_settings_in_one_line_with_exit_2(
    args: str, words: tuple[str, ...], capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["tools", "run", "quant.zo_qat", "--args", args]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "Traceback" not in err, err
    assert all(w in err for w in words), err
