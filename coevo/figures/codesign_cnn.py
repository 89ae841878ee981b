"""Joint vs sequential co-design on deploy-cnn at equal evaluations (issue 32, items 3 and 4).

    nice -n 10 python -m coevo.figures codesign-cnn                  # the committed figure (budget 40; seeds 0-2)
    python -m coevo.figures codesign-cnn --budgets 8 --seeds 0 --out /tmp/cc   # a quick look
    python -m coevo.figures codesign-cnn --report-only               # re-render the page and plot from the CSVs

Arms, each at the same total of **B paid evaluations of joint designs** (a design is a bit
assignment, a sparsity per layer and an accelerator; every one a search evaluates counts once):

* ``joint``: pelnas on ``deploy-cnn`` (compression and accelerator searched together), budget B;
* ``sequential``: the classic flow, with the nb201-accel figure's machinery
  (:mod:`coevo.figures.codesign`). Stage 1 compresses the network (bits and sparsity) on a fixed
  default accelerator (:data:`~coevo.figures.codesign.DEFAULT_ACCEL`, the same one), B/2
  evaluations (:func:`~coevo.figures.codesign.split_budget`). Stage 2 keeps the compressions on
  stage 1's (accuracy, energy) front and pelnas searches the accelerator together with a choice
  among those compressions only, the other B/2;
* ``sequential-acc``: the same flow at equal **accuracy evaluations** instead
  (:func:`~coevo.figures.codesign.stages`): stage 1 pays B compressions, stage 2 (whose
  compressions' accuracies are stage 1's) B accelerator evaluations more, 2B joint designs;
* ``random``: Optuna's random sampler on the joint encoding, budget B (a floor).

Scoring: the space (5^10 bit assignments x 6^4 sparsities x 30,000 accelerators) has no known
front, so every design every arm evaluated at a budget, all seeds, is pooled, and the pooled
designs' front is the reference (floor 80 %, the quant problem's; the ceiling the pooled designs'
largest energy). Each run is scored by its HV ratio against it on (accuracy, energy_uj), the
problem's Pareto pair, and on (accuracy, latency_ms) the same way. Seeds pair the arms; the page
gives same-seed differences with 95 % t intervals. Writes ``codesign-cnn.csv`` (a row per arm,
budget and seed), ``codesign-cnn-designs.csv`` (every design evaluated), ``codesign-cnn-best.csv``
(per distinct compression evaluated: its energy on the default accelerator and on its own
lowest-energy accelerator, found over all 30,000), ``codesign-cnn.md`` and
``codesign-cnn-fronts.png``.
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
from coevo.figures._codesign_common import budgets_of
from coevo.figures._common import figure_parser, read_numbers
from coevo.figures.codesign import DEFAULT_ACCEL, FixedAccelPart, front_cells
from coevo.search.deploy_cnn.problem import DeployCnnOptions, DeployCnnProblem
from coevo.search.metrics import FrontReference, pareto_mask
from coevo.search.nb201_accel.accel import Accel, AccelPart, AccelResult
from coevo.search.nb201_accel.problem import all_accels
from coevo.search.quant.problem import QuantProblem
from coevo.sim.accel.network import ArrayConfig, Workload, network_cost

NAME = "codesign-cnn"
ARMS = ("joint", "sequential", "sequential-acc", "random")
BUDGETS = (40, 100)
SEEDS = (0, 1, 2)
SEARCHERS = {"joint": "pelnas", "random": "random"}
"""The arms that search the joint space directly, and their proposers."""
PAIRS = {"energy": "energy_uj", "latency": "latency_ms"}
"""Scored pairs: accuracy against each of these (short name -> objective)."""
RUNS_CSV, DESIGNS_CSV, BEST_CSV = "codesign-cnn.csv", "codesign-cnn-designs.csv", "codesign-cnn-best.csv"
MD, PNG = "codesign-cnn.md", "codesign-cnn-fronts.png"
RUN_FIELDS = ("arm", "budget", "seed", "evaluations", "compressions", "kept", "hv_energy", "hv_latency", "wall_s")
DESIGN_FIELDS = ("arm", "budget", "seed", "stage", "bits", "sparsity", "accel", "accuracy", "energy_uj", "latency_ms", "area_mm2")
BEST_FIELDS = ("bits", "sparsity", "accuracy", "energy_default", "energy_best", "best_accel")


# ---------------------------------------------------------------- the sequential flow's two stage problems


class FixedAccelDeployCnn(DeployCnnProblem):
    """deploy-cnn with the accelerator fixed at :data:`DEFAULT_ACCEL`: the sequential flow's stage 1 (a compression search)."""

    name = "deploy-cnn-fixed"

    def accel_part(self) -> AccelPart:
        return FixedAccelPart(dram_gbps=self.options.dram_gbps)


