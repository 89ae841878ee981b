"""deploy-lm: per-block pruning sparsity and weight bits of a zoo byte LM x an FPGA transformer accelerator with sparse attention, composed.

Parts (:mod:`search.compose`), each used as it is:

* ``prune``: the :class:`~search.prune.problem.PruneProblem` (an activation-aware unstructured
  sparsity for each block's attention and MLP group);
* ``bits``: the :class:`~search.deploy_lm.bits.LmBitsPart` (a round-to-nearest weight width for
  the same groups);
* ``fpga``: the :class:`~search.fpga.problem.FpgaTransformerProblem` (the PE split between the
  matmul, attention and softmax engines, GEMM tiles, top-k sparse attention's ``top_k`` and
  ``key_bits``, the scheduler) on the board preset ``board``.

The chain: the prune part hands on each linear layer's density (share of weights kept, rounded
per row as the masks round it); the bits part turns it and its widths into the bits stored per
weight of each layer (a sparse layer keeps each nonzero weight with a 5-bit relative index when
that is smaller than dense storage: :func:`sim.accel.network.stored_weight_bits`, Deep
Compression's fully connected index) and the weight memory; the fpga part schedules batches of
real pydoc sentences (:mod:`sim.fpga.lengths`) on the design with those weight bits
(:attr:`sim.fpga.model.TransformerShape.weight_bits`: narrow and sparse weights cut the weight
operand's DDR bytes; the int8 lanes keep their cycles, so only memory-bound tiles get faster).

Objectives:

* ``neg_log_ppl`` (maximised, expensive): ``-ln`` validation perplexity of the zoo LM pruned to
  the design's sparsities (:func:`search.prune.run.prune_model`, the prune problem's score),
  then weight-quantized to its widths, then run with top-k quantized-key attention at the
  design's ``top_k`` and ``key_bits`` (:func:`sim.attention.sparsify`); no retraining. One pass
  over the validation split (``eval_batches``), cached per (sparsities, widths, top_k, key_bits);
* ``latency_ms`` (minimised, cheap): median makespan of the batches on the accelerator model;
* ``weight_mb`` (minimised, cheap): the blocks' linear weights as stored (MB, 10^6 bytes);
* ``perplexity`` (minimised, expensive, reported).

The Pareto pair is (neg_log_ppl, latency_ms). Niches: the prune part's (light, medium, heavy
pruning). The space has 6^(2L) x 5^(2L) x 10,368 points (L blocks); its exact front is unknown.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, ClassVar, Literal

from coevo.search.compose import ComposedProblem, Part
from coevo.search.deploy_lm.bits import LmBitsPart
from coevo.search.errors import UserInputError
from coevo.search.fpga.problem import PES_MAX, PES_MIN, Board, FpgaDesign, FpgaTransformerProblem
from coevo.search.problem import Objective, ProblemOptions, config_field
from coevo.search.prune.problem import GROUPS, PruneProblem
from coevo.sim.accel.network import stored_weight_bits
from coevo.sim.fpga.config import FpgaConfig
from coevo.sim.fpga.model import Accelerator, TransformerShape, device, model_shape
from coevo.sim.prune.config import PruneConfig, Score

KIND_LAYERS: dict[str, tuple[str, ...]] = {
    "qkv": ("attn.q", "attn.k", "attn.v"),
    "out": ("attn.o",),
    "ffn1": ("mlp.fc1",),
    "ffn2": ("mlp.fc2",),
}
"""The accelerator's linear tasks (:data:`sim.fpga.model.LINEAR_KINDS`) -> the zoo ByteGPT block layers each one runs."""


_PERPLEXITY: dict[tuple[Any, ...], float] = {}
"""Validation perplexity per (accuracy options, sparsities, widths, top_k, key_bits), for the process: the sequential
flow's stage problems and the figure's re-scoring meet the same designs as the search did."""
_PRUNED: dict[tuple[Any, ...], Any] = {}
"""The latest pruned LMs, per (accuracy options, sparsities)."""


class DeployLmOptions(ProblemOptions):
    """Options of the ``deploy-lm`` problem: the zoo LM, the pruning's calibration and evaluation, the board and workload."""

    model: Literal["lm-pydoc-tiny", "lm-pydoc"] = config_field(
        FpgaConfig, "search_model", description="zoo LM to prune, quantize and schedule (lm-pydoc: the full recipe, trains once, slower)"
    )
    board: Board = config_field(FpgaConfig, "device")
    pes: int = config_field(
        FpgaConfig,
        "pes",
        description=f"processing elements ({Accelerator.lanes} MACs each); at most the board's DSPs / {Accelerator.lanes}",
        ge=PES_MIN,
        le=PES_MAX,
    )  # the fpga part's bounds; the board's own limit: parts()
    batch: int = config_field(FpgaConfig, "search_batch")
    draws: int = config_field(FpgaConfig, "search_draws")
    buckets: int = config_field(FpgaConfig, "buckets", le=64)
    seed: int = config_field(FpgaConfig, "seed")
    score: Score = config_field(PruneConfig, "score")
    calib_tokens: int = config_field(PruneConfig, "calib_tokens")
    calib_seed: int = config_field(PruneConfig, "seed")
    eval_batches: int = config_field(PruneConfig, "eval_batches")


