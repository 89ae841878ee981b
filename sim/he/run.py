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
from coevo.sim.he.model import Progress, Recipe, Trained, he_cache, train


def plan_of(trained: Trained) -> HEPlan:
    """The :class:`HEPlan` of a trained student: per block its graph conv and node-wise linear, hardened mask, polynomials."""
    m = trained.model
    linears: list[tuple[np.ndarray, np.ndarray, bool]] = []
    for conv, mix in zip(m.convs, m.mixes, strict=True):
        assert isinstance(conv, nn.Linear) and isinstance(mix, nn.Linear)
        for lin, graph in ((conv, True), (mix, False)):
            linears.append((lin.weight.detach().double().numpy().T, lin.bias.detach().double().numpy(), graph))
    n = trained.data.nodes
    return compile_plan(
        trained.data.adj,
        trained.data.coords,
        linears,
        m.coef.detach().double().numpy().reshape(2 * m.blocks, n, 3),
        m.mask.detach().double().numpy().reshape(2 * m.blocks, n),
        trained.ranges,
        (m.head.weight.detach().double().numpy().T, m.head.bias.detach().double().numpy()),
        m.readout,
    )


@dataclass
class HEReport:
    """Everything one :func:`he_gcn` call measured (accuracies in %, times in seconds unless named)."""

    recipe: dict[str, Any]
    kept_per_block: list[int]
    val_accuracy: float
    test_accuracy: float
    test_accuracy_plan: float
    teacher_val_accuracy: float
    encrypted_samples: int
    encrypted_accuracy: float | None
    encrypted_agreement: float | None
    max_abs_error: float | None
    depth: int
    level_per_layer: list[int]
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
    # everything that does not depend on the trained network, before the minutes of training it
    recipe.check()
    if params is not None:
        params.check_domain()
    if encrypted_samples < 0 or repeats < 1:
        raise UserInputError(f"encrypted_samples must be >= 0 and repeats >= 1, got {encrypted_samples}, {repeats}")
    trained = train(recipe, progress)
    plan = plan_of(trained)
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
                progress(f"encrypted passes (N={chosen.poly_modulus_degree}, depth {depth}): {r + 1} of {repeats}", r / repeats)
            run = encrypted_forward(plan, x, chosen)
            passes.append(run.encrypt_s + run.evaluate_s + run.decrypt_s)
        if progress:
            progress(f"encrypted passes (N={chosen.poly_modulus_degree}, depth {depth}): {repeats} of {repeats}", 1.0)
        enc_acc = float((run.logits.argmax(1) == y).mean() * 100.0)
        agree = float((run.logits.argmax(1) == run.reference.argmax(1)).mean() * 100.0)
        err, used = run.max_abs_error, run.levels_used
    predicted = None
    if predict:
        costs = cached_op_costs(chosen, he_cache() / "op_costs.json")
        predicted = predict_seconds(counts, costs, depth, chosen.levels)
    return HEReport(
        recipe=asdict(recipe),
        kept_per_block=trained.kept_per_block(),
        val_accuracy=trained.val_accuracy,
        test_accuracy=trained.accuracy("test"),
        test_accuracy_plan=approx,
        teacher_val_accuracy=trained.teacher_val_accuracy,
        encrypted_samples=encrypted_samples,
        encrypted_accuracy=enc_acc,
        encrypted_agreement=agree,
        max_abs_error=err,
        depth=depth,
        level_per_layer=per_layer,
        levels_used=used,
        params=chosen,
        op_counts=counts,
        pass_seconds=passes,
        predicted_pass_s=predicted,
    )


def median_or_none(values: list[float]) -> float | None:
    """Median of ``values``, None when empty."""
    return statistics.median(values) if values else None


def structural_depth(kept_per_block: list[int]) -> int:
    """Depth of the compiled network from its structure alone: 2 levels per kept non-linearity on a path, + 1 for the head.

    ``kept_per_block[l]`` is ``k_l``, the count of non-linear positions every node of block ``l`` keeps (the
    structured mask makes it the same for every node, so every path meets ``sum(k_l)`` of them). Exact unless a
    trained coefficient falls below :data:`sim.he.ckks.SKIP` (a skipped term can only lower the depth).
    """
    return 1 + 2 * sum(kept_per_block)
