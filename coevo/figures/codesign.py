"""Joint vs sequential co-design on nb201-accel at equal evaluations (issue 32, item 4).

    nice -n 10 python -m coevo.figures codesign                      # the committed figure (budgets 100, 200; seeds 0-2)
    python -m coevo.figures codesign --budgets 20 --seeds 0 --out /tmp/cd   # a quick look
    python -m coevo.figures codesign --report-only                   # re-render the page and plot from the CSVs

Arms, each at the same total of **B paid evaluations of joint designs** (a design is a cell and an
accelerator; every one the search evaluates counts once against its budget, as the runner counts):

* ``joint``: pelnas on ``nb201-accel`` (cell and accelerator searched together), budget B;
* ``sequential``: the classic flow. Stage 1: pelnas on the cell alone, on a fixed default
  accelerator (:data:`DEFAULT_ACCEL`: a 32 x 32 weight-stationary array, 256 / 32 / 64 KiB
  buffers, 600 MHz, the middle of every range but the input buffer, which is the size a 3x3
  convolution's first-stage input needs), budget B/2. Stage 2: the cells of stage 1's front
  (accuracy, latency on the default accelerator) are kept, and pelnas searches the
  accelerator together with a choice among those cells only, budget B - B/2;
* ``sequential-acc``: the same flow at equal **accuracy queries** instead: stage 1 pays B cells,
  stage 2 (which pays no accuracy: its cells' are known) gets B accelerator evaluations more;
* ``tpe`` and ``random``: Optuna's multivariate TPE and random sampler on the joint encoding, budget B.

How evaluations are counted: ``joint``, ``sequential`` and ``random`` have equal **joint-design
evaluations** (B each). The sequential flow then pays fewer accuracy queries (training runs):
stage 2 only re-uses the accuracies of stage 1's cells, so it pays B/2 distinct cells, while
joint search pays for up to B distinct cells. ``sequential-acc`` is the other count: B
accuracy queries, as many as joint search at most, and 2B joint designs. Both counts are in
the CSV (``evaluations``, ``cells``) and on the page.

Scoring: every design each run evaluated (both stages for ``sequential``) is scored on
(accuracy, latency_ms) against the problem's exact front (:meth:`NB201AccelProblem.reference`,
the whole space's; no pooling needed): HV ratio, IGD, front recall. Seeds pair the arms (seed s
of every arm), and the page gives same-seed differences with 95 % t intervals and a verdict per
budget. Writes ``codesign.csv`` (a row per arm, budget and seed), ``codesign-designs.csv``
(every evaluated design), ``codesign.md`` and ``codesign-fronts.png`` (both fronts of one seed).
"""

from __future__ import annotations

import functools
import statistics
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
from pydantic import Field

from coevo.figures import _codesign_common as common
from coevo.figures._codesign_common import (
    SEQUENTIAL,
    budgets_of,
    comparisons,
    joint_not_ahead,
    run_key,
)
from coevo.figures._codesign_common import mean_text as _mean
from coevo.figures._codesign_common import paired as paired  # re-exported: tests and the deploy-cnn figure's docs name them here
from coevo.figures._codesign_common import split_budget as split_budget
from coevo.figures._codesign_common import stages as stages
from coevo.figures._codesign_common import verdict as verdict
from coevo.figures._common import Output, figure_parser, read_numbers
from coevo.search.compose import Part
from coevo.search.metrics import FrontMetrics, FrontReference, pareto_mask
from coevo.search.nb201.problem import NB201Problem
from coevo.search.nb201.space import OPS
from coevo.search.nb201.table import USEFUL_FLOOR
from coevo.search.nb201_accel.accel import ACCEL_LEVELS, Accel, AccelPart, AccelResult
from coevo.search.nb201_accel.problem import (
    NB201AccelOptions,
    NB201AccelProblem,
    all_accels,
    cell_on_chip_values,
    cell_workload,
    latency_table,
)
from coevo.search.problem import Levels
from coevo.search.stats import format_interval
from coevo.sim.accel.network import Workload

