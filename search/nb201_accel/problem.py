"""nb201-accel: an NAS-Bench-201 cell x a systolic-array accelerator, composed from the two (:mod:`search.compose`).

Parts: ``cell``, the :class:`~search.nb201.problem.NB201Problem` as it is (its cells, operators,
complexity niches, accuracy table and zero-cost proxies), and ``accel``, the
:class:`~search.nb201_accel.accel.AccelPart` (rows, columns, dataflow, three SRAM buffers,
clock). The chain: the cell's stage builds the NB201 network's real layer shapes around the
cell (:func:`sim.accel.network.nb201_layers`, int8), the accelerator's stage maps them onto the
array (:func:`sim.accel.network.network_cost`, on :func:`sim.accel.systolic.map_layer`).

Objectives: ``accuracy`` (the shipped NB201 table's test accuracy: the expensive one, it stands
for training), ``latency_ms`` and ``energy_uj`` per image on the accelerator model, and
``area_mm2`` of the array and its buffers (:mod:`sim.accel.area`), all three cheap.

The Pareto pair is (accuracy, latency_ms), the first two. Latency is where the two parts
interact most: the best array shape and dataflow depend on the cell's layers (a pool-heavy cell
wants another array than a convolution-heavy one), and the buffers and the clock trade through
the DRAM-bandwidth bound. Energy is dominated by DRAM traffic, which :mod:`sim.accel.systolic`
counts per layer on the im2col operands, so it mostly follows the cell's operation counts; area
does not depend on the cell at all. Both are recorded and reported with every design.

The exact front of the pair is known (:meth:`NB201AccelProblem.reference`): latency depends on a
cell only through its counts of 1x1 convolutions, 3x3 convolutions and pools, so every
accelerator is scored on the 84 such counts at once.
"""

from __future__ import annotations

import functools
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np
from pydantic import Field

from coevo.search.compose import ID_SEPARATOR, ComposedProblem, Part, PredictableComposition
from coevo.search.metrics import FrontReference
from coevo.search.nb201.problem import NB201Problem
from coevo.search.nb201.space import OPS
from coevo.search.nb201.table import USEFUL_FLOOR
from coevo.search.nb201_accel.accel import ACCEL_LEVELS, Accel, AccelPart, AccelResult
from coevo.search.problem import Objective, ProblemOptions
from coevo.sim.accel.network import Workload, nb201_layers
from coevo.sim.accel.systolic import map_layer

IMAGE = {"cifar10": (32, 10), "cifar100": (32, 100), "imagenet16_120": (16, 120)}
"""Dataset -> (image side in pixels, classes): what the network's layer shapes depend on."""


class NB201AccelOptions(ProblemOptions):
    """Options of the ``nb201-accel`` problem."""

    dataset: Literal["cifar10", "cifar100", "imagenet16_120"] = Field("cifar10", description="dataset of the accuracy and the image size")
    dram_gbps: float = Field(12.8, gt=0.0, le=1000.0, description="DRAM bandwidth, GB/s (12.8: one LPDDR4-3200 x32 channel)")


@functools.lru_cache(maxsize=1 << 16)
def cell_workload(cell: tuple[int, ...], dataset: str) -> Workload:
    """The NB201 network's layers around ``cell`` (op codes) for ``dataset``'s images (cached: engines ask again and again)."""
    size, classes = IMAGE[dataset]
    return nb201_layers(tuple(OPS[c] for c in cell), input_size=size, num_classes=classes)


def cell_on_chip_values(
    problem: ComposedProblem, point: tuple[Any, ...], outputs: Mapping[str, Any], *, cheap_only: bool
) -> dict[str, float]:
    """The objective values of a composition of a ``cell`` part (its ``accuracy``) and an ``accel`` part (an
    :class:`AccelResult`): nb201-accel's and those of the sequential flow's stage that keeps a few cells.

    The cheap three come from the accelerator's result; the accuracy is the cell part's evaluation, paid only when
    ``cheap_only`` is False.
    """
    result: AccelResult = outputs["accel"]
    out = {"latency_ms": result.cost.latency_ms, "energy_uj": result.cost.energy_uj, "area_mm2": result.area_mm2}
    if not cheap_only:
        out["accuracy"] = problem.part("cell").problem.evaluate(problem.subpoint(point, "cell"))["accuracy"]
    return out


