"""One call from a recipe to plaintext and encrypted numbers: train (or load), compile, count depth, encrypt, time."""

from __future__ import annotations

import statistics
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np
from torch import nn

from coevo.sim.errors import UserInputError
from coevo.sim.he.ckks import (
    HEParams,
    HEPlan,
    cached_op_costs,
    compile_plan,
    depth_and_counts,
    encrypted_forward,
    params_for_depth,
    plain_logits,
    predict_seconds,
)
from coevo.sim.he.model import Progress, Recipe, Trained, train
from coevo.sim.zoo import cache_dir


def plan_of(trained: Trained, relu_degree: int = 4) -> HEPlan:
    """The :class:`HEPlan` of a trained student (its hardened mask, polynomials, weights and pre-activation ranges)."""
    m = trained.model
    convs = [(c.weight.detach().double().numpy().T, c.bias.detach().double().numpy()) for c in m.convs if isinstance(c, nn.Linear)]
    return compile_plan(
        trained.data.adj,
        trained.data.coords,
        convs,
        m.coef.detach().double().numpy(),
        m.mask.detach().double().numpy(),
        trained.ranges,
        (m.head.weight.detach().double().numpy().T, m.head.bias.detach().double().numpy()),
        m.readout,
        relu_degree,
    )


@dataclass
class HEReport:
    """Everything one :func:`he_gcn` call measured (accuracies in %, times in seconds unless named)."""

    recipe: dict[str, Any]
    relu_degree: int
    kept_nodes: list[int]
    val_accuracy: float
    test_accuracy: float
    test_accuracy_relu_approx: float
    teacher_val_accuracy: float
    encrypted_samples: int
    encrypted_accuracy: float | None
    encrypted_agreement: float | None
    max_abs_error: float | None
    depth: int
    depth_per_layer: list[int]
    levels_used: int | None
    params: HEParams
    op_counts: dict[str, int]
    pass_seconds: list[float]
    predicted_pass_s: float | None

    def as_dict(self) -> dict[str, Any]:
        """JSON-ready form."""
        out = asdict(self)
        out["params"] = {
            "poly_modulus_degree": self.params.poly_modulus_degree,
            "coeff_mod_bit_sizes": list(self.params.coeff_mod_bit_sizes),
        }
        return out


def he_gcn(
    recipe: Recipe,
    relu_degree: int = 4,
    encrypted_samples: int = 16,
    repeats: int = 1,
    params: HEParams | None = None,
    scale_bits: int = 28,
    predict: bool = True,
    progress: Progress | None = None,
) -> HEReport:
    """Train (or load) ``recipe``'s student, compile it for CKKS, and run ``encrypted_samples`` test samples encrypted.

    Args:
        recipe: the model (:class:`sim.he.model.Recipe`).
        relu_degree: degree of the polynomial replacing each kept ReLU under encryption.
        encrypted_samples: test samples in the encrypted batch (0: no encrypted run, depth and counts only).
        repeats: encrypted passes to time (the median is the latency).
        params: CKKS parameters; None: the smallest secure chain holding the depth at ``scale_bits``.
        scale_bits: log2 of the CKKS scale when ``params`` is None.
        predict: also predict the pass time from the op counts and per-op costs measured once (cached).
        progress: ``(what, fraction)`` callback.

    Raises:
        UserInputError: a bad recipe, parameters that cannot hold the depth (naming the parameter to raise),
            more samples than the test split or the slots.
    """
    if not 1 <= relu_degree <= 8:
        raise UserInputError(f"relu_degree must be 1 to 8 (degree d costs ceil(log2 d) levels), got {relu_degree}")
    trained = train(recipe, progress)
    plan = plan_of(trained, relu_degree)
    depth, counts, per_layer = depth_and_counts(plan)
    chosen = params or params_for_depth(depth, scale_bits)
    chosen.check(depth)
    x_test, y_test = trained.data.x["test"], trained.data.y["test"]
    if encrypted_samples > len(y_test):
        raise UserInputError(f"encrypted_samples {encrypted_samples} exceeds the {len(y_test)} test samples")
    approx = float((plain_logits(plan, x_test).argmax(1) == y_test).mean() * 100.0)
    enc_acc = agree = err = None
    used = None
    passes: list[float] = []
    if encrypted_samples > 0:
        x, y = x_test[:encrypted_samples], y_test[:encrypted_samples]
        for r in range(repeats):
            if progress:
                progress(f"encrypted pass {r + 1}/{repeats} (N={chosen.poly_modulus_degree}, depth {depth})", r / repeats)
            run = encrypted_forward(plan, x, chosen)
            passes.append(run.encrypt_s + run.evaluate_s + run.decrypt_s)
        enc_acc = float((run.logits.argmax(1) == y).mean() * 100.0)
        agree = float((run.logits.argmax(1) == run.reference.argmax(1)).mean() * 100.0)
        err, used = run.max_abs_error, run.levels_used
    predicted = None
    if predict:
        costs = cached_op_costs(chosen, cache_dir().parent / "he" / "op_costs.json")
        predicted = predict_seconds(counts, costs, depth, chosen.levels)
    return HEReport(
        recipe=asdict(recipe),
        relu_degree=relu_degree,
        kept_nodes=[int(k.sum()) for k in (layer.kept for layer in plan.layers)],
        val_accuracy=trained.val_accuracy,
        test_accuracy=trained.accuracy("test"),
        test_accuracy_relu_approx=approx,
        teacher_val_accuracy=trained.teacher_val_accuracy,
        encrypted_samples=encrypted_samples,
        encrypted_accuracy=enc_acc,
        encrypted_agreement=agree,
        max_abs_error=err,
        depth=depth,
        depth_per_layer=per_layer,
        levels_used=used,
        params=chosen,
        op_counts=counts,
        pass_seconds=passes,
        predicted_pass_s=predicted,
    )


def median_or_none(values: list[float]) -> float | None:
    """Median of ``values``, None when empty."""
    return statistics.median(values) if values else None


def structural_depth(layers: int, kept: list[bool], poly_degree: int, relu_degree: int) -> int:
    """Depth of the compiled network from its structure alone: per layer 1 (fused linear) + ceil(log2 deg), + 1 for the head.

    ``kept[l]`` is True when layer ``l`` keeps any ReLU (its degree is then ``max(relu_degree, poly_degree)``).
    """
    total = 1
    for k in kept[:layers]:
        deg = max(relu_degree, poly_degree) if k else poly_degree
        total += 1 + (int(np.ceil(np.log2(deg))) if deg > 1 else 0)
    return total