NAME = "codesign"
DEFAULT_ACCEL = Accel(rows=32, cols=32, dataflow="ws", ifmap_kb=256, filter_kb=32, ofmap_kb=64, clock_mhz=600)
"""The accelerator the sequential flow's stage 1 fixes (module doc)."""
ARMS = ("joint", "sequential", "sequential-acc", "tpe", "random")
SEARCHERS = {"joint": "pelnas", "tpe": "tpe", "random": "random"}
"""The arms that search the joint space directly, and their proposers."""
BUDGETS = (100, 200)
SEEDS = (0, 1, 2)
RUNS_CSV, DESIGNS_CSV, BOUNDS_CSV, FREE_CSV = "codesign.csv", "codesign-designs.csv", "codesign-bounds.csv", "codesign-free.csv"
MD, PNG = "codesign.md", "codesign-fronts.png"
RUN_FIELDS = ("arm", "budget", "seed", "evaluations", "cells", "kept", "hv", "igd", "recall", "wall_s")
DESIGN_FIELDS = ("arm", "budget", "seed", "stage", "cell", "accel", "accuracy", "latency_ms")


# ---------------------------------------------------------------- the sequential flow's two stage problems


FIXED_LEVELS: dict[str, Levels] = {k: Levels((getattr(DEFAULT_ACCEL, k),), ordered=lv.ordered) for k, lv in ACCEL_LEVELS.items()}
"""The accelerator part's levels with one value each, :data:`DEFAULT_ACCEL`'s."""


class FixedAccelPart(AccelPart):
    """The accelerator part with one level per parameter: :data:`DEFAULT_ACCEL` (stage 1 searches the cell alone)."""

    name = "systolic-array-fixed"
    levels = FIXED_LEVELS


class FixedAccelProblem(NB201AccelProblem):
    """nb201-accel with the accelerator fixed at :data:`DEFAULT_ACCEL`: the sequential flow's stage 1 (a cell search).

    Its designs are joint designs, so its exact front stays nb201-accel's (the reference is inherited).
    """

    name = "nb201-accel-fixed"

    def parts(self) -> list[Part]:
        dataset = self.options.dataset
        accel = FixedAccelPart(dram_gbps=self.options.dram_gbps)
        return [
            Part("cell", NB201Problem(dataset=dataset), stage=lambda c, _: cell_workload(c, dataset), produces=Workload),
            Part("accel", accel, stage=accel.run, consumes=Workload, produces=AccelResult),
        ]


class KeptCellsOptions(NB201AccelOptions):
    """Options of stage 2: nb201-accel's, and the kept cells."""

    cells: str = Field(description="the kept cells, NB201 indices joined by commas")


class KeptCellPart(common.KeptPart):
    """A choice among a few NB201 cells (by index); its accuracy is the NB201 table's."""

    name = "kept-cells"
    Options = KeptCellsOptions
    level = "cell"

    def choices(self) -> tuple[int, ...]:
        return tuple(int(c) for c in self.options.cells.split(","))

    @functools.cached_property
    def nb201(self) -> NB201Problem:
        """The NB201 problem the cells are from."""
        return NB201Problem(dataset=self.options.dataset)

    def cell(self, index: int) -> tuple[int, ...]:
        """The cell (op codes) of NB201 index ``index``."""
        return tuple(int(x) for x in self.nb201.table.ops[index])

    def evaluate(self, point: Any) -> dict[str, float]:
        return {"accuracy": self.nb201.evaluate(self.cell(point[0]))["accuracy"]}

    def workload(self, choice: Any) -> Workload:
        return cell_workload(self.cell(choice), self.options.dataset)


