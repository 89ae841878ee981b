"""deploy-cnn: per-layer weight bits and pruning sparsity of a zoo CNN x a systolic-array accelerator, composed (:mod:`search.compose`).

Parts, each used as it is:

* ``bits``: the :class:`~search.quant.problem.QuantProblem` (a width from 2-8 bits for each
  layer's two class-importance groups of units, its average-bits niches), with no fine-tuning
  (below);
* ``sparsity``: the :class:`~search.deploy_cnn.sparsity.SparsityPart` (a magnitude-pruning
  sparsity from the prune problem's levels for each layer but the output head);
* ``accel``: the :class:`~search.nb201_accel.accel.AccelPart` of nb201-accel (rows, columns,
  dataflow, three SRAM buffers, clock).

The chain: the bits part hands on each layer's average weight bits (its groups' widths
weighted by their weights); the sparsity part adds each layer's density and builds the CNN's
real layer shapes (traced from the zoo model, :func:`cnn_layers`) into a
:class:`~sim.accel.network.Workload` whose layers carry their bits and density; the accelerator
part maps it onto the array (:func:`sim.accel.network.network_cost`). What bits and density
change in the accelerator model, and the sources, are in :mod:`sim.accel.network`.

Objectives: ``accuracy`` (expensive): validation accuracy (%) of the zoo CNN pruned by
magnitude to the design's sparsities, then quantized round-to-nearest to its widths (no
fine-tuning: :func:`sim.quant.finetune` does not keep pruning masks, so retraining would
regrow the pruned weights); ``energy_uj`` and ``latency_ms`` per image on the accelerator
model and ``area_mm2`` of the array and its buffers, all cheap. The Pareto pair is
(accuracy, energy_uj). The space has 5^10 x 6^4 x 30,000 points; its exact front is unknown.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

from coevo.search.compose import ComposedProblem, Part
from coevo.search.deploy_cnn.sparsity import SparsityPart, zoo_cnn
from coevo.search.nb201_accel.accel import AccelOptions, AccelPart, AccelResult
from coevo.search.problem import Objective, config_field
from coevo.search.quant.problem import ARCH_LAYERS, QuantProblem
from coevo.sim.accel.network import ArrayConfig, NetLayer, Workload, network_cost
from coevo.sim.accel.systolic import Layer
from coevo.sim.quant.config import QuantConfig


class DeployCnnOptions(AccelOptions):
    """Options of the ``deploy-cnn`` problem: the zoo CNN, and the accelerator part's (DRAM bandwidth)."""

    model: Literal["cnn-digits"] = config_field(QuantConfig, "model", description="zoo CNN to quantize, prune and map onto the array")


@dataclass(frozen=True)
class LayerBits:
    """What the bits part hands on: (layer, average weight bits) of every Conv2d/Linear layer, in model order."""

    bits: tuple[tuple[str, float], ...]

    def as_dict(self) -> dict[str, float]:
        """Layer -> average weight bits."""
        return dict(self.bits)


@functools.cache
def cnn_layers(model: str) -> tuple[tuple[str, str, Layer], ...]:
    """(layer, kind, shape) of every Conv2d/Linear layer of the zoo CNN ``model``, traced on one validation image.

    Max pooling and ReLU run in the array's output path and are not counted (as in :mod:`sim.accel.network`).
    """
    import torch
    from torch import nn

    zm = zoo_cnn(model)
    modules = dict(zm.model.named_modules())
    seen: dict[str, tuple[int, ...]] = {}

    def recorder(name: str) -> Any:
        return lambda _module, args: seen.__setitem__(name, tuple(args[0].shape))

    hooks = [modules[name].register_forward_pre_hook(recorder(name)) for name in ARCH_LAYERS[model]]
    was = zm.model.training
    try:
        x, _ = next(iter(zm.loader("val")))
        with torch.no_grad():
            zm.model.eval()(x[:1])
    finally:
        zm.model.train(was)
        for h in hooks:
            h.remove()
    out = []
    for name in ARCH_LAYERS[model]:
        mod = modules[name]
        if isinstance(mod, nn.Conv2d):
            _, c, h, w = seen[name]
            layer = Layer(
                "conv", c_in=c, h=h, w=w, c_out=mod.out_channels,
                kernel=mod.kernel_size[0], stride=mod.stride[0], padding=int(mod.padding[0]),
            )  # fmt: skip
            out.append((name, "conv", layer))
        else:
            assert isinstance(mod, nn.Linear)
            out.append((name, "linear", Layer("gemm", m=1, k=mod.in_features, n=mod.out_features)))
    return tuple(out)


def cnn_workload(model: str, bits: Mapping[str, float], density: Mapping[str, float]) -> Workload:
    """The CNN's layers with each layer's average weight bits and density (absent: 8 bits, dense)."""
    return Workload(
        tuple(
            NetLayer(name, kind, layer, 1, weight_bits=bits.get(name, 8.0), density=density.get(name, 1.0))
            for name, kind, layer in cnn_layers(model)
        )
    )


