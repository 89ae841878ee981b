"""The accelerator part of nb201-accel: a systolic array chosen from levels.

A design is the array's rows and columns, its dataflow, its three SRAM buffers and its
clock (:data:`ACCEL_LEVELS`); its area follows from them (:func:`sim.accel.area.array_mm2`).
There is no area budget inside the space: a constraint there would be broken by Optuna
samplers' suggestions (they cannot be told it), so area is an objective instead. As a part
of a composition its stage maps a network's layers (:class:`sim.accel.network.Workload`)
onto the array (:func:`sim.accel.network.network_cost`).
On its own it is a small problem: peak throughput against area.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple

import numpy as np
from pydantic import Field

from coevo.search.problem import LevelProblem, Levels, Objective, ProblemOptions, level_format
from coevo.sim.accel.area import array_mm2
from coevo.sim.accel.network import ArrayConfig, NetworkCost, Workload, network_cost

ACCEL_LEVELS: dict[str, Levels] = {
    "rows": Levels((8, 16, 32, 64, 128)),
    "cols": Levels((8, 16, 32, 64, 128)),
    "dataflow": Levels(("ws", "os", "is"), ordered=False),
    "ifmap_kb": Levels((16, 32, 64, 128, 256)),
    "filter_kb": Levels((8, 16, 32, 64)),
    "ofmap_kb": Levels((16, 32, 64, 128)),
    "clock_mhz": Levels((200, 400, 600, 800, 1000)),
}
"""Parameter -> levels of the accelerator (array PEs, dataflow, buffers in KiB, clock in MHz)."""


class Accel(NamedTuple):
    """An accelerator design (the fields of :data:`ACCEL_LEVELS`)."""

    rows: int
    cols: int
    dataflow: str
    ifmap_kb: int
    filter_kb: int
    ofmap_kb: int
    clock_mhz: int


def area_of(a: Accel) -> float:
    """Area of the array and its buffers, mm^2 (:mod:`sim.accel.area`)."""
    return array_mm2(a.rows, a.cols, a.ifmap_kb, a.filter_kb, a.ofmap_kb)


@dataclass(frozen=True)
class AccelResult:
    """What the accelerator part hands on: the network's cost on it, and its area."""

    cost: NetworkCost
    area_mm2: float


class AccelOptions(ProblemOptions):
    """Options of the accelerator part."""

    dram_gbps: float = Field(12.8, gt=0.0, le=1000.0, description="DRAM bandwidth, GB/s (12.8: one LPDDR4-3200 x32 channel)")


class AccelPart(LevelProblem):
    """Systolic-array accelerators (module doc)."""

    name = "systolic-array"
    Options = AccelOptions
    levels = ACCEL_LEVELS
    point_type = Accel
    design_noun = "an accelerator"
    design_label = "accelerator"
    design_format = level_format(ACCEL_LEVELS)
    objectives = (
        Objective("peak_gops", "maximize", "GOPS", "cheap", bounds=(0.0, None)),
        Objective("area_mm2", "minimize", "mm^2", "cheap", bounds=(0.0, None)),
    )

    def config(self, a: Accel) -> ArrayConfig:
        """The simulator's description of accelerator ``a``."""
        return ArrayConfig(a.rows, a.cols, a.dataflow, a.ifmap_kb, a.filter_kb, a.ofmap_kb, a.clock_mhz, self.options.dram_gbps)

    def run(self, point: Accel, workload: Workload) -> AccelResult:
        """The stage of the part: ``workload`` mapped onto accelerator ``point``."""
        return AccelResult(network_cost(workload, self.config(point)), area_of(point))

    def evaluate(self, point: Any) -> dict[str, float]:
        a = Accel(*point)
        return {"peak_gops": 2.0 * a.rows * a.cols * a.clock_mhz / 1e3, "area_mm2": area_of(a)}

    def cheap_values(self, points: Sequence[Any]) -> dict[str, np.ndarray]:
        rows = [self.evaluate(p) for p in points]
        return {k: np.array([r[k] for r in rows]) for k in ("peak_gops", "area_mm2")}