class KeptCellsProblem(common.KeptProblem):
    """The sequential flow's stage 2: the accelerator searched with a choice among stage 1's front cells.

    Not :class:`~search.problem.Predictable`: the kept cells' accuracies are already known, so the
    engine needs no proxies. Its point ids are nb201-accel's (a kept cell's id is its NB201 index).
    """

    name = "nb201-accel-kept"
    Options = KeptCellsOptions
    Kept = KeptCellPart
    objectives = NB201AccelProblem.objectives

    def values(self, point: tuple[Any, ...], outputs: Mapping[str, Any], *, cheap_only: bool) -> dict[str, float]:
        return cell_on_chip_values(self, point, outputs, cheap_only=cheap_only)

    def reference(self) -> FrontReference:
        """nb201-accel's exact front (this space is a corner of its space)."""
        return NB201AccelProblem(dataset=self.options.dataset, dram_gbps=self.options.dram_gbps).reference()

    def acquisition_bounds(self) -> tuple[float, float]:
        return USEFUL_FLOOR[self.options.dataset], self.reference().ceiling

    def joint_point(self, point: tuple[Any, ...]) -> tuple[tuple[int, ...], Accel]:
        """The nb201-accel design ``point`` stands for."""
        part = self.part("cell").problem
        assert isinstance(part, KeptCellPart)
        return part.cell(point[0][0]), Accel(*point[1])


# ---------------------------------------------------------------- pieces (tested on their own)


def front_cells(cells: Sequence[int], accuracy: Sequence[float], latency: Sequence[float]) -> list[int]:
    """The distinct cells on the (max accuracy, min latency) front of the designs given, in order of first appearance."""
    if not cells:
        return []
    mask = pareto_mask(np.array(accuracy, dtype=float), np.array(latency, dtype=float))
    out: list[int] = []
    for c, keep in zip(cells, mask, strict=True):
        if keep and c not in out:
            out.append(c)
    return out


# ---------------------------------------------------------------- measuring


def _design_row(arm: str, budget: int, seed: int, stage: int, joint: NB201AccelProblem, point: Any) -> dict[str, Any]:
    cell, accel = point
    values = joint.evaluate((cell, Accel(*accel)))
    return {
        "arm": arm,
        "budget": budget,
        "seed": seed,
        "stage": stage,
        "cell": joint.part("cell").problem.point_id(cell),
        "accel": joint.part("accel").problem.point_id(Accel(*accel)),
        "accuracy": values["accuracy"],
        "latency_ms": round(values["latency_ms"], 9),
    }


def run_arm(arm: str, budget: int, seed: int, dataset: str, runs: Path) -> tuple[list[dict[str, Any]], int, float]:
    """Every design arm ``arm`` evaluated at ``budget`` and ``seed`` (as design rows), the cells it kept (sequential), its wall time."""
    joint = NB201AccelProblem(dataset=dataset)

    def kept(points: list[Any], rows: list[dict[str, Any]]) -> tuple[int, KeptCellsProblem]:
        cells = front_cells([int(r["cell"]) for r in rows], [r["accuracy"] for r in rows], [r["latency_ms"] for r in rows])
        return len(cells), KeptCellsProblem(dataset=dataset, cells=",".join(map(str, cells)))

    fixed = functools.partial(FixedAccelProblem, dataset=dataset)
    flow = common.Flow(SEARCHERS, joint, fixed, kept, _design_row, names=f"{{stage}}-{dataset}-b{{budget}}-s{{seed}}")
    return common.run_flow(flow, arm, budget, seed, runs)


def score(ref: FrontReference, designs: Sequence[Mapping[str, Any]]) -> FrontMetrics:
    """HV ratio, IGD and front recall of ``designs`` (design rows) against the exact front ``ref``."""
    ids = [f"{d['cell']}/{d['accel']}" for d in designs]
    acc = np.array([float(d["accuracy"]) for d in designs])
    lat = np.array([float(d["latency_ms"]) for d in designs])
    return FrontMetrics.score(ref, ids, acc, lat)


