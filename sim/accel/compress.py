"""Energy-aware layer-wise weight compression of a small CNN inside quantization-aware training.

The model (``cnn-digits``) is a 4-layer CNN trained on scikit-learn's handwritten digits
(1,797 8x8 images that ship inside the package; fixed 80/20 split). Weights are INT8
(per-layer symmetric scale), activations INT8 (per-layer scale from the training data).
For each layer, :mod:`sim.accel.energy` measures the energy per use of every INT8 weight
value on that layer's real activation streams; a **value restriction** keeps only the
``K`` lowest-energy values of a layer (0 always among them), and quantization-aware
training (straight-through estimator; weights projected to the nearest allowed value)
recovers accuracy.

Schemes, all against the plain INT8 model (``K = 256`` everywhere):

* ``layer-agnostic``: the same ``K`` in every layer: the smallest ``K`` whose accuracy drop
  stays within ``accuracy_drop_max``.
* ``layer-wise``: layers in order of their share of the energy, highest first; each is
  restricted as hard as the accuracy constraint allows given the ones before it.

Energy of an inference: for every weight, its value's energy per use times its uses (output
positions of the layer). Reported per scheme: energy (relative units, and vs INT8),
accuracy, and each layer's ``K``.
"""

from __future__ import annotations

import copy
import functools
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from sim.accel.energy import EnergyTable, energy_table
from sim.errors import UserInputError

MODELS = ("cnn-digits",)
LEVELS = (256, 128, 64, 32, 16, 8, 4)
"""Allowed-value counts tried per layer, loosest first."""


class DigitsCNN(nn.Module):
    """conv 1->16, conv 16->32, pool, conv 32->32, pool, fc 128->10 (ReLU between)."""

    layer_names = ("conv1", "conv2", "conv3", "fc")

    def __init__(self) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(1, 16, 3, padding=1)
        self.conv2 = nn.Conv2d(16, 32, 3, padding=1)
        self.conv3 = nn.Conv2d(32, 32, 3, padding=1)
        self.fc = nn.Linear(128, 10)

    def forward(self, x: torch.Tensor, quant: QuantState | None = None) -> torch.Tensor:
        q = quant or QuantState()
        x = F.relu(q.conv(self.conv1, "conv1", x))
        x = F.max_pool2d(F.relu(q.conv(self.conv2, "conv2", x)), 2)
        x = F.max_pool2d(F.relu(q.conv(self.conv3, "conv3", x)), 2)
        return q.linear(self.fc, "fc", x.flatten(1))


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
    """INT8 fake quantization with optional per-layer allowed weight values (None: float)."""

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

    def conv(self, module: nn.Conv2d, name: str, x: torch.Tensor) -> torch.Tensor:
        return F.conv2d(self.act(name, x), self.weight(module, name), module.bias, padding=module.padding)

    def linear(self, module: nn.Linear, name: str, x: torch.Tensor) -> torch.Tensor:
        return F.linear(self.act(name, x), self.weight(module, name), module.bias)


@functools.lru_cache(maxsize=4)
def compressor(seed: int = 0) -> Compressor:
    """The trained model and energy tables for ``seed`` (built once per process)."""
    return Compressor(seed=seed)


@functools.lru_cache(maxsize=1)
def load_digits_split(seed: int = 0) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """(x_train, y_train, x_test, y_test): scikit-learn digits scaled to [0, 1], a fixed 80/20 split."""
    from sklearn.datasets import load_digits  # the data ship inside the package: no download

    data = load_digits()
    x = torch.tensor(data.images, dtype=torch.float32).unsqueeze(1) / 16.0
    y = torch.tensor(data.target, dtype=torch.long)
    order = torch.randperm(len(y), generator=torch.Generator().manual_seed(seed))
    cut = int(0.8 * len(y))
    return x[order[:cut]], y[order[:cut]], x[order[cut:]], y[order[cut:]]


def _train(model: DigitsCNN, quant: QuantState, epochs: int, lr: float, seed: int) -> None:
    x, y, _, _ = load_digits_split()
    torch.manual_seed(seed)
    opt = torch.optim.Adam(model.parameters(), lr=lr)
    for _ in range(epochs):
        for idx in torch.randperm(len(y)).split(64):
            opt.zero_grad()
            F.cross_entropy(model(x[idx], quant), y[idx]).backward()
            opt.step()


def accuracy(model: DigitsCNN, quant: QuantState) -> float:
    """Test accuracy (%)."""
    _, _, x, y = load_digits_split()
    with torch.no_grad():
        return float((model(x, quant).argmax(1) == y).float().mean()) * 100


def _im2col(name: str, x: torch.Tensor, module: nn.Module) -> torch.Tensor:
    if isinstance(module, nn.Conv2d):
        pad = module.padding if isinstance(module.padding, tuple) else (0, 0)
        cols = F.unfold(x, module.kernel_size, padding=pad)  # (B, K, L)
        return cols.transpose(1, 2).reshape(-1, cols.shape[1])
    return x