@dataclass(frozen=True)
class LayerDensity:
    """What the prune part hands on: (layer, share of weights kept) of every linear layer of the blocks."""

    density: tuple[tuple[str, float], ...]

    def as_dict(self) -> dict[str, float]:
        """Layer -> density."""
        return dict(self.density)


@dataclass(frozen=True)
class CompressedLm:
    """What the bits part hands on: the transformer with its layers' stored weight bits, and the weight memory (MB)."""

    shape: TransformerShape
    weight_mb: float


@dataclass(frozen=True)
class FpgaRun:
    """What the fpga part produces: the batches' median makespan, PE utilisation and padding waste."""

    makespan_ms: float
    pe_utilization: float
    padding_waste: float


def layer_density(prune: PruneProblem, point: Any) -> LayerDensity:
    """Every block linear layer's density under the prune part's ``point`` (exact: rounded per row as the masks round it)."""
    from coevo.sim.prune.masks import keep_count  # torch: imported when a design is built, not when the problem is listed

    sparsity = prune.layer_sparsity(point)
    out = []
    for block in range(prune.blocks):
        for layers in GROUPS.values():
            for layer, _, ins in layers:
                name = f"blocks.{block}.{layer}"
                width = ins * prune.width
                out.append((name, keep_count(width, sparsity.get(name, 0.0)) / width))
    return LayerDensity(tuple(out))


def compressed_lm(model: str, bits: Mapping[str, int], density: Mapping[str, float]) -> CompressedLm:
    """The LM ``model``'s accelerator shape with each layer's stored bits per weight, and its blocks' weight memory (module doc)."""
    base = model_shape(model)
    d = base.d_model
    sizes = {"attn.q": d * d, "attn.k": d * d, "attn.v": d * d, "attn.o": d * d, "mlp.fc1": base.d_ff * d, "mlp.fc2": d * base.d_ff}
    per_layer = []
    stored_bits = 0.0
    for block in range(base.n_layers):
        stored = {
            layer: stored_weight_bits(bits[f"blocks.{block}.{layer}"], density[f"blocks.{block}.{layer}"], "linear") for layer in sizes
        }
        stored_bits += sum(sizes[layer] * b for layer, b in stored.items())
        widths = tuple(sum(sizes[x] * stored[x] for x in layers) / sum(sizes[x] for x in layers) for layers in KIND_LAYERS.values())
        per_layer.append((widths[0], widths[1], widths[2], widths[3]))
    return CompressedLm(dataclasses.replace(base, weight_bits=tuple(per_layer)), stored_bits / 8 / 1e6)