def run_rows(
    designs: Sequence[Mapping[str, Any]],
    kept: Mapping[tuple[str, int, int], int],
    wall: Mapping[tuple[str, int, int], float],
    ref: FrontReference,
) -> list[dict[str, Any]]:
    """One row per (arm, budget, seed) of ``designs``: evaluations, distinct cells paid, kept cells, HV ratio, IGD, recall, wall time."""
    out = []
    for key, rows in common.run_groups(designs, ARMS):
        m = score(ref, rows)
        scores = {"hv": round(m.hv_ratio, 6), "igd": round(m.igd, 6), "recall": round(m.front_recall, 6)}
        out.append(common.run_row(key, rows, ("cells", len({r["cell"] for r in rows})), kept, wall, scores))
    return out


# ---------------------------------------------------------------- what each flow could reach at best (exhaustive, no search)


def _counts(cell: Sequence[int]) -> tuple[int, int, int]:
    names = [OPS[c] for c in cell]
    return names.count("nor_conv_1x1"), names.count("nor_conv_3x3"), names.count("avg_pool_3x3")


@functools.lru_cache(maxsize=4)
def _fastest(dataset: str) -> dict[str, float]:
    """NB201 cell id -> its latency (ms) on its own fastest accelerator (every accelerator scored by op counts)."""
    joint = NB201AccelProblem(dataset=dataset)
    cells_part = joint.part("cell").problem
    assert isinstance(cells_part, NB201Problem)
    combos, lat = latency_table(dataset, all_accels(), joint.options.dram_gbps)
    best = lat.min(axis=0)
    col = {c: j for j, c in enumerate(combos)}
    return {str(i): float(best[col[_counts(tuple(int(x) for x in row))]]) for i, row in enumerate(cells_part.table.ops)}


def free_rows(designs: Sequence[Mapping[str, Any]], dataset: str) -> list[dict[str, Any]]:
    """Per run: the HV ratio of its distinct evaluated cells, each put on its own fastest accelerator.

    What a run's cells are worth when accelerator evaluations cost nothing (the model is cheap): a flow could
    then search the accelerator of every cell it trained exhaustively. Same keys as the run rows.
    """
    ref = NB201AccelProblem(dataset=dataset).reference()
    fastest = _fastest(dataset)
    groups: dict[tuple[str, int, int], dict[str, float]] = {}
    for d in designs:
        groups.setdefault(run_key(d), {})[str(d["cell"])] = float(d["accuracy"])
    out = []
    for key, cells in groups.items():
        ids = list(cells)
        hv = ref.hv_ratio([cells[i] for i in ids], [fastest[i] for i in ids])
        out.append({"arm": key[0], "budget": key[1], "seed": key[2], "cells": len(ids), "hv_free": round(hv, 6)})
    return out


def bounds(dataset: str) -> list[dict[str, Any]]:
    """HV ratios the flows could reach with exhaustive stages (no search): how much co-design there is to gain.

    Rows: every cell on :data:`DEFAULT_ACCEL` (stage 1's best); the best single accelerator for every cell
    (a sequential flow that ends on one accelerator); the cells of the default accelerator's front, each on
    its own fastest accelerator (the sequential flow with both stages exhaustive); every cell on its own
    fastest accelerator (the exact front, 1 by definition). Latency depends on a cell only through its op
    counts, so per op-count combination only its most accurate cell can be on a front.
    """
    joint = NB201AccelProblem(dataset=dataset)
    ref = joint.reference()
    cells_part = joint.part("cell").problem
    accel_part = joint.part("accel").problem
    assert isinstance(cells_part, NB201Problem)
    accels = all_accels()
    combos, lat = latency_table(dataset, accels, joint.options.dram_gbps)
    col = {c: j for j, c in enumerate(combos)}
    j = np.array([col[_counts(tuple(int(x) for x in row))] for row in cells_part.table.ops])
    acc = np.asarray(cells_part.table.acc(dataset), dtype=float)
    top = np.full(len(combos), -np.inf)
    np.maximum.at(top, j, acc)
    have = np.isfinite(top)
    per_accel = np.array([ref.hv_ratio(top[have], lat[i, have]) for i in range(len(accels))])
    best = int(np.argmax(per_accel))
    default = accels.index(DEFAULT_ACCEL)
    fastest = lat.min(axis=0)
    on_default = pareto_mask(top[have], lat[default, have])
    return [
        {
            "bound": "every cell on the default accelerator",
            "accel": accel_part.point_id(DEFAULT_ACCEL),
            "hv": round(float(per_accel[default]), 6),
        },
        {
            "bound": "every cell on the best single accelerator",
            "accel": accel_part.point_id(accels[best]),
            "hv": round(float(per_accel[best]), 6),
        },
        {
            "bound": "the default accelerator's front cells, each on its own fastest accelerator",
            "accel": "per cell",
            "hv": round(ref.hv_ratio(top[have][on_default], fastest[have][on_default]), 6),
        },
        {
            "bound": "every cell on its own fastest accelerator (the exact front)",
            "accel": "per cell",
            "hv": round(ref.hv_ratio(top[have], fastest[have]), 6),
        },
    ]


