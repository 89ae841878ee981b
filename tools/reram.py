"""ReRAM crossbar tools: a zoo model mapped onto crossbars with stuck-at faults, under a protection scheme."""

from __future__ import annotations

import dataclasses
import time
from typing import Any, ClassVar, Literal

from pydantic import Field

from coevo.search.problem import config_field
from coevo.search.stats import verdict
from coevo.search.work_progress import report
from coevo.sim.reram import CrossbarConfig, Protection, Summary, check_rate, evaluate_under_faults, parse_ratio, prepare
from coevo.sim.reram.config import ReramConfig
from coevo.tools._base import Tool, ToolArgs, ToolResult
from coevo.tools._zoo import model_field, zoo_model


def _part_default(name: str) -> str:
    """A protection part's setting in words, with the default it takes when its part is named."""
    declared = {f.name: f for f in dataclasses.fields(ReramConfig)}[name]
    return f"{declared.metadata['help']} (default {declared.default:g})"


class ReramArgs(ToolArgs):
    """Arguments of ``reram.faults``: the zoo model, the fault model, the protection scheme, the crossbar geometry and budget."""

    model: str = model_field(ReramConfig.model)
    fault_rate: float = config_field(
        ReramConfig, "fault_rate", description="share of cells stuck (0.02 = 2 %), between 0 and 1", bounds=False
    )
    sa0_sa1: str = config_field(
        ReramConfig, "sa0_sa1", description="ratio of stuck-at-0 (stuck at the lowest conductance) to stuck-at-1 faults, e.g. '9:1'"
    )
    protection: str = config_field(
        ReramConfig,
        "protection",
        description=(
            f"parts joined by '+': none, prune (structured row/column pruning frees cells; default {ReramConfig.prune_rows:.0%} of rows "
            f"and {ReramConfig.prune_cols:.0%} of columns), dup (duplicate columns into the freed cells of the same crossbars, read by "
            "choice or vote), msb (most significant slice copied into the least significant cells), spare (baseline: spare rows/cols "
            "per crossbar replace faulty lines, extra area)"
        ),
    )
    # None: the part named in protection takes ReramConfig's setting (Protection.parse), a setting for a part not named is refused
    prune_rows: float | None = Field(None, description=_part_default("prune_rows"))
    prune_cols: float | None = Field(None, description=_part_default("prune_cols"))
    msb: int | None = Field(None, description=_part_default("msb"))
    spare_rows: int | None = Field(None, description=_part_default("spare_rows"))
    spare_cols: int | None = Field(None, description=_part_default("spare_cols"))
    knowledge: Literal["known", "unknown"] = config_field(
        ReramConfig,
        "knowledge",
        description="unknown (default): no test, duplicated copies are combined by a vote; known: fault maps from a "
        "post-fabrication test guide repair and the choice of copies (needed by spare)",
    )
    prune_method: Literal["learned", "l2"] = config_field(ReramConfig, "prune_method")
    finetune_epochs: int = config_field(ReramConfig, "finetune_epochs")
    # the crossbar's own checks (CrossbarConfig) word the range errors
    rows: int = config_field(ReramConfig, "rows", bounds=False)
    cols: int = config_field(ReramConfig, "cols", bounds=False)
    weight_bits: int = config_field(ReramConfig, "weight_bits", bounds=False)
    bits_per_cell: int = config_field(ReramConfig, "bits_per_cell", bounds=False)
    crossbar_budget: int | None = Field(None, ge=1, description="crossbars available; a model needing more is refused")
    fault_maps: int = config_field(ReramConfig, "fault_maps")
    split: Literal["val", "test"] = Field("test", description="split the metric is measured on")
    max_batches: int | None = Field(4, ge=1, description="language models: batches of 64 blocks evaluated per fault map (None: all)")
    compare_unprotected: bool = Field(True, description="also measure no protection on the same fault-map seeds")