@dataclass(frozen=True)
class SchemeResult:
    """One compression scheme's outcome."""

    scheme: str
    levels: dict[str, int]
    accuracy: float
    energy: float
    energy_by_layer: dict[str, float]

    def as_dict(self, base_energy: float, base_accuracy: float) -> dict[str, Any]:
        """JSON-friendly, with energy and accuracy relative to plain INT8."""
        return {
            "scheme": self.scheme,
            "allowed_values_per_layer": self.levels,
            "accuracy": round(self.accuracy, 2),
            "accuracy_drop": round(base_accuracy - self.accuracy, 2),
            "energy": round(self.energy),
            "energy_reduction_vs_int8": round(1 - self.energy / base_energy, 4),
            "energy_by_layer": {k: round(v) for k, v in self.energy_by_layer.items()},
        }


@dataclass(frozen=True)
class CompressionReport:
    """What :func:`compress` found: plain INT8, the layer-agnostic and the layer-wise restriction.

    Attributes:
        model: the model compressed.
        accuracy_drop_max: the accuracy budget, percentage points below plain INT8.
        int8: plain INT8 (no restriction): the reference.
        layer_agnostic: the same allowed-value count in every layer, as tight as the budget allows.
        layer_wise: per-layer counts, highest-energy layers restricted first.
        energy_tables: per layer, the energy per use of a few weight values and its 8 cheapest
            values (:meth:`Compressor.table_summary`), for people to read.
        wall_s: seconds the search of restrictions took.
    """

    model: str
    accuracy_drop_max: float
    int8: SchemeResult
    layer_agnostic: SchemeResult
    layer_wise: SchemeResult
    energy_tables: dict[str, Any]
    wall_s: float
    dataset: ClassVar[str] = "scikit-learn digits (1,797 8x8 images, 80/20 split)"
    energy_units: ClassVar[str] = "bit toggles per inference (multiplier outputs + 22-bit partial sums), weight-stationary array"

    def accuracy_drop(self, scheme: SchemeResult) -> float:
        """Percentage points ``scheme`` lost against plain INT8."""
        return self.int8.accuracy - scheme.accuracy

    def energy_reduction(self, scheme: SchemeResult) -> float:
        """Share of plain INT8's energy that ``scheme`` saves."""
        return 1 - scheme.energy / self.int8.energy

    def as_dict(self) -> dict[str, Any]:
        """JSON-friendly form (the ``compress.energy_aware`` tool's value), rounded for reading."""
        base_energy, base_accuracy = self.int8.energy, self.int8.accuracy
        return {
            "model": self.model,
            "dataset": self.dataset,
            "accuracy_drop_max": self.accuracy_drop_max,
            "int8": self.int8.as_dict(base_energy, base_accuracy),
            "layer_agnostic": self.layer_agnostic.as_dict(base_energy, base_accuracy),
            "layer_wise": self.layer_wise.as_dict(base_energy, base_accuracy),
            "energy_units": self.energy_units,
            "energy_tables": self.energy_tables,
            "wall_s": self.wall_s,
        }


class Compressor:
    """Train the float model once, measure energy tables, then evaluate value restrictions by QAT."""

    def __init__(self, *, seed: int = 0, epochs: int = 30, qat_epochs: int = 8, rows: int = 32) -> None:
        self.seed, self.qat_epochs = seed, qat_epochs
        torch.manual_seed(seed)
        self.float_model = DigitsCNN()
        _train(self.float_model, QuantState(), epochs, 3e-3, seed)
        x, _, _, _ = load_digits_split()
        record: dict[str, torch.Tensor] = {}
        with torch.no_grad():
            self.float_model(x, QuantState(record=record))
        self.quant = QuantState(act_scale={k: float(v.abs().max()) / 127 or 1.0 for k, v in record.items()}, enabled=True)
        self.tables: dict[str, EnergyTable] = {}
        self.uses: dict[str, int] = {}
        for name in DigitsCNN.layer_names:
            module = getattr(self.float_model, name)
            cols = _im2col(name, record[name], module)
            acts = torch.clamp(torch.round(cols / self.quant.act_scale[name]), -128, 127).numpy().astype(np.int64)
            weights = int_weights(module.weight.reshape(module.weight.shape[0], -1))[0].T.numpy().astype(np.int64)  # (K, N)
            self.tables[name] = energy_table(name, acts, weights, rows=rows, seed=seed)
            self.uses[name] = cols.shape[0] // len(x)  # output positions per sample: uses of each weight per inference
        self.base = self.evaluate(dict.fromkeys(DigitsCNN.layer_names, 256), "int8")

    def _restricted(self, levels: dict[str, int]) -> QuantState:
        """INT8 quantization with each layer limited to its ``levels[layer]`` lowest-energy values (256: no limit)."""
        allowed = {n: torch.tensor(self.tables[n].cheapest(k), dtype=torch.float32) for n, k in levels.items() if k < 256}
        return QuantState(act_scale=self.quant.act_scale, allowed=allowed, enabled=True)

    def _energy_by_layer(self, model: DigitsCNN, quant: QuantState) -> dict[str, float]:
        """Energy of one inference per layer: each weight's INT8 value's energy per use, times its uses."""
        return {
            n: float(self.tables[n].of(int_weights(getattr(model, n).weight, quant.allowed.get(n))[0].numpy()).sum() * self.uses[n])
            for n in DigitsCNN.layer_names
        }

    def projected_energy(self, levels: dict[str, int]) -> float:
        """Energy of the float model's INT8 weights projected onto each layer's allowed values, without training.

        A cheap estimate of a restriction's energy (QAT then moves weights within the same allowed set)."""
        return sum(self._energy_by_layer(self.float_model, self._restricted(levels)).values())

    @functools.cached_property
    def int8_projected_energy(self) -> float:
        """:meth:`projected_energy` of plain INT8 (no restriction): the denominator of energy ratios."""
        return self.projected_energy(dict.fromkeys(DigitsCNN.layer_names, 256))

    def table_summary(self) -> dict[str, Any]:
        """Per layer: energy per use of a few weight values, and its 8 cheapest values."""
        probe = (0, 1, -1, 2, 3, 64, 127, -128)
        return {
            n: {"energy_per_use": {str(v): round(float(t.of(np.array([v]))[0]), 3) for v in probe}, "cheapest_8": t.cheapest(8).tolist()}
            for n, t in self.tables.items()
        }

    def evaluate(self, levels: dict[str, int], scheme: str) -> SchemeResult:
        """QAT with ``levels[layer]`` allowed values per layer (256: plain INT8), then accuracy and energy."""
        model = DigitsCNN()
        model.load_state_dict(self.float_model.state_dict())
        quant = self._restricted(levels)
        _train(model, quant, self.qat_epochs, 5e-4, self.seed + 1)
        by_layer = self._energy_by_layer(model, quant)
        return SchemeResult(scheme, dict(levels), accuracy(model, quant), sum(by_layer.values()), by_layer)