# ---------------------------------------------------------------- the page and the plot


def table(rows: Sequence[Mapping[str, Any]]) -> str:
    """Per budget and arm: seeds, HV ratio, IGD, recall, evaluations, cells paid, wall time (means ± 95 % t)."""

    def cells(budget: int, arm: str, rs: Sequence[Mapping[str, Any]]) -> str:
        walls = sorted(float(r["wall_s"]) for r in rs)
        wall = f"{statistics.median(walls):.0f} [{walls[0]:.0f}, {walls[-1]:.0f}]"
        return (
            f"| {budget} | {arm} | {len(rs)} | {_mean([float(r['hv']) for r in rs], 4)} | {_mean([float(r['igd']) for r in rs], 4)} | "
            f"{_mean([float(r['recall']) for r in rs], 3)} | {_mean([float(r['evaluations']) for r in rs], 0)} | "
            f"{_mean([float(r['cells']) for r in rs], 0)} | {common.kept_text(rs)} | {wall} |"
        )

    header = (
        "| budget B | arm | seeds | HV ratio | IGD | front recall | joint designs evaluated | distinct cells paid (accuracy queries) "
        "| kept cells | wall s, median [min, max] |"
    )
    return common.arms_table(rows, ARMS, header, cells)


COMPARISONS = (
    ("joint", "sequential"),
    ("joint", "sequential-acc"),
    ("sequential-acc", "sequential"),
    ("joint", "tpe"),
    ("joint", "random"),
    ("sequential", "random"),
)


def findings(rows: Sequence[Mapping[str, Any]]) -> str:
    """Verdict lines: per budget and comparison, the paired HV-ratio (and recall) difference and what it says."""
    out = []
    for budget, a, b, _, diffs in comparisons(rows, COMPARISONS, ("hv",)):
        rec = paired(rows, a, b, budget, "recall")
        out.append(
            f"- B = {budget}, **{a}** vs **{b}**: HV-ratio difference {format_interval(diffs, 4)} (paired, {len(diffs)} seeds): "
            f"**{verdict(diffs, a, b)}**; front-recall difference {format_interval(rec, 3)}."
        )
    return "\n".join(out) + "\n"


