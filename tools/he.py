"""HE tools: LinGCN (structurally linearized GCN with trainable polynomials, two-level distillation), run encrypted under CKKS."""

from __future__ import annotations

import math
import time
from typing import Any, ClassVar, Literal

from pydantic import Field

from coevo.search.errors import UserInputError
from coevo.search.problem import config_field
from coevo.search.work_progress import report
from coevo.sim.he.ckks import HEParams
from coevo.sim.he.config import HeConfig
from coevo.sim.he.model import Recipe
from coevo.sim.he.run import he_gcn, median_or_none
from coevo.sim.zoo.cache_files import collected_notes
from coevo.tools._base import Tool, ToolArgs, ToolResult


class HEGcnArgs(ToolArgs):
    """Arguments of ``he.gcn``: the graph dataset, the polynomial-activation budget, training and distillation, the CKKS parameters."""

    dataset: Literal["digits-grid", "digits-grid4", "digits-grid16"] = config_field(
        HeConfig,
        "dataset",
        description="digits-grid: scikit-learn digits as 8x8 pixel grid graphs (64 nodes); digits-grid4: pooled to 4x4 (16 nodes, "
        "quicker); digits-grid16: every pixel split into 2x2 nodes (256 nodes, a larger graph, same information; slow encrypted)",
    )
    budget: float = config_field(HeConfig, "budget")
    hidden: list[int] = Field(
        [HeConfig.hidden] * 2,
        min_length=1,
        max_length=3,
        description="channels per block (1 to 3 blocks of graph conv, act, node-wise linear, act); HE cost grows with their product",
    )
    distill: float = config_field(HeConfig, "distill")
    feature_distill: float = config_field(HeConfig, "feature_distill")
    poly_init: Literal["relu-fit", "square"] = config_field(HeConfig, "poly_init")
    epochs: int = config_field(HeConfig, "epochs")
    teacher_epochs: int = config_field(HeConfig, "teacher_epochs")
    encrypted_samples: int = Field(
        16,
        ge=0,
        le=270,
        description="test samples classified encrypted in one batch (0: skip the encrypted run); the pass costs the same for 1 or 270",
    )
    repeats: int = Field(1, ge=1, le=9, description="encrypted passes to time (median)")
    poly_modulus_degree: int | None = Field(None, description="CKKS ring dimension; default: the smallest secure one holding the depth")
    coeff_mod_bit_sizes: list[int] | None = Field(
        None, description="CKKS modulus chain in bits (first, one per level, special); default: from the depth"
    )
    scale_bits: int = config_field(HeConfig, "scale_bits", description="log2 of the CKKS scale when the chain is chosen automatically")
    seed: int = config_field(HeConfig, "seed", description="seed of initialisation and batch order (teacher and student)")