class ReramFaults(Tool):
    """Accuracy (or perplexity) of a zoo model on faulty ReRAM crossbars under a protection scheme."""

    name = "reram.faults"
    measured_fields = frozenset({"wall_s"})
    slow_example = True  # fine-tunes mlp-digits for 10 fault maps, twice: 14-20 s per example run on an idle 2-core machine
    description = (
        "Map a zoo model's Linear/Conv2d weights onto ReRAM crossbars (tile size, bits per cell, differential pairs, "
        "bit-sliced quantized weights), inject stuck-at-0/1 faults at a rate and SA0:SA1 ratio over many seeded fault maps, "
        "and compute inference through the faulty cells. Protection: prune+dup+msb (zero extra crossbars) or spare lines "
        "(extra area). Returns the metric's mean and 95 % interval over fault maps, crossbars used and area overhead."
    )
    Args = ReramArgs
    example: ClassVar[dict[str, Any]] = {
        "model": "mlp-digits", "fault_rate": 0.02, "sa0_sa1": "9:1", "protection": "prune+dup+msb", "fault_maps": 3,
    }  # fmt: skip
    long_running = True
    loads_code = ("model",)

    def run(self, args: ReramArgs) -> ToolResult:
        start = time.perf_counter()
        rate = check_rate(args.fault_rate)
        share = parse_ratio(args.sa0_sa1)
        cfg = CrossbarConfig(args.rows, args.cols, args.weight_bits, args.bits_per_cell)
        protection = Protection.parse(
            args.protection, prune_rows=args.prune_rows, prune_cols=args.prune_cols, msb=args.msb, spare_rows=args.spare_rows,
            spare_cols=args.spare_cols, knowledge=args.knowledge, finetune_epochs=args.finetune_epochs,
            prune_method=args.prune_method,
        )  # fmt: skip
        zm, notes = zoo_model(args.model)
        max_batches = args.max_batches if zm.task == "lm" else None

        def metric(model: Any) -> float:
            return float(zm.evaluate(model, args.split, max_batches=max_batches))

        report("laying out the crossbars", 0.3)
        plan = prepare(zm, cfg, protection, args.crossbar_budget)
        seeds = list(range(args.fault_maps))
        report("fault maps under the protection", 0.4)
        values, bars = evaluate_under_faults(plan, metric, rate, share, seeds)
        s = Summary.of(values)
        name = zm.metric
        value: dict[str, Any] = {
            "model": args.model,
            "metric": name,
            "fault_rate": rate,
            "sa0_share": share,
            "protection": protection.label,
            "knowledge": protection.knowledge,
            f"{name}_float": round(metric(zm.model), 4),
            f"{name}_fault_free": round(metric(plan.quantized_model()), 4),
            f"{name}_mean": round(s.mean, 4),
            f"{name}_ci95": [round(s.low, 4), round(s.high, 4)],
            f"{name}_per_map": [round(v, 4) for v in values],
            "crossbars_reserved": plan.crossbars(),
            "crossbars_written_max": max(bars),
            "crossbars_unprotected": plan.budget_crossbars,
            "area_crossbar_equivalents": round(plan.area(), 3),
            "area_overhead_pct": round(100 * (plan.area() / plan.budget_crossbars - 1), 3),
            "slices_per_weight": cfg.slices,
            "precision_bits": (cfg.slices - protection.msb) * cfg.bits_per_cell,
        }
        unprotected = Protection(finetune_epochs=protection.finetune_epochs)  # the same fine-tuning: no gain from extra training
        if args.compare_unprotected and protection != unprotected:
            report("the same fault maps without protection", 0.7)
            base = prepare(zm, cfg, unprotected, args.crossbar_budget)
            plain, _ = evaluate_under_faults(base, metric, rate, share, seeds)
            b = Summary.of(plain)
            value["unprotected_protection"] = unprotected.label
            value["unprotected_mean"] = round(b.mean, 4)
            value["unprotected_ci95"] = [round(b.low, 4), round(b.high, 4)]
            diff = Summary.of([v - p for v, p in zip(values, plain, strict=True)])
            value["paired_difference_mean"] = round(diff.mean, 4)
            value["paired_difference_ci95"] = [round(diff.low, 4), round(diff.high, 4)]
            value["verdict"] = verdict(
                f"{protection.label} vs {unprotected.label}",
                [v - p for v, p in zip(values, plain, strict=True)],
                unit="points" if name == "accuracy" else name,
                higher_is_better=name == "accuracy",
                unit_of_pairing="fault maps",
            )
        value["wall_s"] = round(time.perf_counter() - start, 3)
        messages = [
            *notes,
            f"{name} on the {args.split} split over {len(seeds)} fault maps (seeds 0..{len(seeds) - 1}); 95 % Student-t interval. "
            "Ideal ADCs, no IR drop or read noise; biases, embeddings and norms stay digital.",
        ]
        if protection.prune_rows or protection.prune_cols:
            how = "row/column scores learned with the weights" if protection.prune_method == "learned" else "L2 magnitude (baseline)"
            messages.append(f"pruned by {how}")
        messages.append(
            f"every scheme fine-tuned {protection.finetune_epochs} epochs, the unprotected comparison included"
            if protection.finetune_epochs
            else "no fine-tuning"
        )
        if zm.task == "lm" and max_batches is not None:
            messages.append(f"perplexity over the first {max_batches} batches of 64 blocks of the split")
        if "verdict" in value:
            messages.append(value["verdict"])
        if not 0 <= rate <= 0.05:
            messages.append("rates above 5 % are outside the range the protection schemes were designed for")
        return ToolResult(value=value, messages=messages)