def where_joint_does_not_pay(rows: Sequence[Mapping[str, Any]], free: Sequence[Mapping[str, Any]] = ()) -> str:
    """Lines, per budget, where joint search is not ahead of a sequential arm (paired HV ratio), with what each paid.

    ``free``: the free-accelerator rows (:func:`free_rows`); where joint search is not ahead under that scoring
    either, a line says so (its cells are then worth no more than the sequential flow's).
    """

    def mean_of(arm: str, field: str, budget: int) -> float:
        return statistics.fmean(float(r[field]) for r in rows if r["arm"] == arm and int(r["budget"]) == budget)

    out = [
        f"- B = {budget}: **{seq}** is not behind joint search ({verdict(diffs, 'joint', seq)}; HV-ratio difference "
        f"{format_interval(diffs, 4)}), having evaluated {mean_of(seq, 'evaluations', budget):.0f} joint designs and paid "
        f"{mean_of(seq, 'cells', budget):.0f} distinct cells (accuracy queries, training runs); joint search evaluated "
        f"{mean_of('joint', 'evaluations', budget):.0f} and paid {mean_of('joint', 'cells', budget):.0f}."
        for budget, seq, _, diffs in joint_not_ahead(rows, ("hv",))
    ]
    out += [
        f"- B = {budget}, cells on their fastest accelerators: **{seq}** is not behind joint search "
        f"({verdict(diffs, 'joint', seq)}; difference {format_interval(diffs, 4)}): the cells joint search "
        "trained are not measurably worth more than the sequential flow's once accelerators are searched for free."
        for budget, seq, _, diffs in joint_not_ahead(free, ("hv_free",))
    ]
    if not out:
        return "- Joint search is ahead of every sequential arm at every budget measured.\n"
    return "\n".join(out) + "\n"


def plot(designs: Sequence[Mapping[str, Any]], ref: FrontReference, budget: int, seed: int, path: Path) -> bool:
    """Both arms' evaluated designs and fronts at ``budget``/``seed``, with the exact front; False when there is nothing to plot."""
    chosen = [d for d in designs if int(d["budget"]) == budget and int(d["seed"]) == seed]
    if not chosen:
        return False
    labels = {
        "front": "exact front",
        "x": "latency, ms per image (log)",
        "y": "CIFAR-10 test accuracy, %",
        "title": f"nb201-accel, {budget} evaluations, seed {seed}",
    }
    common.plot_fronts(chosen, ref, "latency_ms", path, labels=labels, dots=(6, 0.25), log_x=True)
    return True


# ---------------------------------------------------------------- the command


def parser() -> Any:
    """The figure's options."""
    return common.add_search_options(
        figure_parser(NAME, __doc__),
        budgets=BUDGETS,
        seeds=SEEDS,
        arms=ARMS,
        runs="runs/codesign",
        datasets=("cifar10", "cifar100", "imagenet16_120"),
    )