class KeptOptions(DeployCnnOptions):
    """Options of stage 2: deploy-cnn's, and the kept compressions."""

    kept: str = Field(description="the kept compressions, each 'widths:sparsities' (numbers joined by commas), joined by ';'")


def encode_kept(compressions: Sequence[tuple[tuple[int, ...], tuple[float, ...]]]) -> str:
    """The ``kept`` option for ``compressions`` ((widths, sparsities) pairs)."""
    return ";".join(",".join(map(str, w)) + ":" + ",".join(f"{s:g}" for s in sp) for w, sp in compressions)


def decode_kept(text: str) -> list[tuple[tuple[int, ...], tuple[float, ...]]]:
    """The (widths, sparsities) pairs of a ``kept`` option (:func:`encode_kept`'s inverse)."""
    out = []
    for item in text.split(";"):
        widths, _, sparsities = item.partition(":")
        out.append((tuple(int(x) for x in widths.split(",")), tuple(float(x) for x in sparsities.split(","))))
    return out


class KeptCompressionPart(common.KeptPart):
    """A choice among a few compressions (bits and sparsities) of the CNN; its accuracy is deploy-cnn's."""

    name = "kept-compressions"
    Options = KeptOptions
    level = "compression"

    @functools.cached_property
    def joint(self) -> DeployCnnProblem:
        """deploy-cnn, which gives a compression's accuracy and workload."""
        return DeployCnnProblem(model=self.options.model, dram_gbps=self.options.dram_gbps)

    @functools.cached_property
    def kept(self) -> list[tuple[tuple[int, ...], tuple[float, ...]]]:
        """The kept compressions, (widths, sparsities) each."""
        return decode_kept(self.options.kept)

    def choices(self) -> tuple[int, ...]:
        return tuple(range(len(self.kept)))

    def evaluate(self, point: Any) -> dict[str, float]:
        return {"accuracy": self.joint.compression_accuracy(*self.kept[point[0]])}

    def workload(self, choice: Any) -> Workload:
        return self.joint.compression_workload(*self.kept[choice])


class KeptCompressionsProblem(common.KeptProblem):
    """The sequential flow's stage 2: the accelerator searched with a choice among stage 1's front compressions."""

    name = "deploy-cnn-kept"
    Options = KeptOptions
    Kept = KeptCompressionPart
    objectives = DeployCnnProblem.objectives

    def values(self, point: tuple[Any, ...], outputs: Mapping[str, Any], *, cheap_only: bool) -> dict[str, float]:
        result: AccelResult = outputs["accel"]
        out = {"energy_uj": result.cost.energy_uj, "latency_ms": result.cost.latency_ms, "area_mm2": result.area_mm2}
        if not cheap_only:
            out["accuracy"] = self.part("compression").problem.evaluate(self.subpoint(point, "compression"))["accuracy"]
        return out

    def joint_point(self, point: tuple[Any, ...]) -> tuple[Any, ...]:
        """The deploy-cnn design ``point`` stands for."""
        part = self.part("compression").problem
        assert isinstance(part, KeptCompressionPart)
        widths, sparsities = part.kept[point[0][0]]
        return widths, sparsities, Accel(*point[1])


# ---------------------------------------------------------------- measuring


