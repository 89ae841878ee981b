"""HE tools: a GCN with partly-kept ReLUs and trainable polynomials (LinGCN-style), run encrypted under CKKS."""

from __future__ import annotations

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
from coevo.tools._base import Tool, ToolArgs, ToolResult


class HEGcnArgs(ToolArgs):
    dataset: Literal["digits-grid", "digits-grid4"] = config_field(
        HeConfig,
        "dataset",
        description="digits-grid: scikit-learn digits as 8x8 pixel grid graphs (64 nodes); digits-grid4: pooled to 4x4 (16 nodes, quicker)",
    )
    keep_nonlinear: float = Field(
        0.25, ge=0.0, le=1.0, description="share of nodes per layer that keep their ReLU (0: the all-polynomial CryptoGCN-style baseline)"
    )
    poly_degree: int = Field(2, ge=1, le=4, description="degree of the trainable polynomial at the other nodes")
    relu_degree: int = Field(
        4, ge=2, le=8, description="degree of the Chebyshev polynomial that replaces each kept ReLU under encryption (ceil(log2 d) levels)"
    )
    hidden: list[int] = Field(
        [HeConfig.hidden] * 2,
        min_length=1,
        max_length=3,
        description="channels per graph convolution (1 to 3 layers); HE cost grows with their product",
    )
    distill: float = Field(
        0.5, ge=0.0, le=1.0, description="weight of the distillation loss from the all-ReLU teacher (rest: cross-entropy)"
    )
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
    """Train (cached) a partly-linearized GCN by distillation and classify test graphs under CKKS encryption."""

    name = "he.gcn"
    measured_fields = frozenset({"encrypted_latency_s", "ckks_max_abs_error", "wall_s"})  # CKKS noise differs between encryptions
    slow_example = True  # a CKKS-encrypted pass (about 5-10 s a call; the suite calls the example 5 times)
    description = (
        "HE-friendly GCN (LinGCN-style): a 2-layer GCN on digit images as pixel grid graphs where a learned share of "
        "nodes per layer keep their ReLU and the rest use a trainable polynomial, distilled from an all-ReLU teacher "
        "(keep_nonlinear=0 is the all-polynomial CryptoGCN-style baseline). Runs test samples encrypted with CKKS "
        "(TenSEAL): returns plaintext and encrypted accuracy, multiplicative depth (analytic and checked against the "
        "modulus chain), CKKS parameters, op counts and encrypted latency."
    )
    Args = HEGcnArgs
    example: ClassVar[dict[str, Any]] = {
        "dataset": "digits-grid4",
        "keep_nonlinear": 0.25,
        "poly_degree": 2,
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
        layers = len(args.hidden)
        recipe = Recipe(
            dataset=args.dataset,
            hidden=tuple(args.hidden),
            keep=(args.keep_nonlinear,) * layers,
            poly_degree=args.poly_degree,
            distill=args.distill,
            epochs=args.epochs,
            teacher_epochs=args.teacher_epochs,
            seed=args.seed,
        )
        r = he_gcn(
            recipe, relu_degree=args.relu_degree, encrypted_samples=args.encrypted_samples, repeats=args.repeats, params=params,
            scale_bits=args.scale_bits, predict=False, progress=lambda what, f: report(what, f),
        )  # fmt: skip
        latency = median_or_none(r.pass_seconds)
        value = {
            "dataset": args.dataset,
            "keep_nonlinear": args.keep_nonlinear,
            "kept_relu_nodes_per_layer": r.kept_nodes,
            "val_accuracy": round(r.val_accuracy, 3),
            "test_accuracy": round(r.test_accuracy, 3),
            "test_accuracy_relu_approx": round(r.test_accuracy_relu_approx, 3),
            "teacher_val_accuracy": round(r.teacher_val_accuracy, 3),
            "encrypted_samples": r.encrypted_samples,
            "encrypted_accuracy": None if r.encrypted_accuracy is None else round(r.encrypted_accuracy, 3),
            "encrypted_agreement": None if r.encrypted_agreement is None else round(r.encrypted_agreement, 3),
            "multiplicative_depth": r.depth,
            "depth_per_layer": r.depth_per_layer,
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
                "accuracy in %; test_accuracy uses exact ReLUs, test_accuracy_relu_approx the degree-relu_degree Chebyshev "
                "polynomial the encrypted pass evaluates; encrypted_agreement: share of encrypted predictions equal to the "
                "plaintext ones. Batch packing: one ciphertext per node and channel, samples in the slots, so "
                "encrypted_latency_s is the time of one pass (one query or a whole batch), encryption and decryption included.",
                "levels_used is read from the ciphertexts' remaining modulus chain after the pass; it equals multiplicative_depth.",
            ],
        )