class DeployLmProblem(ComposedProblem):
    """Sparsity and weight bits per block group of a zoo LM, and an FPGA accelerator with sparse attention for it (module doc).

    Example:
        >>> p = DeployLmProblem(batch=4, draws=1)
        >>> lm = p.chain(p.parse_design(
        ...     "prune: " + " ".join(f"{n}=0" for n in p.part("prune").problem.distributions()) + " ; "
        ...     "bits: " + " ".join(f"{n}=8" for n in p.part("bits").problem.distributions()) + " ; "
        ...     "fpga: split=4:3:1 tile_m=32 tile_n=64 tile_k=64 top_k=32 key_bits=4 scheduler=length-aware"
        ... ))["bits"]
        >>> round(lm.weight_mb, 4)  # 2 blocks x 12 x 64^2 int8 weights
        0.0983
    """

    name = "deploy-lm"
    Options = DeployLmOptions
    run_group = "board"
    example_options: ClassVar[Mapping[str, Any]] = {"batch": 8, "draws": 1, "calib_tokens": 64, "eval_batches": 1}
    niche_parts = ("prune",)
    design_label = "design"
    objectives = (
        Objective(
            "neg_log_ppl", "maximize", "-ln ppl", "expensive", depends_on=("model", "score", "calib_tokens", "calib_seed", "eval_batches")
        ),
        Objective(
            "latency_ms",
            "minimize",
            "ms per batch of pydoc sentences (median)",
            "cheap",
            depends_on=("model", "board", "pes", "batch", "draws", "buckets", "seed"),
            bounds=(0.0, None),
        ),
        Objective("weight_mb", "minimize", "MB of block weights as stored", "cheap", depends_on=("model",), bounds=(0.0, None)),
        Objective(
            "perplexity",
            "minimize",
            "perplexity",
            "expensive",
            depends_on=("model", "score", "calib_tokens", "calib_seed", "eval_batches"),
            bounds=(1.0, None),
        ),
    )

    def parts(self) -> list[Part]:
        o = self.options
        prune = PruneProblem(
            model=o.model, score=o.score, calib_tokens=o.calib_tokens, calib_seed=o.calib_seed, eval_batches=o.eval_batches
        )
        bits = LmBitsPart(model=o.model, eval_batches=o.eval_batches)
        fpga = self.fpga_part()
        return [
            Part("prune", prune, stage=lambda s, _: layer_density(prune, s), produces=LayerDensity),
            Part(
                "bits",
                bits,
                stage=lambda b, dens: compressed_lm(o.model, bits.layer_bits(b), dens.as_dict()),
                consumes=LayerDensity,
                produces=CompressedLm,
            ),
            Part("fpga", fpga, stage=lambda p, lm: FpgaRun(**fpga.simulate(p, lm.shape)), consumes=CompressedLm, produces=FpgaRun),
        ]

    def fpga_part(self) -> FpgaTransformerProblem:
        """The fpga part (a hook: the sequential flow's first stage fixes the accelerator by handing another).

        Raises:
            UserInputError: more PEs than the board's DSP slices allow (said in this problem's option names).
        """
        o = self.options
        board = device(o.board)
        limit = board.max_pes(Accelerator.lanes)
        if o.pes > limit:  # the fpga part would refuse it too, in its own option names (device)
            raise UserInputError(
                f"problem 'deploy-lm': pes={o.pes} exceeds the {limit} PEs of board {o.board} ({board.dsps} DSP slices, "
                f"{Accelerator.lanes} MACs per PE); use --pes <= {limit} or --board alveo-u280"
            )
        return FpgaTransformerProblem(**self.fpga_options())

    def fpga_options(self) -> dict[str, Any]:
        """The fpga part's options, from this problem's (the board is its ``device``)."""
        o = self.options
        return {"model": o.model, "device": o.board, "pes": o.pes, "batch": o.batch, "draws": o.draws, "buckets": o.buckets, "seed": o.seed}

    def values(self, point: tuple[Any, ...], outputs: Mapping[str, Any], *, cheap_only: bool) -> dict[str, float]:
        run: FpgaRun = outputs["fpga"]
        out = {"latency_ms": run.makespan_ms, "weight_mb": outputs["bits"].weight_mb}
        if not cheap_only:
            design = FpgaDesign(*self.subpoint(point, "fpga"))
            ppl = self.compression_perplexity(self.subpoint(point, "prune"), self.subpoint(point, "bits"), design.top_k, design.key_bits)
            out["perplexity"] = ppl
            out["neg_log_ppl"] = -math.log(ppl)
        return out

    def compression(self, sparsities: Any, widths: Any) -> CompressedLm:
        """The compressed LM the chain hands the fpga part for the prune part's ``sparsities`` and the bits part's ``widths``."""
        prune, bits = self.part("prune").problem, self.part("bits").problem
        assert isinstance(prune, PruneProblem) and isinstance(bits, LmBitsPart)
        return compressed_lm(self.options.model, bits.layer_bits(widths), layer_density(prune, sparsities).as_dict())

    def compression_perplexity(self, sparsities: Any, widths: Any, top_k: int | None, key_bits: int = 8) -> float:
        """Validation perplexity of the LM pruned to ``sparsities``, quantized to ``widths``, with top-k attention (module doc).

        ``top_k`` None: exact (dense) attention, the check against the zoo model's own perplexity.
        """
        key = (*self._accuracy_options(), tuple(sparsities), tuple(widths), top_k, key_bits)
        if key not in _PERPLEXITY:
            import torch

            from coevo.search.prune.run import zoo_model
            from coevo.sim.attention import SparseConfig, sparsify

            bits = self.part("bits").problem
            assert isinstance(bits, LmBitsPart)
            zm = zoo_model(self.options.model)
            model = bits.quantized(self._pruned_model(tuple(sparsities)), tuple(widths))
            if top_k is not None:
                model = sparsify(model, SparseConfig("topk-quantized-keys", top_k=top_k, key_bits=key_bits))
            with torch.no_grad():
                _PERPLEXITY[key] = float(zm.evaluate(model, split="val", max_batches=self.options.eval_batches or None))
        return _PERPLEXITY[key]

    def _accuracy_options(self) -> tuple[Any, ...]:
        o = self.options
        return o.model, o.score, o.calib_tokens, o.calib_seed, o.eval_batches

    def _pruned_model(self, sparsities: tuple[float, ...]) -> Any:
        """The zoo LM pruned to ``sparsities`` (the prune part's score and calibration), kept for the few latest sparsities."""
        key = (*self._accuracy_options(), sparsities)
        if key not in _PRUNED:
            from coevo.search.prune.run import prune_model, zoo_model

            prune = self.part("prune").problem
            assert isinstance(prune, PruneProblem)
            zm = zoo_model(self.options.model)
            sparsity = prune.layer_sparsity(sparsities)
            o = self.options
            model = prune_model(zm, sparsity, score=o.score, calib_tokens=o.calib_tokens, seed=o.calib_seed).model if sparsity else zm.model
            if len(_PRUNED) >= 8:  # a search revisits few sparsities at a time; the LMs are small but not free
                _PRUNED.pop(next(iter(_PRUNED)))
            _PRUNED[key] = model
        return _PRUNED[key]