def _design_row(arm: str, budget: int, seed: int, stage: int, joint: DeployCnnProblem, point: tuple[Any, ...]) -> dict[str, Any]:
    widths, sparsities, accel = point
    values = joint.evaluate((tuple(widths), tuple(sparsities), Accel(*accel)))
    return {
        "arm": arm,
        "budget": budget,
        "seed": seed,
        "stage": stage,
        "bits": joint.part("bits").problem.point_id(tuple(widths)),
        "sparsity": joint.part("sparsity").problem.point_id(tuple(sparsities)),
        "accel": joint.part("accel").problem.point_id(Accel(*accel)),
        **{k: round(float(values[k]), 9) for k in ("accuracy", "energy_uj", "latency_ms", "area_mm2")},
    }


def kept_compressions(points: Sequence[tuple[Any, ...]], rows: Sequence[Mapping[str, Any]]) -> list[tuple[Any, Any]]:
    """The distinct compressions ((widths, sparsities)) on the (max accuracy, min energy) front of ``rows``, first seen first."""
    keys = [(tuple(p[0]), tuple(p[1])) for p in points]
    distinct = list(dict.fromkeys(keys))
    index = [distinct.index(k) for k in keys]
    chosen = front_cells(index, [float(r["accuracy"]) for r in rows], [float(r["energy_uj"]) for r in rows])
    return [distinct[i] for i in chosen]


def run_arm(arm: str, budget: int, seed: int, runs: Path) -> tuple[list[dict[str, Any]], int, float]:
    """Every design arm ``arm`` evaluated at ``budget`` and ``seed`` (as design rows), the compressions it kept, its wall time."""
    joint = DeployCnnProblem()

    def kept(points: list[Any], rows: list[dict[str, Any]]) -> tuple[int, KeptCompressionsProblem]:
        compressions = kept_compressions(points, rows)
        return len(compressions), KeptCompressionsProblem(kept=encode_kept(compressions))

    flow = common.Flow(SEARCHERS, joint, FixedAccelDeployCnn, kept, _design_row, names="cnn-{stage}-b{budget}-s{seed}")
    return common.run_flow(flow, arm, budget, seed, runs)


def accuracy_floor() -> float:
    """The accuracy floor of the useful region: the quant problem's (deploy-cnn's bits part)."""
    return QuantProblem().acquisition_bounds()[0]


def pooled_reference(designs: Sequence[Mapping[str, Any]], second: str) -> FrontReference:
    """The front of every design in ``designs`` on (accuracy, ``second``), with the quant problem's 80 % floor."""
    floor = accuracy_floor()
    acc = np.array([float(d["accuracy"]) for d in designs])
    other = np.array([float(d[second]) for d in designs])
    return FrontReference.from_space(acc, other, floor)


def run_rows(
    designs: Sequence[Mapping[str, Any]], kept: Mapping[tuple[str, int, int], int], wall: Mapping[tuple[str, int, int], float]
) -> list[dict[str, Any]]:
    """One row per (arm, budget, seed): evaluations, distinct compressions paid, kept, HV ratios against the budget's pooled fronts."""
    refs = {
        (b, name): pooled_reference([d for d in designs if int(d["budget"]) == b], col)
        for b in {int(d["budget"]) for d in designs}
        for name, col in PAIRS.items()
    }
    out = []
    for key, rows in common.run_groups(designs, ARMS):
        acc = [float(r["accuracy"]) for r in rows]
        hv = {name: refs[(key[1], name)].hv_ratio(acc, [float(r[col]) for r in rows]) for name, col in PAIRS.items()}
        scores = {"hv_energy": round(hv["energy"], 6), "hv_latency": round(hv["latency"], 6)}
        out.append(common.run_row(key, rows, ("compressions", len({(r["bits"], r["sparsity"]) for r in rows})), kept, wall, scores))
    return out


# ---------------------------------------------------------------- does the best accelerator depend on the compression?


@functools.cache
def _accel_configs(dram_gbps: float) -> tuple[tuple[Accel, ArrayConfig], ...]:
    return tuple(
        (a, ArrayConfig(a.rows, a.cols, a.dataflow, a.ifmap_kb, a.filter_kb, a.ofmap_kb, a.clock_mhz, dram_gbps)) for a in all_accels()
    )