def measure(
    budgets: Sequence[int], seeds: Sequence[int], arms: Sequence[str], dataset: str, runs: Path
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """Run every (budget, seed, arm); returns (run rows, design rows)."""
    runs.mkdir(parents=True, exist_ok=True)
    ref = NB201AccelProblem(dataset=dataset).reference()

    def note(rows: list[dict[str, Any]]) -> str:
        m = score(ref, rows)
        return f", HV ratio {m.hv_ratio:.4f}, recall {m.front_recall:.3f}"

    designs, kept, wall = common.measure_runs(budgets, seeds, arms, lambda arm, b, s: run_arm(arm, b, s, dataset, runs), note)
    return run_rows(designs, kept, wall, ref), designs


def merge(out: Output, rows: list[dict[str, Any]], designs: list[dict[str, Any]]) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """The new runs' rows and designs, with those of other (arm, budget, seed) already saved in ``out`` kept (runs first)."""
    if not out.path(RUNS_CSV).exists() or not out.path(DESIGNS_CSV).exists():
        return rows, designs
    new = {run_key(r) for r in rows}
    old_rows = [r for r in read_numbers(out.path(RUNS_CSV)) if run_key(r) not in new]
    old_designs = [d for d in read_numbers(out.path(DESIGNS_CSV)) if run_key(d) not in new]
    order = {k: i for i, k in enumerate(sorted({run_key(r) for r in [*old_rows, *rows]}, key=lambda k: (k[1], ARMS.index(k[0]), k[2])))}
    return sorted([*old_rows, *rows], key=lambda r: order[run_key(r)]), sorted([*old_designs, *designs], key=lambda d: order[run_key(d)])


def bounds_section(rows: Sequence[Mapping[str, Any]]) -> str:
    """The bounds table, and what it says about co-design on this problem."""
    lines = ["| exhaustive flow (no search) | accelerator | HV ratio |", "| --- | --- | --- |"]
    lines += [f"| {r['bound']} | `{r['accel']}` | {float(r['hv']):.6f} |" for r in rows]
    single = next((r for r in rows if str(r["bound"]).startswith("every cell on the best single")), None)
    if single is not None and float(single["hv"]) >= 1 - 1e-9:
        lines += [
            "",
            f"**One accelerator (`{single['accel']}`) is the fastest for every cell that can be on the front**: in this "
            "model the best accelerator does not depend on the cell, so co-design has no structural gain on "
            "(accuracy, latency); a sequential flow whose stages were exhaustive would reach the exact front. Whatever "
            "joint search gains below comes from spending its evaluations better, not from the interaction of the parts.",
        ]
    return "\n".join(lines) + "\n"


def free_section(free: Sequence[Mapping[str, Any]]) -> str:
    """Per budget, the free-accelerator HV ratio per arm, and the paired joint vs sequential verdicts under it."""
    lines = [
        common.arms_table(
            free,
            ARMS,
            "| budget B | arm | distinct cells | HV ratio, cells on their fastest accelerators |",
            lambda budget, arm, rs: (
                f"| {budget} | {arm} | {_mean([float(r['cells']) for r in rs], 0)} | {_mean([float(r['hv_free']) for r in rs], 4)} |"
            ),
        )
    ]
    lines += [
        f"- B = {budget}, **joint** vs **{seq}**, cells on their fastest accelerators: difference "
        f"{format_interval(diffs, 4)} (paired, {len(diffs)} seeds): **{verdict(diffs, 'joint', seq)}**."
        for budget, _, seq, _, diffs in comparisons(free, [("joint", s) for s in SEQUENTIAL], ("hv_free",))
    ]
    return "\n".join(lines) + "\n"


def render(
    rows: Sequence[Mapping[str, Any]],
    dataset: str,
    bound_rows: Sequence[Mapping[str, Any]] = (),
    free: Sequence[Mapping[str, Any]] = (),
) -> str:
    """The page's body from the run rows."""
    budgets = budgets_of(rows)
    seeds = sorted({int(r["seed"]) for r in rows})
    d = DEFAULT_ACCEL
    return "\n".join(
        [
            f"# Joint vs sequential co-design on nb201-accel ({dataset}), at equal evaluations",
            "",
            f"Written by `python -m coevo.figures codesign` from `{RUNS_CSV}` (a row per arm, budget and seed) and "
            f"`{DESIGNS_CSV}` (every design each run evaluated); budgets {', '.join(map(str, budgets))}, seeds "
            f"{', '.join(map(str, seeds))}; the arms may be run by several invocations (`--arms`), a run's rows replacing its "
            "earlier ones (the provenance line names the last). Issue 32, item 4.",
            "",
            "**Arms**, each at the same total of B evaluations of joint designs (cell and accelerator):",
            "",
            "* `joint`: pelnas on `nb201-accel`, budget B.",
            f"* `sequential`: stage 1, pelnas on the cell alone with the accelerator fixed at a default (rows={d.rows} "
            f"cols={d.cols} dataflow={d.dataflow} ifmap_kb={d.ifmap_kb} filter_kb={d.filter_kb} ofmap_kb={d.ofmap_kb} "
            f"clock_mhz={d.clock_mhz}), B/2 evaluations; stage 2, the cells on stage 1's front are kept and pelnas searches "
            "the accelerator with a choice among them only, the other B/2 evaluations.",
            "* `sequential-acc`: the same flow at equal accuracy queries instead: stage 1 pays B cells on the default "
            "accelerator, stage 2 (which pays no accuracy: its cells' are known) gets B accelerator evaluations more, "
            "2B joint designs in all.",
            "* `tpe`, `random`: Optuna's multivariate TPE and random sampler on the joint encoding, budget B.",
            "",
            "**Counting.** Every joint design a run evaluates counts once (the runner's budget). So the sequential flow pays "
            "fewer accuracy queries (training runs): its stage 2 re-uses stage 1's cells, whose accuracies are known. The "
            "table gives both counts; `sequential-acc` is the comparison at equal accuracy queries. Wall seconds are on a "
            "shared 2-core machine (load in the provenance) and the first run of the process also pays one-time loading.",
            "",
            "**Scoring.** All designs a run evaluated (both stages for `sequential`) on (accuracy, latency_ms) against the "
            "exact front of the whole space (`NB201AccelProblem.reference()`, so no pooled front is needed): HV ratio, IGD, "
            "front recall. Means ± 95 % t half-widths over seeds; differences are paired by seed.",
            "",
            "## Results",
            "",
            table(rows),
            "## Verdicts (computed from the CSV)",
            "",
            findings(rows),
            f"## What each flow could reach at best (`{BOUNDS_CSV}`: every design scored, no search)",
            "",
            bounds_section(bound_rows) if bound_rows else "(not measured)\n",
            f"## If accelerator evaluations were free (`{FREE_CSV}`)",
            "",
            "The accelerator model is cheap next to training a cell, so a flow could search every trained cell's "
            "accelerator exhaustively. Here each run's distinct evaluated cells are rescored on their own fastest "
            "accelerators (from the model, no search): what the cells each flow trained are worth.",
            "",
            free_section(free) if free else "(not computed)\n",
            "## Where joint search does not pay (computed from the CSV)",
            "",
            where_joint_does_not_pay(rows, free),
            "`sequential-acc` at B runs the same two stages as `sequential` at 2B (B evaluations each); the engine is "
            "deterministic given the seed, so where both were run their rows agree.",
            "",
            "## Limits of this comparison",
            "",
            f"* One dataset ({dataset}), one DRAM bandwidth (nb201-accel's default), one default accelerator for stage 1; another "
            "default would move the `sequential` rows (the bounds table gives what stage 1 alone can reach on this one).",
            "* Stage 2's engine is not told the kept cells' accuracies: it reads them from its own evaluations, with no "
            "zero-cost proxies (the kept-cell part is a plain choice). A stage 2 that minimised each kept cell's latency "
            "on its own could do better; the bounds say an exhaustive one reaches the exact front.",
            "* Distinct cells paid counts a cell once however many accelerators it was evaluated on: a trained cell "
            "need not be trained again. The runner's budget counts every joint design.",
            "* Latency is the only objective that couples the parts here; energy and area are recorded, not scored.",
            "",
            f"![fronts]({PNG})",
            "",
        ]
    )


def main(argv: list[str] | None = None) -> None:
    """Measure (unless ``--report-only``), then write the CSVs, ``codesign.md`` and the plot."""
    a, out = common.open_output(NAME, parser(), argv)
    if not a.report_only:
        budgets, seeds, arms = common.requested(a, ARMS)
        rows, designs = measure(budgets, seeds, arms, a.dataset, a.runs)
        measured = bool(rows)
        rows, designs = merge(out, rows, designs)
        if measured:  # --arms '' measures nothing: it only recomputes the tables derived from the saved designs
            out.write_csv(DESIGNS_CSV, designs, DESIGN_FIELDS)
            out.write_csv(RUNS_CSV, rows, RUN_FIELDS)
        out.write_csv(FREE_CSV, free_rows(designs, a.dataset), ("arm", "budget", "seed", "cells", "hv_free"))
        out.write_csv(BOUNDS_CSV, bounds(a.dataset), ("bound", "accel", "hv"))
    rows = read_numbers(out.path(RUNS_CSV))
    designs = read_numbers(out.path(DESIGNS_CSV))
    ref = NB201AccelProblem(dataset=a.dataset).reference()
    plot(designs, ref, max(int(r["budget"]) for r in rows), a.plot_seed, out.path(PNG))
    out.write_markdown(MD, render(rows, a.dataset, common.read_saved(out, BOUNDS_CSV), common.read_saved(out, FREE_CSV)))
    print(f"wrote {out.path(MD)}")