def _tightest(
    comp: Compressor, levels_for: Callable[[int], dict[str, int]], ks: Sequence[int], floor: float, label: str, say: Callable[[str], None]
) -> SchemeResult | None:
    """The result at the tightest ``k`` (in order, loosest first) that keeps accuracy >= ``floor``; stops at the first miss."""
    scheme = label.split()[0]
    best = None
    for k in ks:
        r = comp.evaluate(levels_for(k), scheme)
        say(f"{label} K={k}: accuracy {r.accuracy:.2f}%, energy {r.energy:.0f}")
        if r.accuracy < floor:
            break
        best = r
    return best


def compress(
    model: str = "cnn-digits",
    *,
    accuracy_drop_max: float = 2.0,
    seed: int = 0,
    levels: Sequence[int] = LEVELS,
    progress: Callable[[str], None] | None = None,
) -> CompressionReport:
    """Plain INT8, the layer-agnostic restriction and the layer-wise energy-aware one (module doc).

    Results are memoised per (model, accuracy budget, seed, levels) in the process: the
    run is deterministic, and chat or tests asking again get the answer at once.

    Raises:
        UserInputError: unknown model or a negative accuracy budget.
    """
    key = (model, float(accuracy_drop_max), seed, tuple(levels))
    if key not in _RESULTS:
        _RESULTS[key] = _compress(model, accuracy_drop_max=accuracy_drop_max, seed=seed, levels=levels, progress=progress)
    return copy.deepcopy(_RESULTS[key])


_RESULTS: dict[tuple[Any, ...], CompressionReport] = {}


def _compress(
    model: str = "cnn-digits",
    *,
    accuracy_drop_max: float = 2.0,
    seed: int = 0,
    levels: Sequence[int] = LEVELS,
    progress: Callable[[str], None] | None = None,
) -> CompressionReport:
    if model not in MODELS:
        raise UserInputError(f"unknown model {model!r}; available: {', '.join(MODELS)} (a CNN on scikit-learn's 8x8 digits)")
    if accuracy_drop_max < 0:
        raise UserInputError(f"accuracy_drop_max must be >= 0 (percentage points), got {accuracy_drop_max}")
    started = time.perf_counter()
    say = progress or (lambda _msg: None)
    comp = compressor(seed)
    base = comp.base
    floor = base.accuracy - accuracy_drop_max
    say(f"int8: accuracy {base.accuracy:.2f}%, energy {base.energy:.0f}")
    layers = DigitsCNN.layer_names
    agnostic = _tightest(comp, lambda k: dict.fromkeys(layers, k), levels[1:], floor, "layer-agnostic", say) or base
    layerwise = base
    for name in sorted(layers, key=lambda n: -base.energy_by_layer[n]):  # highest-energy layers first

        def tighten(k: int, name: str = name, chosen: dict[str, int] = layerwise.levels) -> dict[str, int]:
            return {**chosen, name: k}

        layerwise = _tightest(comp, tighten, levels[1:], floor, f"layer-wise {name}", say) or layerwise
    return CompressionReport(
        model=model,
        accuracy_drop_max=accuracy_drop_max,
        int8=base,
        layer_agnostic=agnostic,
        layer_wise=layerwise,
        energy_tables=comp.table_summary(),
        wall_s=round(time.perf_counter() - started, 2),
    )