def best_rows(designs: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Per distinct compression of ``designs``: its energy on :data:`DEFAULT_ACCEL` and on its lowest-energy accelerator (all 30,000)."""
    joint = DeployCnnProblem()
    bits_part, sparsity_part = joint.part("bits").problem, joint.part("sparsity").problem
    configs = _accel_configs(joint.options.dram_gbps)
    seen: dict[tuple[str, str], float] = {}
    for d in designs:
        seen.setdefault((str(d["bits"]), str(d["sparsity"])), float(d["accuracy"]))
    out = []
    for (bits_id, sparsity_id), accuracy in seen.items():
        widths = bits_part.parse_design(" ".join(f"{n}={v}" for n, v in zip(bits_part.distributions(), bits_id.split("-"), strict=True)))
        sparsities = sparsity_part.parse_design(
            " ".join(f"{n}={v}" for n, v in zip(sparsity_part.distributions(), sparsity_id.split("-"), strict=True))
        )
        workload = joint.compression_workload(widths, sparsities)
        energies = np.array([network_cost(workload, c).energy_uj for _, c in configs])
        default = next(c for a, c in configs if a == DEFAULT_ACCEL)
        best = int(np.argmin(energies))
        out.append(
            {
                "bits": bits_id,
                "sparsity": sparsity_id,
                "accuracy": accuracy,
                "energy_default": round(network_cost(workload, default).energy_uj, 9),
                "energy_best": round(float(energies[best]), 9),
                "best_accel": joint.part("accel").problem.point_id(configs[best][0]),
            }
        )
    return out


def front_designs(designs: Sequence[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
    """The designs on the (max accuracy, min energy) front of ``designs``, at or above the 80 % floor."""
    acc = np.array([float(d["accuracy"]) for d in designs])
    energy = np.array([float(d["energy_uj"]) for d in designs])
    floor = accuracy_floor()
    mask = pareto_mask(acc, energy) & (acc >= floor)
    return [d for d, keep in zip(designs, mask, strict=True) if keep]


# ---------------------------------------------------------------- the page and the plot


def table(rows: Sequence[Mapping[str, Any]]) -> str:
    """Per budget and arm: seeds, HV ratios (median; mean ± 95 % t), evaluations, compressions paid, kept, wall time."""
    return common.hv_table(rows, ARMS, {"hv_energy": "accuracy, energy", "hv_latency": "accuracy, latency"})


_COLUMNS = {f"hv_{name}": col for name, col in PAIRS.items()}
"""Run-row HV column -> the objective it pairs with accuracy."""
COMPARISONS = (
    ("joint", "sequential"),
    ("joint", "sequential-acc"),
    ("sequential-acc", "sequential"),
    ("joint", "random"),
    ("sequential", "random"),
)


def findings(rows: Sequence[Mapping[str, Any]]) -> str:
    """Per budget, comparison and scored pair: the paired HV-ratio difference (mean ± 95 % t) and what it says."""
    return common.findings_text(rows, COMPARISONS, _COLUMNS, "accuracy")


def best_section(best: Sequence[Mapping[str, Any]]) -> str:
    """What the lowest-energy accelerator of each pooled front compression says about the parts' interaction."""
    if not best:
        return "(not computed)\n"
    accels = sorted({str(r["best_accel"]) for r in best})
    saving = [1 - float(r["energy_best"]) / float(r["energy_default"]) for r in best]
    lines = [
        f"{len(best)} compressions (the distinct ones on the pooled (accuracy, energy) front), each scored on all 30,000 "
        f"accelerators: their lowest-energy accelerators are {len(accels)} distinct one(s) "
        f"({', '.join(f'`{a}`' for a in accels[:6])}{', ...' if len(accels) > 6 else ''}); against the default accelerator "
        f"`{joint_accel_id(DEFAULT_ACCEL)}` their own best saves {min(saving):.1%} to {max(saving):.1%} of the energy "
        f"(median {statistics.median(saving):.1%}).",
        "",
    ]
    if len(accels) == 1:
        lines.append(
            "**One accelerator is the lowest-energy one for every front compression**: in this model the best accelerator for "
            "energy does not depend on the compression, so a sequential flow whose stage 2 found that accelerator would lose "
            "nothing to joint search on (accuracy, energy); what joint search can gain is in how it spends its evaluations."
        )
    else:
        lines.append(
            "The lowest-energy accelerator depends on the compression (the weight buffer a compressed network fits changes "
            "its DRAM traffic), so the parts interact; how much that is worth is the gap between the accelerators above."
        )
    return "\n".join(lines) + "\n"


def joint_accel_id(accel: Accel) -> str:
    """The accelerator part's point id of ``accel``."""
    return AccelPart().point_id(accel)


def where_joint_does_not_pay(rows: Sequence[Mapping[str, Any]]) -> str:
    """Lines where joint search is not ahead of the sequential flow (paired HV ratio), per budget and scored pair."""
    return common.not_ahead_text(rows, _COLUMNS, "accuracy")


def plot(designs: Sequence[Mapping[str, Any]], budget: int, seed: int, path: Path) -> bool:
    """Both arms' evaluated designs and fronts at ``budget``/``seed`` on (energy, accuracy), with the pooled front."""
    at_budget = [d for d in designs if int(d["budget"]) == budget]
    chosen = [d for d in at_budget if int(d["seed"]) == seed]
    if not chosen:
        return False
    labels = {
        "front": "pooled front (all arms, seeds)",
        "x": "energy, uJ per image (accelerator model)",
        "y": "cnn-digits validation accuracy, %",
        "title": f"deploy-cnn, {budget} evaluations, seed {seed}",
    }
    common.plot_fronts(chosen, pooled_reference(at_budget, "energy_uj"), "energy_uj", path, labels=labels, dots=(8, 0.3))
    return True


def render(rows: Sequence[Mapping[str, Any]], best: Sequence[Mapping[str, Any]] = ()) -> str:
    """The page's body from the run rows and the best-accelerator rows."""
    budgets = budgets_of(rows)
    seeds = sorted({int(r["seed"]) for r in rows})
    evals = sum(float(r["evaluations"]) for r in rows)
    return "\n".join(
        [
            "# Joint vs sequential co-design on deploy-cnn (cnn-digits), at equal evaluations",
            "",
            f"Written by `python -m coevo.figures {NAME}` from `{RUNS_CSV}` (a row per arm, budget and seed), `{DESIGNS_CSV}` "
            f"(every design each run evaluated) and `{BEST_CSV}`; budgets {', '.join(map(str, budgets))}, seeds "
            f"{', '.join(map(str, seeds))}. Issue 32, items 3 and 4. Accuracy is measured (the zoo CNN pruned and quantized, "
            "validation split); energy, latency and area come from the accelerator model (`sim/accel/network.py`), not silicon.",
            "",
            "**Arms**, each at the same total of B evaluations of joint designs (bits, sparsity, accelerator):",
            "",
            "* `joint`: pelnas on `deploy-cnn`, budget B.",
            f"* `sequential`: stage 1, pelnas on the compression (bits and sparsity) with the accelerator fixed at the nb201-accel "
            f"figure's default (`{joint_accel_id(DEFAULT_ACCEL)}`: rows-cols-dataflow-ifmap-filter-ofmap KiB-MHz), B/2 evaluations; "
            "stage 2, the compressions on stage 1's (accuracy, energy) front are kept and pelnas searches the accelerator with a "
            "choice among them only, the other B/2.",
            "* `sequential-acc`: the same flow at equal accuracy evaluations: stage 1 pays B compressions on the default "
            "accelerator, stage 2 gets B accelerator evaluations more (2B joint designs).",
            "* `random`: Optuna's random sampler on the joint encoding, budget B.",
            "",
            "**Counting.** Every joint design a run evaluates counts once (the runner's budget): that is the comparison at equal "
            "evaluations. The sequential flow's stage 2 re-evaluates stage 1's compressions, so it pays fewer distinct "
            "accuracy evaluations (the table's 'distinct compressions'); `sequential-acc` is the comparison at equal accuracy "
            "evaluations. Here an accuracy evaluation is cheap (no retraining), so the joint-design count is the one that "
            "matters; with fine-tuning per design it would be the other.",
            "",
            "**Scoring.** The space has no known front, so at each budget every design of every arm and seed is pooled and the "
            "pooled designs' front is the reference (accuracy floor 80 %, the quant problem's; the ceiling the pooled designs' "
            "largest energy or latency). A run's HV ratio is its evaluated designs' HV over the pooled front's, on "
            "(accuracy, energy_uj), deploy-cnn's Pareto pair, and on (accuracy, latency_ms). Differences are paired by seed, "
            f"95 % t intervals ({len(seeds)} seeds: {len(seeds) - 1} degrees of freedom, wide intervals).",
            "",
            "## Results",
            "",
            table(rows),
            f"Wall time per joint design over all runs: {sum(float(r['wall_s']) for r in rows) / evals:.2f} s (the search engine, "
            "the one-time loading of each run's process and the re-scoring of every design for the CSV included; a design's own "
            "evaluation alone is timed in docs/compose.md).",
            "",
            "## Verdicts (computed from the CSV)",
            "",
            findings(rows),
            f"## Does the best accelerator depend on the compression? (`{BEST_CSV}`)",
            "",
            best_section(best),
            "## Where joint search does not pay (computed from the CSV)",
            "",
            where_joint_does_not_pay(rows),
            "## Limits of this comparison",
            "",
            f"* Small budgets ({', '.join(map(str, budgets))} evaluations) and {len(seeds)} seeds: the intervals are wide, and a "
            "verdict of 'no difference' means the seeds cannot resolve one, not that there is none.",
            "* Wall seconds are on a shared 2-core machine; a process's first run also pays one-time loading (torch, the zoo "
            "model, its class-importance groups: several seconds).",
            "* The pooled front is the best any arm found, not the space's front: HV ratios are relative to it.",
            "* One CNN (cnn-digits, 8x8 images: its weights, about 41 K, dominate its DRAM traffic), one DRAM bandwidth, one "
            "default accelerator for stage 1, no fine-tuning after pruning and quantization.",
            "* The accelerator model's energy is dominated by DRAM traffic, which the compression sets; the accelerator moves "
            "it only through buffer fit, SRAM size and the assumed voltage-frequency line (MAC and SRAM energy).",
            "",
            f"![fronts]({PNG})",
            "",
        ]
    )


# ---------------------------------------------------------------- the command


def parser() -> Any:
    """The figure's options."""
    return common.add_search_options(figure_parser(NAME, __doc__), budgets=BUDGETS, seeds=SEEDS, arms=ARMS, runs="runs/codesign-cnn")


def measure(
    budgets: Sequence[int], seeds: Sequence[int], arms: Sequence[str], runs: Path
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """Run every (budget, seed, arm); returns (run rows, design rows)."""
    runs.mkdir(parents=True, exist_ok=True)
    designs, kept, wall = common.measure_runs(budgets, seeds, arms, lambda arm, b, s: run_arm(arm, b, s, runs))
    return run_rows(designs, kept, wall), designs


def main(argv: list[str] | None = None) -> None:
    """Measure (unless ``--report-only``), then write the CSVs, the page and the plot."""
    a, out = common.open_output(NAME, parser(), argv)
    if not a.report_only:
        budgets, seeds, arms = common.requested(a, ARMS)
        rows, designs = measure(budgets, seeds, arms, a.runs)
        out.write_csv(DESIGNS_CSV, designs, DESIGN_FIELDS)
        out.write_csv(RUNS_CSV, rows, RUN_FIELDS)
        top = max(budgets)
        out.write_csv(BEST_CSV, best_rows(front_designs([d for d in designs if int(d["budget"]) == top])), BEST_FIELDS)
    rows = read_numbers(out.path(RUNS_CSV))
    designs = read_numbers(out.path(DESIGNS_CSV))
    plot(designs, max(int(r["budget"]) for r in rows), a.plot_seed, out.path(PNG))
    out.write_markdown(MD, render(rows, common.read_saved(out, BEST_CSV)))
    print(f"wrote {out.path(MD)}")