class HEGcn(Tool):
    """Train (cached) a structurally linearized GCN (LinGCN) by distillation and classify test graphs under CKKS encryption."""

    name = "he.gcn"
    measured_fields = frozenset({"encrypted_latency_s", "ckks_max_abs_error", "wall_s"})  # CKKS noise differs between encryptions
    slow_example = True  # a CKKS-encrypted pass (about 5-10 s a call; the suite calls the example 5 times)
    description = (
        "LinGCN (structural linearization): a GCN of blocks (graph conv, act, node-wise linear, act) on digit images as "
        "pixel grid graphs, where per node each non-linearity is either kept as a trainable degree-2 polynomial or removed "
        "(linear), with the same count kept by every node of a block; budget is the kept share (1: the all-polynomial "
        "CryptoGCN-style baseline). Distilled from an all-ReLU teacher (logits and block features). Runs test samples "
        "encrypted with CKKS (TenSEAL), linear nodes fused into the next linear operation: returns plaintext and encrypted "
        "accuracy, multiplicative depth (analytic and checked against the modulus chain), CKKS parameters, op counts and "
        "encrypted latency."
    )
    Args = HEGcnArgs
    example: ClassVar[dict[str, Any]] = {
        "dataset": "digits-grid4",
        "budget": 0.5,
        "hidden": [2],
        "epochs": 3,
        "teacher_epochs": 5,
        "encrypted_samples": 4,
    }
    long_running = True

    def run(self, args: HEGcnArgs) -> ToolResult:
        start = time.perf_counter()
        if (args.poly_modulus_degree is None) != (args.coeff_mod_bit_sizes is None):
            raise UserInputError("give both poly_modulus_degree and coeff_mod_bit_sizes, or neither (then they are chosen from the depth)")
        params = (
            HEParams(args.poly_modulus_degree, tuple(args.coeff_mod_bit_sizes))
            if args.poly_modulus_degree and args.coeff_mod_bit_sizes
            else None
        )
        recipe = Recipe(
            dataset=args.dataset,
            hidden=tuple(args.hidden),
            budget=args.budget,
            poly_init=args.poly_init,
            distill=args.distill,
            feature_distill=args.feature_distill,
            epochs=args.epochs,
            teacher_epochs=args.teacher_epochs,
            seed=args.seed,
        )
        with collected_notes() as rebuilt:  # a damaged cached teacher or student is trained again: say so in the messages
            r = he_gcn(
                recipe, encrypted_samples=args.encrypted_samples, repeats=args.repeats, params=params,
                scale_bits=args.scale_bits, predict=False, progress=lambda what, f: report(what, f),
            )  # fmt: skip
        latency = median_or_none(r.pass_seconds)
        value = {
            "dataset": args.dataset,
            "budget": args.budget,
            "kept_per_block": r.kept_per_block,
            "val_accuracy": round(r.val_accuracy, 3),
            "test_accuracy": round(r.test_accuracy, 3),
            "test_accuracy_plan": round(r.test_accuracy_plan, 3),
            "teacher_val_accuracy": round(r.teacher_val_accuracy, 3),
            "encrypted_samples": r.encrypted_samples,
            "encrypted_accuracy": None if r.encrypted_accuracy is None else round(r.encrypted_accuracy, 3),
            "encrypted_agreement": None if r.encrypted_agreement is None else round(r.encrypted_agreement, 3),
            "multiplicative_depth": r.depth,
            "level_per_layer": r.level_per_layer,
            "levels_used": r.levels_used,
            "poly_modulus_degree": r.params.poly_modulus_degree,
            "coeff_mod_bit_sizes": list(r.params.coeff_mod_bit_sizes),
            "op_counts": r.op_counts,
            "encrypted_latency_s": None if latency is None else round(latency, 3),
            "ckks_max_abs_error": None if r.max_abs_error is None else float(f"{r.max_abs_error:.3g}"),
            "wall_s": round(time.perf_counter() - start, 3),
        }
        return ToolResult(
            value=value,
            messages=[
                *rebuilt,
                "accuracy in %; test_accuracy is the torch student's, test_accuracy_plan the compiled plan's in float64 (what the "
                "encrypted pass computes, noise aside); kept_per_block: non-linear positions (of 2) every node of each block keeps; "
                "level_per_layer: the level after each linear operation; encrypted_agreement: share of encrypted predictions equal to the "
                "plaintext ones. Batch packing: one ciphertext per node and channel, samples in the slots, so "
                "encrypted_latency_s is the time of one pass (one query or a whole batch), encryption and decryption included.",
                "levels_used is read from the ciphertexts' remaining modulus chain after the pass; it equals multiplicative_depth.",
                *_sample_warning(r.encrypted_samples, r.encrypted_accuracy),
            ],
        )


def _sample_warning(samples: int, accuracy: float | None) -> list[str]:
    """A warning when the encrypted accuracy rests on too few images to tell it from the plaintext one.

    The half-width is the 95 % Wilson interval of a binomial share, which stays sensible at 0 % and 100 %.
    """
    if accuracy is None or samples >= 100:
        return []
    z, p = 1.96, accuracy / 100
    centre = (p + z * z / (2 * samples)) / (1 + z * z / samples)
    half = z * math.sqrt(p * (1 - p) / samples + z * z / (4 * samples * samples)) / (1 + z * z / samples)
    return [
        f"warning: encrypted_accuracy is measured on {samples} image(s) only: 95 % interval {100 * (centre - half):.0f}-"
        f"{100 * (centre + half):.0f} %; use encrypted_samples of a few hundred (one pass holds them all) to compare it with test_accuracy"
    ]
