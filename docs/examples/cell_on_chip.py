"""A composed problem in one file: an NB201 cell and a systolic array whose input buffer holds every layer's input.

Two existing parts, used as they are: coevo's NB201 problem (cells, operators, niches, accuracy
table) and the accelerator part of ``nb201-accel`` (array, dataflow, buffers, clock). This file
only declares what is new:

* the objectives: accuracy (the expensive one) against energy per image;
* the chain: the cell's network hands its layer shapes (a ``Workload``) to the accelerator,
  whose stage maps them onto the array;
* a constraint **between** the parts: every layer's input operand (its im2col matrix, int8) fits
  the input buffer, so no layer re-fetches its input from DRAM. It depends on both parts: a
  cell with a 3x3 convolution needs a larger buffer than one without;
* the niches: the product of the cell's complexity bands and the array's dataflows.

Run it::

    coevo search --problem docs/examples/cell_on_chip.py:CellOnChip --proposer pelnas --budget 40

The constraint is kept by the co-evolution engine's operators (``pelnas`` and its ablations).
An Optuna sampler (``tpe``, ``random``) cannot be told it: a suggestion that breaks it is
refused, so search such a composition with the engine, or encode the space without one.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping, Sequence
from typing import Any, Literal

from pydantic import Field

import coevo
from coevo.search.compose import ComposedProblem, Part
from coevo.search.nb201.problem import NB201Problem
from coevo.search.nb201_accel.accel import Accel, AccelPart, AccelResult
from coevo.search.nb201_accel.problem import cell_workload
from coevo.sim.accel.network import Workload


@functools.cache
def largest_input(cell: tuple[int, ...], dataset: str) -> int:
    """Bytes of the largest layer input (M x K of its im2col matrix, int8) of the network around ``cell``.

    Cached: the engine's operators check the constraint on every candidate they consider.
    """
    return max(nl.layer.gemm()[0] * nl.layer.gemm()[1] for nl in cell_workload(cell, dataset).layers)


class DataflowPart(AccelPart):
    """The accelerator part with one niche per dataflow (the part's own niches: the engine explores each)."""

    def niches(self) -> tuple[coevo.Niche, ...]:
        return tuple(
            coevo.Niche(f, f"{f} (weight, output or input stationary) dataflow", lambda a, f=f: Accel(*a).dataflow == f)
            for f in ("ws", "os", "is")
        )


class CellOnChipOptions(coevo.ProblemOptions):
    """Options of the composition."""

    dataset: Literal["cifar10", "cifar100", "imagenet16_120"] = Field("cifar10", description="dataset of the accuracy and the image size")


class CellOnChip(ComposedProblem):
    """An NB201 cell and an accelerator whose input buffer holds each layer's input (module doc)."""

    name = "cell-on-chip"
    Options = CellOnChipOptions
    niche_parts = ("cell", "accel")
    objectives = (
        coevo.Objective("accuracy", "maximize", "%", "expensive", depends_on=("dataset",), bounds=(0.0, 100.0)),
        coevo.Objective("energy_uj", "minimize", "uJ per image", "cheap", depends_on=("dataset",), bounds=(0.0, None)),
    )

    def parts(self) -> Sequence[Part]:
        dataset = self.options.dataset
        accel = DataflowPart()
        return [
            Part("cell", NB201Problem(dataset=dataset), stage=lambda cell, _: cell_workload(cell, dataset), produces=Workload),
            Part("accel", accel, stage=accel.run, consumes=Workload, produces=AccelResult),
        ]

    def values(self, point: tuple[Any, ...], outputs: Mapping[str, Any], *, cheap_only: bool) -> dict[str, float]:
        out = {"energy_uj": outputs["accel"].cost.energy_uj}
        if not cheap_only:  # the expensive objective: the cell part's own accuracy
            out["accuracy"] = self.part("cell").problem.evaluate(self.subpoint(point, "cell"))["accuracy"]
        return out

    def violation(self, point: tuple[Any, ...]) -> str | None:
        cell, accel = point
        largest = largest_input(cell, self.options.dataset)
        if largest > Accel(*accel).ifmap_kb * 1024:
            return f"the largest layer input ({largest / 1024:.0f} KiB) does not fit the {Accel(*accel).ifmap_kb} KiB input buffer"
        return None