class NB201AccelProblem(PredictableComposition):
    """An NB201 cell and a systolic-array accelerator for it (module doc).

    Example:
        >>> p = NB201AccelProblem(dataset="cifar10")
        >>> point = p.parse_design(
        ...     "cell: |nor_conv_3x3~0|+|nor_conv_3x3~0|nor_conv_3x3~1|+|skip_connect~0|nor_conv_3x3~1|nor_conv_3x3~2| ; "
        ...     "accel: rows=32 cols=32 dataflow=ws ifmap_kb=64 filter_kb=32 ofmap_kb=64 clock_mhz=800"
        ... )
        >>> p.evaluate(point)["accuracy"]
        94.3633
    """

    name = "nb201-accel"
    Options = NB201AccelOptions
    predicted_part = "cell"
    niche_parts = ("cell",)
    design_label = "design"
    objectives = (
        Objective("accuracy", "maximize", "%", "expensive", depends_on=("dataset",), bounds=(0.0, 100.0)),
        Objective("latency_ms", "minimize", "ms per image", "cheap", depends_on=("dataset", "dram_gbps"), bounds=(0.0, None)),
        Objective(
            "energy_uj", "minimize", "uJ per image (array MACs + SRAM + DRAM, 45 nm)", "cheap", depends_on=("dataset",), bounds=(0.0, None)
        ),
        Objective("area_mm2", "minimize", "mm^2 (array + buffers, 45 nm)", "cheap", depends_on=(), bounds=(0.0, None)),
    )

    def parts(self) -> list[Part]:
        dataset = self.options.dataset
        cell = NB201Problem(dataset=dataset)
        accel = AccelPart(dram_gbps=self.options.dram_gbps)
        return [
            Part("cell", cell, stage=lambda c, _: cell_workload(c, dataset), produces=Workload),
            Part("accel", accel, stage=accel.run, consumes=Workload, produces=AccelResult),
        ]

    def values(self, point: tuple[Any, ...], outputs: Mapping[str, Any], *, cheap_only: bool) -> dict[str, float]:
        return cell_on_chip_values(self, point, outputs, cheap_only=cheap_only)

    @property
    def floor(self) -> float:
        """Accuracy floor (%) of the useful region (NB201's for the dataset)."""
        return USEFUL_FLOOR[self.options.dataset]

    def acquisition_bounds(self) -> tuple[float, float]:
        # the accuracy floor is a constant of the dataset; latency is free for every design
        return self.floor, self.reference().ceiling

    def reference(self) -> FrontReference:
        """The exact (accuracy, latency_ms) front of the whole joint space (module doc).

        Its ids are, per front cell, the accelerators that reach its best latency (several
        when buffer sizes or dataflows tie), so front recall counts any of them as found.
        """
        return _reference(self.options.dataset, self.options.dram_gbps)


def _counts(cell: Sequence[int]) -> tuple[int, int, int]:
    return (
        sum(OPS[c] == "nor_conv_1x1" for c in cell),
        sum(OPS[c] == "nor_conv_3x3" for c in cell),
        sum(OPS[c] == "avg_pool_3x3" for c in cell),
    )


def all_accels() -> list[Accel]:
    """Every accelerator of :data:`ACCEL_LEVELS`."""
    grid = (
        np.array(np.meshgrid(*(np.arange(len(lv.values)) for lv in ACCEL_LEVELS.values()), indexing="ij")).reshape(len(ACCEL_LEVELS), -1).T
    )
    return [Accel(*(lv.values[i] for lv, i in zip(ACCEL_LEVELS.values(), row, strict=True))) for row in grid]


