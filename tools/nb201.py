"""NB201 benchmark tools: look up a cell, read the exact front."""

from __future__ import annotations

from typing import Any, ClassVar

from pydantic import Field

from coevo.search.nb201 import DATASETS, NB201Problem, op_counts, parse_arch
from coevo.search.nb201.problem import NB201Options
from coevo.search.nb201.table import Dataset
from coevo.tools._base import Tool, ToolArgs, ToolResult

_PROVENANCE = "NB201 x hardware table: NATS-Bench accuracies (200 epochs, mean over seeds); HELP / HW-NAS-Bench latencies"
_DATASET_HELP = f"dataset, one of {', '.join(DATASETS)}"
_DEVICE_HELP = "device (latency column), e.g. fpga, raspi4, pixel3, eyeriss, titan_rtx_256, gold_6226"


def _option(name: str, description: str) -> Any:
    """The ``nb201`` problem's option ``name`` as a tool argument: its default, the tool's own wording for the caller."""
    return Field(NB201Options.model_fields[name].default, description=description)


class QueryArgs(ToolArgs):
    """Arguments of ``nb201.query``: one NB201 cell, the dataset of its accuracy and the device of its latency."""

    arch: str = Field(
        description="NB201 arch string: ops on edges into nodes 1, 2, 3, e.g. "
        "|nor_conv_3x3~0|+|nor_conv_1x1~0|skip_connect~1|+|skip_connect~0|nor_conv_3x3~1|avg_pool_3x3~2|"
    )
    dataset: Dataset = _option("dataset", _DATASET_HELP)
    device: str = _option("device", _DEVICE_HELP)


class NB201Query(Tool):
    """Accuracy and latency of one NB201 cell from the shipped table."""

    name = "nb201.query"
    description = (
        "Look up one NAS-Bench-201 cell: test accuracy (%) on a dataset, latency (ms) on a device, "
        "op counts, and whether it is on the exact Pareto front."
    )
    Args = QueryArgs
    example: ClassVar[dict[str, Any]] = {
        "arch": "|nor_conv_3x3~0|+|nor_conv_3x3~0|nor_conv_3x3~1|+|skip_connect~0|nor_conv_3x3~1|nor_conv_3x3~2|",
        "dataset": "cifar10",
        "device": "fpga",
    }

    def run(self, args: QueryArgs) -> ToolResult:
        problem = NB201Problem(dataset=args.dataset, device=args.device)
        cell = parse_arch(args.arch)
        values = problem.evaluate(cell)
        index = problem.index(cell)
        value: dict[str, Any] = {
            "index": index,
            "arch": problem.describe(cell),
            "dataset": args.dataset,
            "device": args.device,
            "accuracy_pct": values["accuracy"],
            "latency_ms": values["latency_ms"],
            "op_counts": op_counts(cell),
            "on_true_front": str(index) in problem.reference().ids,
        }
        return ToolResult(value=value, messages=[_PROVENANCE])


class FrontArgs(ToolArgs):
    """Arguments of ``nb201.pareto_front``: the dataset and device of the front, and how many of its cells to return."""

    dataset: Dataset = _option("dataset", _DATASET_HELP)
    device: str = _option("device", _DEVICE_HELP)
    limit: int = Field(100, ge=1, le=1000, description="at most this many front cells, fastest first")


class NB201ParetoFront(Tool):
    """The exact accuracy/latency Pareto front over all 15,625 cells (useful region)."""

    name = "nb201.pareto_front"
    description = (
        "Exact Pareto front (max accuracy %, min latency ms) of all 15,625 NB201 cells for a dataset and device, "
        "restricted to the useful region (accuracy >= the dataset's floor)."
    )
    Args = FrontArgs
    example: ClassVar[dict[str, Any]] = {"dataset": "cifar10", "device": "raspi4", "limit": 5}

    def run(self, args: FrontArgs) -> ToolResult:
        problem = NB201Problem(dataset=args.dataset, device=args.device)
        ref = problem.reference()
        rows = []
        for pid in ref.ids:
            cell = problem.table.cell(int(pid))
            values = problem.evaluate(cell)
            rows.append(
                {"index": int(pid), "arch": problem.describe(cell), "accuracy_pct": values["accuracy"], "latency_ms": values["latency_ms"]}
            )
        rows.sort(key=lambda r: (r["latency_ms"], r["index"]))
        value = {
            "dataset": args.dataset,
            "device": args.device,
            "floor_pct": ref.floor,
            "reference_latency_ms": ref.ceiling,
            "front_size": len(rows),
            "front": rows[: args.limit],
        }
        messages = [_PROVENANCE]
        if len(rows) > args.limit:
            messages.append(f"front truncated to {args.limit} of {len(rows)} cells; raise limit to see all")
        return ToolResult(value=value, messages=messages)
