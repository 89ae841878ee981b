"""FPGA transformer accelerator design as a coevo problem: keep perplexity, cut the makespan of real sentence batches.

A point is an accelerator design on the cycle-level model of :mod:`sim.fpga` plus its
attention setting: the PE split between the matmul, attention and softmax engines, the GEMM
tile sizes, top-k sparse attention's ``top_k`` and ``key_bits`` (low-bit pre-score), and the
scheduler (pad-to-batch-max, bucketing, length-aware upward-rank list scheduling on the design's split,
or the same with the PEs re-allocated per batch by its length mix: ``realloc``). The workload
is fixed by the options: ``draws`` random batches of ``batch`` sentences of Python's pydoc
topics (byte lengths), the same for every design.

Objectives:

* ``ppl_retention`` (maximised, expensive): dense perplexity / sparse perplexity of the zoo LM
  with top-k quantized-key attention (:func:`sim.attention.evaluate_sparse`, val split, no
  retraining): 1 means no loss. The LM scores 128-byte windows (its block), whatever the
  sentence lengths the accelerator is scheduled on.
* ``makespan_ms`` (minimised, cheap: a deterministic simulation): median over the batches.
* ``perplexity`` (minimised, expensive, reported), ``pe_utilization`` (maximised, cheap, reported),
  ``padding_waste`` (minimised, cheap, reported).

Niches: one per scheduler. The space has 6 x 4 x 3 x 3 x 4 x 3 x 4 = 10,368 designs (under
``realloc`` the split is where re-allocation starts: the first batch pays the reconfiguration cost to leave it,
and it wins ties); the exact front is not computed. The options ``reconfig_cycles`` and ``change_rule`` set what a
change of split costs and when ``realloc`` pays it (:mod:`sim.fpga.switch`); they only move ``realloc`` designs.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping, Sequence
from typing import Any, ClassVar, Literal, NamedTuple, get_args

import numpy as np
from pydantic import Field

from coevo.search.errors import UserInputError
from coevo.search.niches import Niche
from coevo.search.problem import LevelProblem, Levels, Objective, ProblemOptions, config_field, level_format
from coevo.sim.fpga import Accelerator, AttentionConfig, compare_methods, corpus_lengths, device, draw_batches, model_shape, split_pes
from coevo.sim.fpga.config import FpgaConfig
from coevo.sim.fpga.model import DEVICES, TransformerShape

SPLITS = ("2:1:1", "4:3:1", "6:1:1", "8:3:1", "12:3:1", "14:1:1")
"""PE shares matmul:attention:softmax."""
TILE_M = (16, 32, 64, 128)
TILE_N = (32, 64, 128)
TILE_K = (32, 64, 128)
TOP_K = (8, 16, 32, 64)
KEY_BITS = (2, 4, 8)
SCHEDULERS = ("padding", "bucketing", "length-aware", "realloc")
"""``realloc``: length-aware with the PEs re-allocated per batch (:mod:`sim.fpga.alloc`); ``split`` is then where it starts."""
Board = Literal["zcu102", "alveo-u280"]
"""The boards a search schedules on (the problem options of ``fpga-transformer`` and ``deploy-lm``)."""
PES_MIN = max(sum(int(x) for x in s.split(":")) for s in SPLITS)
"""Fewest PEs of a search: every split of :data:`SPLITS` gives each engine at least one PE."""
PES_MAX = max(DEVICES[b].max_pes(Accelerator.lanes) for b in get_args(Board))
"""Most PEs of a search: the largest board's DSP slices / :attr:`Accelerator.lanes`; the chosen board's own limit is
checked when the problem is built."""


class FpgaDesign(NamedTuple):
    """One point of the ``fpga-transformer`` problem."""

    split: str
    tile_m: int
    tile_n: int
    tile_k: int
    top_k: int
    key_bits: int
    scheduler: str


CHOICES: tuple[tuple[Any, ...], ...] = (SPLITS, TILE_M, TILE_N, TILE_K, TOP_K, KEY_BITS, SCHEDULERS)
TABLE = {f: Levels(c, ordered=f != "scheduler") for f, c in zip(FpgaDesign._fields, CHOICES, strict=True)}
"""The level table; schedulers have no order (every other one is a neighbour)."""


@functools.cache
def sparse_perplexity(model: str, top_k: int, key_bits: int, max_batches: int) -> tuple[float, float]:
    """(sparse, dense) val perplexity of zoo LM ``model`` with top-k quantized-key attention (cached per process).

    Imported lazily: :mod:`sim.attention` (and torch) load on the first accuracy query only.
    """
    from coevo.sim.attention import evaluate_sparse

    out = evaluate_sparse(model=model, method="topk-quantized-keys", top_k=top_k, key_bits=key_bits, split="val", max_batches=max_batches)
    return float(out["perplexity"]), float(out["dense_perplexity"])


class FpgaOptions(ProblemOptions):
    """Options of the ``fpga-transformer`` problem (the device and workload every design is scheduled on)."""

    model: Literal["lm-pydoc-tiny", "lm-pydoc"] = config_field(FpgaConfig, "search_model")
    device: Board = config_field(FpgaConfig, "device")
    pes: int = config_field(
        FpgaConfig,
        "pes",
        description=f"processing elements ({Accelerator.lanes} MACs each); at most the device's DSPs / {Accelerator.lanes}",
        ge=PES_MIN,
        le=PES_MAX,
    )
    batch: int = config_field(FpgaConfig, "search_batch")
    draws: int = config_field(FpgaConfig, "search_draws")
    buckets: int = config_field(FpgaConfig, "buckets", le=64)
    reconfig_cycles: int = config_field(FpgaConfig, "reconfig_cycles")
    change_rule: Literal["myopic", "amortized"] = config_field(FpgaConfig, "change_rule")
    ppl_batches: int = Field(4, ge=1, le=64, description="val batches (64 windows each) the perplexity is measured on")
    seed: int = config_field(FpgaConfig, "seed")


class FpgaTransformerProblem(LevelProblem):
    """FPGA transformer accelerator designs with top-k sparse attention (module doc)."""

    name = "fpga-transformer"
    Options = FpgaOptions
    run_group = "device"
    example_options: ClassVar[Mapping[str, Any]] = {"batch": 8, "draws": 1, "ppl_batches": 1}
    design_label = "design"
    design_noun = "an FPGA design"
    levels = TABLE
    point_type = FpgaDesign
    objectives = (
        Objective(
            "ppl_retention", "maximize", "dense/sparse perplexity", "expensive", depends_on=("model", "ppl_batches"), bounds=(0.0, None)
        ),
        Objective(
            "makespan_ms",
            "minimize",
            "ms",
            "cheap",
            depends_on=("model", "device", "pes", "batch", "draws", "buckets", "reconfig_cycles", "change_rule", "seed"),
        ),
        Objective("perplexity", "minimize", "perplexity", "expensive", depends_on=("model", "ppl_batches"), bounds=(1.0, None)),
        Objective("pe_utilization", "maximize", "share", "cheap", bounds=(0.0, 1.0)),
        Objective("padding_waste", "minimize", "share", "cheap", bounds=(0.0, 1.0)),
    )
    design_format = level_format(TABLE)

    def __init__(self, options: FpgaOptions | None = None, /, **values: Any) -> None:
        super().__init__(options, **values)
        o = self.options
        self.device = device(o.device)
        limit = self.device.max_pes(Accelerator.lanes)
        if o.pes > limit:
            raise UserInputError(
                f"problem 'fpga-transformer': pes={o.pes} exceeds the {limit} PEs of {o.device} ({self.device.dsps} DSP slices, "
                f"{Accelerator.lanes} per PE); use pes <= {limit} or device alveo-u280"
            )
        self.shape = model_shape(o.model)
        self.batches = draw_batches(corpus_lengths(), o.batch, o.draws, o.seed)
        for split in SPLITS:  # every design must fit the buffer: refuse the options now rather than a design mid-search
            self._accel(FpgaDesign(split, max(TILE_M), max(TILE_N), max(TILE_K), TOP_K[0], KEY_BITS[0], SCHEDULERS[0]))
        self._sim: dict[tuple[FpgaDesign, TransformerShape], dict[str, float]] = {}

    def _accel(self, d: FpgaDesign) -> Accelerator:
        shares = tuple(float(x) for x in d.split.split(":"))
        o = self.options
        return Accelerator(
            self.device,
            split_pes(o.pes, (shares[0], shares[1], shares[2])),
            tile_m=d.tile_m,
            tile_n=d.tile_n,
            tile_k=d.tile_k,
            reconfig_cycles=o.reconfig_cycles,
            change_rule=o.change_rule,
        )

    def _simulate(self, point: Any) -> dict[str, float]:
        return self.simulate(point)

    def simulate(self, point: Any, shape: TransformerShape | None = None) -> dict[str, float]:
        """Median ``makespan_ms``, ``pe_utilization`` and ``padding_waste`` of design ``point`` over the batches (cached).

        ``shape``: the transformer run, when not the model's own (a compressed model's weight bits,
        :attr:`~sim.fpga.model.TransformerShape.weight_bits`: the deploy-lm composition hands it on).
        """
        d = FpgaDesign(*point)
        run = self.shape if shape is None else shape
        if (d, run) not in self._sim:
            attn = AttentionConfig("topk", top_k=d.top_k, key_bits=d.key_bits)
            rows = compare_methods(self.batches, self._accel(d), run, attn, (d.scheduler,), self.options.buckets, check=False)
            ms = rows[d.scheduler]
            self._sim[d, run] = {
                "makespan_ms": float(np.median([m.makespan_ms for m in ms])),
                "pe_utilization": float(np.median([m.pe_utilization for m in ms])),
                "padding_waste": float(np.median([m.padding_waste for m in ms])),
            }
        return self._sim[d, run]

    def niches(self) -> tuple[Niche, ...]:
        def scheduler(point: Any) -> str:
            return str(FpgaDesign(*point).scheduler)

        return (
            Niche("padding", "every sequence padded to the batch maximum, processed in lockstep", lambda p: scheduler(p) == "padding"),
            Niche("bucketing", "sorted into buckets, each padded to its own maximum", lambda p: scheduler(p) == "bucketing"),
            Niche(
                "length-aware",
                "no padding: upward-rank list scheduling fills engine slots across sequences, on the design's fixed PE split",
                lambda p: scheduler(p) == "length-aware",
            ),
            Niche(
                "realloc",
                "length-aware, with the PEs re-allocated between the engines for each batch's length mix (the split is where it starts)",
                lambda p: scheduler(p) == "realloc",
            ),
        )

    def point_id(self, point: Any) -> str:
        d = FpgaDesign(*point)
        return f"s{d.split.replace(':', '-')}-t{d.tile_m}x{d.tile_n}x{d.tile_k}-k{d.top_k}-b{d.key_bits}-{d.scheduler}"

    def explain_encoding(self) -> str:
        o = self.options
        return (
            f"A design is an accelerator of {o.pes} PEs (16 int8 MACs each) on {o.device} running {o.model} with top-k sparse "
            "attention: split gives the PE shares of the matmul:attention:softmax engines; tile_m x tile_n x tile_k the GEMM "
            "tiles (bigger tiles reuse more operands per DDR byte but need more buffer); top_k the keys kept per query and "
            "key_bits the bits of the quantized Q/K pre-score (fewer: cheaper pre-score, worse selection); scheduler how a batch "
            f"of real sentences runs (padding, bucketing, length-aware on the fixed split, realloc: length-aware with the PEs "
            "re-allocated between the engines for each batch's length mix). Makespan is the median over {o.draws} batch(es) of "
            f"{o.batch} pydoc sentences. It is written as {self.design_format}."
        )

    def evaluate(self, point: Any) -> dict[str, float]:
        d = FpgaDesign(*point)
        sim = self._simulate(d)
        ppl, dense = sparse_perplexity(self.options.model, d.top_k, d.key_bits, self.options.ppl_batches)
        return {
            "ppl_retention": dense / ppl,
            "makespan_ms": sim["makespan_ms"],
            "perplexity": ppl,
            "pe_utilization": sim["pe_utilization"],
            "padding_waste": sim["padding_waste"],
        }

    # ---- operators for the co-evolution engine (Evolvable)

    def features(self, points: Sequence[Any]) -> np.ndarray:
        """Matmul and attention PE shares, log2 tiles, log2 top_k, key_bits, one-hot scheduler."""
        rows = []
        for point in points:
            d = FpgaDesign(*point)
            shares = [float(x) for x in d.split.split(":")]
            total = sum(shares)
            rows.append(
                [
                    shares[0] / total,
                    shares[1] / total,
                    np.log2(d.tile_m),
                    np.log2(d.tile_n),
                    np.log2(d.tile_k),
                    np.log2(d.top_k),
                    d.key_bits,
                ]
                + [float(d.scheduler == s) for s in SCHEDULERS]
            )
        return np.asarray(rows, dtype=float).reshape(len(rows), 7 + len(SCHEDULERS))

    def cheap_values(self, points: Sequence[Any]) -> dict[str, np.ndarray]:
        sims = [self._simulate(p) for p in points]
        return {k: np.array([s[k] for s in sims], dtype=float) for k in ("makespan_ms", "pe_utilization", "padding_waste")}


__all__ = ["CHOICES", "FpgaDesign", "FpgaOptions", "FpgaTransformerProblem", "sparse_perplexity"]