def latency_table(dataset: str, accels: Sequence[Accel], dram_gbps: float) -> tuple[list[tuple[int, int, int]], np.ndarray]:
    """(op-count combos, (accelerators, combos) latency in ms): every design's latency, by what it depends on.

    Same model as :func:`sim.accel.network.network_cost` (max of compute and DRAM time per layer),
    vectorised over the accelerators: a layer's cycles and DRAM bytes depend on the array,
    dataflow and buffers, its time then on the clock.
    """
    combos = [(a, b, c) for a in range(7) for b in range(7 - a) for c in range(7 - a - b)]
    op = {"c1": OPS.index("nor_conv_1x1"), "c3": OPS.index("nor_conv_3x3"), "p": OPS.index("avg_pool_3x3"), "n": OPS.index("none")}
    workloads = [
        cell_workload((op["c1"],) * a + (op["c3"],) * b + (op["p"],) * c + (op["n"],) * (6 - a - b - c), dataset) for a, b, c in combos
    ]
    layers = sorted({nl.layer for w in workloads for nl in w.layers}, key=repr)
    index = {layer: i for i, layer in enumerate(layers)}
    counts = np.zeros((len(layers), len(combos)))
    for j, w in enumerate(workloads):
        for nl in w.layers:
            counts[index[nl.layer], j] += nl.count
    shapes: dict[tuple[Any, ...], np.ndarray] = {}
    times = np.zeros((len(accels), len(layers)))
    for i, a in enumerate(accels):
        key = (a.rows, a.cols, a.dataflow, a.ifmap_kb, a.filter_kb, a.ofmap_kb)
        if key not in shapes:
            mapped = [
                map_layer(layer, a.rows, a.cols, a.dataflow, ifmap_kb=a.ifmap_kb, filter_kb=a.filter_kb, ofmap_kb=a.ofmap_kb)
                for layer in layers
            ]
            shapes[key] = np.array([[m.cycles, sum(m.dram_bytes.values())] for m in mapped], dtype=float)
        cd = shapes[key]
        times[i] = np.maximum(cd[:, 0] / (a.clock_mhz * 1e6), cd[:, 1] / (dram_gbps * 1e9))
    return combos, times @ counts * 1e3


@dataclass(frozen=True)
class TiedFront(FrontReference):
    """A true front whose points may each be reached by several designs (one cell, accelerators of equal latency).

    :attr:`ids` holds one id per front point (the tied designs' ids joined by ``|``); a point
    counts as found when any of its designs is.
    """

    def recall(self, found_ids: Iterable[str]) -> float:
        found = set(found_ids)
        return sum(any(i in found for i in joined.split("|")) for joined in self.ids) / len(self.ids)


@functools.lru_cache(maxsize=8)
def _reference(dataset: str, dram_gbps: float) -> FrontReference:
    cell_problem = NB201Problem(dataset=dataset)
    accel_part = AccelPart(dram_gbps=dram_gbps)
    table = cell_problem.table
    accels = all_accels()
    combos, lat = latency_table(dataset, accels, dram_gbps)
    best = lat.min(axis=0)
    col = {c: j for j, c in enumerate(combos)}
    cells = [tuple(int(x) for x in row) for row in table.ops]
    j = np.array([col[_counts(c)] for c in cells])
    acc = table.acc(dataset)
    # every cell on its fastest accelerator: the whole space's front, and a ceiling (the slowest cell on its fastest
    # accelerator) near it; the whole space's slowest design (a pool-heavy cell on an 8 x 128 array at 200 MHz) is
    # two orders of magnitude slower, and HV ratios against it would all read 0.999
    ref = FrontReference.from_space(acc, best[j], USEFUL_FLOOR[dataset])
    ids = []
    for cell in sorted(int(r) for r in ref.ids):  # row numbers are NB201 indices
        tied = np.flatnonzero(lat[:, j[cell]] <= best[j[cell]] * (1 + 1e-12))
        ids.append("|".join(f"{cell}{ID_SEPARATOR}{accel_part.point_id(accels[t])}" for t in tied))
    return TiedFront(**{**ref.__dict__, "ids": frozenset(ids)})