class DeployCnnProblem(ComposedProblem):
    """Bits and sparsity per layer of a zoo CNN, and a systolic-array accelerator for it (module doc).

    Example:
        >>> p = DeployCnnProblem()
        >>> dense = p.parse_design(
        ...     "bits: " + " ".join(f"{n}=8" for n in p.part("bits").problem.distributions()) + " ; "
        ...     "sparsity: " + " ".join(f"{n}=0" for n in p.part("sparsity").problem.distributions()) + " ; "
        ...     "accel: rows=16 cols=16 dataflow=ws ifmap_kb=32 filter_kb=16 ofmap_kb=32 clock_mhz=400"
        ... )
        >>> p.evaluate(dense)["accuracy"] > 90
        True
    """

    name = "deploy-cnn"
    Options = DeployCnnOptions
    niche_parts = ("bits",)
    design_label = "design"
    objectives = (
        Objective("accuracy", "maximize", "%", "expensive", depends_on=("model",), bounds=(0.0, 100.0)),
        Objective(
            "energy_uj", "minimize", "uJ per image (array MACs + SRAM + DRAM, 45 nm)", "cheap", depends_on=("model",), bounds=(0.0, None)
        ),
        Objective("latency_ms", "minimize", "ms per image", "cheap", depends_on=("model", "dram_gbps"), bounds=(0.0, None)),
        Objective("area_mm2", "minimize", "mm^2 (array + buffers, 45 nm)", "cheap", depends_on=(), bounds=(0.0, None)),
    )

    def __init__(self, options: Any = None, /, **values: Any) -> None:
        super().__init__(options, **values)
        self._accuracy: dict[tuple[Any, ...], float] = {}

    def parts(self) -> list[Part]:
        model = self.options.model
        bits = QuantProblem(model=model, finetune_epochs=0)
        sparsity = SparsityPart(model=model)
        accel = self.accel_part()
        return [
            Part("bits", bits, stage=lambda w, _: LayerBits(tuple(bits.layer_bits(w).items())), produces=LayerBits),
            Part(
                "sparsity",
                sparsity,
                stage=lambda s, lb: cnn_workload(model, lb.as_dict(), sparsity.densities(s)),
                consumes=LayerBits,
                produces=Workload,
            ),
            Part("accel", accel, stage=accel.run, consumes=Workload, produces=AccelResult),
        ]

    def accel_part(self) -> AccelPart:
        """The accelerator part (a hook: the sequential flow's first stage fixes the accelerator by handing another)."""
        return AccelPart(dram_gbps=self.options.dram_gbps)

    def values(self, point: tuple[Any, ...], outputs: Mapping[str, Any], *, cheap_only: bool) -> dict[str, float]:
        result: AccelResult = outputs["accel"]
        out = {"energy_uj": result.cost.energy_uj, "latency_ms": result.cost.latency_ms, "area_mm2": result.area_mm2}
        if not cheap_only:
            out["accuracy"] = self.accuracy(point)
        return out

    def accuracy(self, point: tuple[Any, ...]) -> float:
        """Validation accuracy (%) of the CNN pruned to ``point``'s sparsities, then quantized to its widths (module doc)."""
        return self.compression_accuracy(self.subpoint(point, "bits"), self.subpoint(point, "sparsity"))

    def compression_workload(self, widths: Any, sparsities: Any) -> Workload:
        """The CNN's workload under ``widths`` (the bits part's point) and ``sparsities`` (the sparsity part's), as the chain builds it."""
        bits = self.part("bits").problem
        sparsity = self.part("sparsity").problem
        assert isinstance(bits, QuantProblem) and isinstance(sparsity, SparsityPart)
        return cnn_workload(self.options.model, bits.layer_bits(widths), sparsity.densities(sparsities))

    def compression_accuracy(self, widths: Any, sparsities: Any) -> float:
        """Validation accuracy (%) of the CNN pruned to ``sparsities`` (the sparsity part's point), then quantized to ``widths``."""
        key = (tuple(widths), tuple(sparsities))
        if key not in self._accuracy:
            from coevo.sim.quant import accuracy, quantized_copy

            bits = self.part("bits").problem
            sparsity = self.part("sparsity").problem
            assert isinstance(bits, QuantProblem) and isinstance(sparsity, SparsityPart)
            zm = zoo_cnn(self.options.model)
            model = quantized_copy(sparsity.pruned(zm.model, key[1]), bits.unit_bits(key[0]))
            self._accuracy[key] = accuracy(model, zm.loader("val"))
        return self._accuracy[key]

    def acquisition_bounds(self) -> tuple[float, float]:
        """The quant problem's accuracy floor, and the most energy any design can take (the dense INT8 CNN on its worst accelerator)."""
        bits = self.part("bits").problem
        assert isinstance(bits, QuantProblem)
        return bits.acquisition_bounds()[0], worst_energy(self.options.model, self.options.dram_gbps)


@functools.cache
def worst_energy(model: str, dram_gbps: float) -> float:
    """Energy (uJ) of the dense INT8 CNN on the accelerator where it costs most: every design costs at most that.

    Narrower or sparser weights only lower a layer's energy (:mod:`sim.accel.network`), so the dense INT8 network bounds every design.
    """
    from coevo.search.nb201_accel.problem import all_accels

    dense = cnn_workload(model, {}, {})
    return max(
        network_cost(dense, ArrayConfig(a.rows, a.cols, a.dataflow, a.ifmap_kb, a.filter_kb, a.ofmap_kb, a.clock_mhz, dram_gbps)).energy_uj
        for a in all_accels()
    )
