"""Joint vs sequential co-design on deploy-lm at equal evaluations (issue 32, items 3 and 4).

    nice -n 10 python -m coevo.figures codesign-lm                  # the committed figure (budget 40; seeds 0-2)
    python -m coevo.figures codesign-lm --budgets 8 --seeds 0 --out /tmp/cl   # a quick look
    python -m coevo.figures codesign-lm --report-only               # re-render the page and plot from the CSVs

Arms, each at the same total of **B paid evaluations of joint designs** (a design is a sparsity and
a weight width per block group of lm-pydoc-tiny and an FPGA design: PE split, tiles, top-k, key
bits, scheduler; every one a search evaluates counts once):

* ``joint``: pelnas on ``deploy-lm`` (compression and accelerator searched together), budget B;
* ``sequential``: the classic flow, with the figures' shared machinery
  (:mod:`coevo.figures._codesign_common`). Stage 1 compresses the LM (sparsity and bits) on a
  fixed default FPGA design (:data:`DEFAULT_FPGA`: the FPGA family's default PE split and tiles,
  the sparse-attention family's default top-k and key bits, the length-aware scheduler), B/2
  evaluations. Stage 2 keeps the compressions on stage 1's (-ln perplexity, latency) front and
  pelnas searches the FPGA design together with a choice among those compressions only, the other
  B/2 (top-k and key bits move the perplexity too, so stage 2 pays a perplexity per design);
* ``random``: Optuna's random sampler on the joint encoding, budget B (a floor).

Problem options: deploy-lm's defaults but for a smaller workload and validation sample, so that
the figure runs in minutes on two shared cores (:data:`OPTIONS`). Scoring: the space has no known
front, so every design every arm evaluated at a budget, all seeds, is pooled, and the pooled
designs' front is the reference (floor: perplexity 1.5 x the zoo model's own on the same
validation sample; the ceiling the pooled designs' largest latency or memory). Each run is scored
by its HV ratio against it on (neg_log_ppl, latency_ms), the problem's Pareto pair, and on
(neg_log_ppl, weight_mb). Seeds pair the arms. Writes ``codesign-lm.csv`` (a row per arm, budget
and seed), ``codesign-lm-designs.csv`` (every design evaluated), ``codesign-lm.md`` and
``codesign-lm-fronts.png``.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, ClassVar

import numpy as np
from pydantic import Field

from coevo.figures import _codesign_common as common
from coevo.figures._codesign_common import budgets_of
from coevo.figures._common import figure_parser, read_numbers
from coevo.figures.codesign import front_cells
from coevo.search.compose import ComposedProblem, Part
from coevo.search.deploy_lm.problem import CompressedLm, DeployLmOptions, DeployLmProblem, FpgaRun
from coevo.search.fpga.problem import TABLE, FpgaDesign, FpgaTransformerProblem
from coevo.search.metrics import FrontReference
from coevo.search.problem import Levels, Objective
from coevo.sim.attention.config import ATTENTION
from coevo.sim.fpga.config import FpgaConfig

NAME = "codesign-lm"
ARMS = ("joint", "sequential", "random")
BUDGETS = (40,)
SEEDS = (0, 1, 2)
SEARCHERS = {"joint": "pelnas", "random": "random"}
"""The arms that search the joint space directly, and their proposers."""
OPTIONS: dict[str, Any] = {"batch": 8, "draws": 1, "eval_batches": 1}
"""deploy-lm's options here: one batch of 8 pydoc sentences, perplexity on 64 validation windows (module doc)."""
PAIRS = {"latency": "latency_ms", "memory": "weight_mb"}
"""Scored pairs: neg_log_ppl against each of these (short name -> objective)."""
FLOOR_RATIO = 1.5
"""The useful region: perplexity at most this many times the zoo model's own."""
DEFAULT_FPGA = FpgaDesign(
    split=FpgaConfig.split,
    tile_m=FpgaConfig.tile_m,
    tile_n=FpgaConfig.tile_n,
    tile_k=FpgaConfig.tile_k,
    top_k=ATTENTION.top_k,
    key_bits=ATTENTION.key_bits,
    scheduler="length-aware",
)
"""The FPGA design the sequential flow's stage 1 fixes: the families' defaults (module doc)."""
FIXED_LEVELS: dict[str, Levels] = {f: Levels((getattr(DEFAULT_FPGA, f),), ordered=lv.ordered) for f, lv in TABLE.items()}
"""The fpga part's levels with one value each, :data:`DEFAULT_FPGA`'s."""
RUNS_CSV, DESIGNS_CSV = "codesign-lm.csv", "codesign-lm-designs.csv"
MD, PNG = "codesign-lm.md", "codesign-lm-fronts.png"
RUN_FIELDS = ("arm", "budget", "seed", "evaluations", "compressions", "kept", "hv_latency", "hv_memory", "wall_s", "floor")
DESIGN_FIELDS = ("arm", "budget", "seed", "stage", "prune", "bits", "fpga", "neg_log_ppl", "perplexity", "latency_ms", "weight_mb")


# ---------------------------------------------------------------- the sequential flow's two stage problems


class FixedFpgaPart(FpgaTransformerProblem):
    """The fpga part with one level per parameter, :data:`DEFAULT_FPGA`'s (stage 1 searches the compression alone)."""

    name = "fpga-transformer-fixed"
    levels = FIXED_LEVELS


class FixedFpgaDeployLm(DeployLmProblem):
    """deploy-lm with the FPGA design fixed at :data:`DEFAULT_FPGA`: the sequential flow's stage 1 (a compression search)."""

    name = "deploy-lm-fixed"

    def fpga_part(self) -> FpgaTransformerProblem:
        super().fpga_part()  # the same check of the board's PEs
        return FixedFpgaPart(**self.fpga_options())


class KeptOptions(DeployLmOptions):
    """Options of stage 2: deploy-lm's, and the kept compressions."""

    kept: str = Field(description="the kept compressions, each 'sparsities:widths' (numbers joined by commas), joined by ';'")


Compression = tuple[tuple[float, ...], tuple[int, ...]]
"""(the prune part's sparsities, the bits part's widths)."""


def encode_kept(compressions: Sequence[Compression]) -> str:
    """The ``kept`` option for ``compressions``."""
    return ";".join(",".join(f"{s:g}" for s in sp) + ":" + ",".join(map(str, w)) for sp, w in compressions)


def decode_kept(text: str) -> list[Compression]:
    """The compressions of a ``kept`` option (:func:`encode_kept`'s inverse)."""
    out = []
    for item in text.split(";"):
        sparsities, _, widths = item.partition(":")
        out.append((tuple(float(x) for x in sparsities.split(",")), tuple(int(x) for x in widths.split(","))))
    return out


class KeptCompressionPart(common.KeptPart):
    """A choice among a few compressions (sparsities and widths) of the LM; alone, its perplexity at :data:`DEFAULT_FPGA`'s attention."""

    name = "kept-lm-compressions"
    Options = KeptOptions
    level = "compression"
    objectives = (Objective("neg_log_ppl", "maximize", "-ln ppl", "expensive"),)

    @functools.cached_property
    def joint(self) -> DeployLmProblem:
        """deploy-lm, which gives a compression's perplexity and the model it hands the accelerator."""
        return DeployLmProblem(**self.options.model_dump(exclude={"kept"}))

    @functools.cached_property
    def kept(self) -> list[Compression]:
        """The kept compressions."""
        return decode_kept(self.options.kept)

    def choices(self) -> tuple[int, ...]:
        return tuple(range(len(self.kept)))

    def evaluate(self, point: Any) -> dict[str, float]:
        sparsities, widths = self.kept[point[0]]
        ppl = self.joint.compression_perplexity(sparsities, widths, DEFAULT_FPGA.top_k, DEFAULT_FPGA.key_bits)
        return {"neg_log_ppl": -math.log(ppl)}


class KeptCompressionsProblem(ComposedProblem):
    """The sequential flow's stage 2: the FPGA design searched with a choice among stage 1's front compressions."""

    name = "deploy-lm-kept"
    Options = KeptOptions
    objectives = DeployLmProblem.objectives
    niche_parts: ClassVar[tuple[str, ...] | None] = ("fpga",)
    design_label = "design"

    def parts(self) -> list[Part]:
        kept = KeptCompressionPart(self.options)
        fpga = kept.joint.fpga_part()
        return [
            Part("compression", kept, stage=lambda p, _: kept.joint.compression(*kept.kept[p[0]]), produces=CompressedLm),
            Part("fpga", fpga, stage=lambda p, lm: FpgaRun(**fpga.simulate(p, lm.shape)), consumes=CompressedLm, produces=FpgaRun),
        ]

    def values(self, point: tuple[Any, ...], outputs: Mapping[str, Any], *, cheap_only: bool) -> dict[str, float]:
        part = self.part("compression").problem
        assert isinstance(part, KeptCompressionPart)
        return part.joint.values(self.joint_point(point), {"bits": outputs["compression"], "fpga": outputs["fpga"]}, cheap_only=cheap_only)

    def joint_point(self, point: tuple[Any, ...]) -> tuple[Any, ...]:
        """The deploy-lm design ``point`` stands for."""
        part = self.part("compression").problem
        assert isinstance(part, KeptCompressionPart)
        sparsities, widths = part.kept[point[0][0]]
        return sparsities, widths, FpgaDesign(*point[1])


# ---------------------------------------------------------------- measuring


@functools.cache
def joint_problem() -> DeployLmProblem:
    """deploy-lm with the figure's :data:`OPTIONS` (one per process: its caches are shared by every arm)."""
    return DeployLmProblem(**OPTIONS)


def _design_row(arm: str, budget: int, seed: int, stage: int, joint: DeployLmProblem, point: tuple[Any, ...]) -> dict[str, Any]:
    sparsities, widths, fpga = point
    design = (tuple(sparsities), tuple(widths), FpgaDesign(*fpga))
    values = joint.evaluate(design)
    return {
        "arm": arm,
        "budget": budget,
        "seed": seed,
        "stage": stage,
        **{key: joint.part(key).problem.point_id(sub) for key, sub in zip(("prune", "bits", "fpga"), design, strict=True)},
        **{k: round(float(values[k]), 9) for k in ("neg_log_ppl", "perplexity", "latency_ms", "weight_mb")},
    }


def kept_compressions(points: Sequence[tuple[Any, ...]], rows: Sequence[Mapping[str, Any]]) -> list[Compression]:
    """The distinct compressions on the (max neg_log_ppl, min latency) front of ``rows``, first seen first."""
    keys = [(tuple(p[0]), tuple(p[1])) for p in points]
    distinct = list(dict.fromkeys(keys))
    index = [distinct.index(k) for k in keys]
    chosen = front_cells(index, [float(r["neg_log_ppl"]) for r in rows], [float(r["latency_ms"]) for r in rows])
    return [distinct[i] for i in chosen]


def run_arm(arm: str, budget: int, seed: int, runs: Path) -> tuple[list[dict[str, Any]], int, float]:
    """Every design arm ``arm`` evaluated at ``budget`` and ``seed`` (as design rows), the compressions it kept, its wall time."""
    joint = joint_problem()

    def kept(points: list[Any], rows: list[dict[str, Any]]) -> tuple[int, KeptCompressionsProblem]:
        compressions = kept_compressions(points, rows)
        return len(compressions), KeptCompressionsProblem(**OPTIONS, kept=encode_kept(compressions))

    flow = common.Flow(SEARCHERS, joint, lambda: FixedFpgaDeployLm(**OPTIONS), kept, _design_row, names="lm-{stage}-b{budget}-s{seed}")
    return common.run_flow(flow, arm, budget, seed, runs)


@functools.cache
def ppl_floor() -> float:
    """The floor of the useful region, as neg_log_ppl: perplexity :data:`FLOOR_RATIO` x the zoo model's own (same validation sample)."""
    joint = joint_problem()
    dense = (0.0,) * len(joint.part("prune").problem.distributions())
    own = joint.compression_perplexity(dense, (8,) * len(joint.part("bits").problem.distributions()), None)  # exact attention
    return -math.log(FLOOR_RATIO * own)


def pooled_reference(designs: Sequence[Mapping[str, Any]], second: str, floor: float) -> FrontReference:
    """The front of every design in ``designs`` on (neg_log_ppl, ``second``), from ``floor`` up."""
    first = np.array([float(d["neg_log_ppl"]) for d in designs])
    other = np.array([float(d[second]) for d in designs])
    return FrontReference.from_space(first, other, floor)


def run_rows(
    designs: Sequence[Mapping[str, Any]],
    kept: Mapping[tuple[str, int, int], int],
    wall: Mapping[tuple[str, int, int], float],
    floor: float,
) -> list[dict[str, Any]]:
    """One row per (arm, budget, seed): evaluations, distinct compressions paid, kept, HV ratios against the budget's pooled fronts."""
    refs = {
        (b, name): pooled_reference([d for d in designs if int(d["budget"]) == b], col, floor)
        for b in {int(d["budget"]) for d in designs}
        for name, col in PAIRS.items()
    }
    out = []
    for key, rows in common.run_groups(designs, ARMS):
        first = [float(r["neg_log_ppl"]) for r in rows]
        hv = {name: refs[(key[1], name)].hv_ratio(first, [float(r[col]) for r in rows]) for name, col in PAIRS.items()}
        scores = {f"hv_{name}": round(v, 6) for name, v in hv.items()}
        row = common.run_row(key, rows, ("compressions", len({(r["prune"], r["bits"]) for r in rows})), kept, wall, scores)
        out.append({**row, "floor": round(floor, 9)})
    return out


# ---------------------------------------------------------------- the page and the plot


def table(rows: Sequence[Mapping[str, Any]]) -> str:
    """Per budget and arm: seeds, HV ratios (median; mean ± 95 % t), evaluations, compressions paid, kept, wall time."""
    return common.hv_table(rows, ARMS, {"hv_latency": "-ln ppl, latency", "hv_memory": "-ln ppl, weight MB"})


_COLUMNS = {f"hv_{name}": col for name, col in PAIRS.items()}
"""Run-row HV column -> the objective it pairs with neg_log_ppl."""
COMPARISONS = (("joint", "sequential"), ("joint", "random"), ("sequential", "random"))


def findings(rows: Sequence[Mapping[str, Any]]) -> str:
    """Per budget, comparison and scored pair: the paired HV-ratio difference (mean ± 95 % t) and what it says."""
    return common.findings_text(rows, COMPARISONS, _COLUMNS, "-ln ppl")


def where_joint_does_not_pay(rows: Sequence[Mapping[str, Any]]) -> str:
    """Lines where joint search is not ahead of the sequential flow (paired HV ratio), per budget and scored pair."""
    return common.not_ahead_text(rows, _COLUMNS, "-ln ppl")


def plot(designs: Sequence[Mapping[str, Any]], budget: int, seed: int, floor: float, path: Path) -> bool:
    """Both arms' evaluated designs and fronts at ``budget``/``seed`` on (latency, -ln perplexity), with the pooled front."""
    at_budget = [d for d in designs if int(d["budget"]) == budget]
    chosen = [d for d in at_budget if int(d["seed"]) == seed]
    if not chosen:
        return False
    labels = {
        "front": "pooled front (all arms, seeds)",
        "x": "latency, ms per batch of 8 pydoc sentences (FPGA model, zcu102)",
        "y": "-ln validation perplexity (lm-pydoc-tiny)",
        "title": f"deploy-lm, {budget} evaluations, seed {seed}",
    }
    ref = pooled_reference(at_budget, "latency_ms", floor)
    common.plot_fronts(chosen, ref, "latency_ms", path, labels=labels, dots=(10, 0.35), first="neg_log_ppl")
    return True


def spread(designs: Sequence[Mapping[str, Any]]) -> str:
    """One line: how far latency and perplexity range over every evaluated design (how much each knob can move)."""
    if not designs:
        return "No designs were saved."
    lat = [float(d["latency_ms"]) for d in designs]
    ppl = [float(d["perplexity"]) for d in designs]
    return (
        f"Over all {len(designs)} evaluated designs (every arm, budget and seed): latency {min(lat):.2f}-{max(lat):.2f} ms, "
        f"perplexity {min(ppl):.3f}-{max(ppl):.3f}."
    )


def render(rows: Sequence[Mapping[str, Any]], floor: float, designs: Sequence[Mapping[str, Any]] = ()) -> str:
    """The page's body from the run rows (and, for the spread line, the designs)."""
    budgets = budgets_of(rows)
    seeds = sorted({int(r["seed"]) for r in rows})
    evals = sum(float(r["evaluations"]) for r in rows)
    return "\n".join(
        [
            "# Joint vs sequential co-design on deploy-lm (lm-pydoc-tiny on zcu102), at equal evaluations",
            "",
            f"Written by `python -m coevo.figures {NAME}` from `{RUNS_CSV}` (a row per arm, budget and seed) and `{DESIGNS_CSV}` "
            f"(every design each run evaluated); budgets {', '.join(map(str, budgets))}, seeds {', '.join(map(str, seeds))}. "
            "Issue 32, items 3 and 4. Perplexity is measured (the zoo LM pruned, weight-quantized round-to-nearest and run with "
            "top-k quantized-key attention, no retraining, on 64 validation windows of 128 bytes); latency and weight memory "
            "come from the FPGA accelerator model (`sim/fpga/`) and the stored weight bits, not hardware. Problem options: "
            f"{', '.join(f'{k}={v}' for k, v in OPTIONS.items())}, the rest deploy-lm's defaults.",
            "",
            "**Arms**, each at the same total of B evaluations of joint designs (sparsities, widths, FPGA design):",
            "",
            "* `joint`: pelnas on `deploy-lm`, budget B.",
            f"* `sequential`: stage 1, pelnas on the compression (sparsity and weight bits per block group) with the FPGA "
            f"design fixed at the families' defaults (`{FixedFpgaPart().point_id(DEFAULT_FPGA)}`), B/2 evaluations; stage 2, "
            "the compressions on stage 1's (-ln ppl, latency) front are kept and pelnas searches the FPGA design (split, "
            "tiles, top-k, key bits, scheduler) with a choice among them only, the other B/2.",
            "* `random`: Optuna's random sampler on the joint encoding, budget B.",
            "",
            "**Scoring.** The space has no known front, so at each budget every design of every arm and seed is pooled and the "
            f"pooled designs' front is the reference (floor -ln ppl = {floor:.4f}: perplexity {FLOOR_RATIO} x the zoo model's "
            "own on the same windows; the ceiling the pooled designs' largest latency or memory). A run's HV ratio is its "
            "evaluated designs' HV over the pooled front's, on (neg_log_ppl, latency_ms), deploy-lm's Pareto pair, and on "
            f"(neg_log_ppl, weight_mb). Differences are paired by seed, 95 % t intervals ({len(seeds)} seeds: "
            f"{len(seeds) - 1} degrees of freedom, wide intervals).",
            "",
            "## Results",
            "",
            table(rows),
            f"Wall time per joint design over all runs: {sum(float(r['wall_s']) for r in rows) / evals:.2f} s (the search engine "
            "with its cheap-objective screening on the FPGA model, and the perplexity evaluations, included).",
            "",
            spread(designs),
            "",
            "## Verdicts (computed from the CSV)",
            "",
            findings(rows),
            "## Where joint search does not pay (computed from the CSV)",
            "",
            where_joint_does_not_pay(rows),
            "## Limits of this comparison",
            "",
            f"* Small budgets ({', '.join(map(str, budgets))} evaluations) and {len(seeds)} seeds: the intervals are wide, and a "
            "verdict of 'no difference' means the seeds cannot resolve one, not that there is none.",
            "* The small LM (lm-pydoc-tiny, 2 blocks of width 64) and one batch of 8 sentences: the latency is that batch's "
            "makespan, a thin sample of the length distribution; the perplexity is on 64 validation windows.",
            "* In the FPGA model compressed weights only shorten memory-bound GEMM tiles (the int8 lanes keep their cycles), "
            "so the compression moves latency little and the accelerator (split, tiles, scheduler) moves it much; top-k and "
            "key bits are the one setting that moves both perplexity and latency.",
            "* The pooled front is the best any arm found, not the space's front: HV ratios are relative to it.",
            "",
            f"![fronts]({PNG})",
            "",
        ]
    )


# ---------------------------------------------------------------- the command


def parser() -> Any:
    """The figure's options."""
    return common.add_search_options(figure_parser(NAME, __doc__), budgets=BUDGETS, seeds=SEEDS, arms=ARMS, runs="runs/codesign-lm")


def main(argv: list[str] | None = None) -> None:
    """Measure (unless ``--report-only``), then write the CSVs, the page and the plot."""
    a, out = common.open_output(NAME, parser(), argv)
    if not a.report_only:
        floor = ppl_floor()
        budgets, seeds, arms = common.requested(a, ARMS)
        a.runs.mkdir(parents=True, exist_ok=True)
        designs, kept, wall = common.measure_runs(budgets, seeds, arms, lambda arm, b, s: run_arm(arm, b, s, a.runs))
        out.write_csv(DESIGNS_CSV, designs, DESIGN_FIELDS)
        out.write_csv(RUNS_CSV, run_rows(designs, kept, wall, floor), RUN_FIELDS)
    rows = read_numbers(out.path(RUNS_CSV))
    designs = read_numbers(out.path(DESIGNS_CSV))
    floor = float(rows[0]["floor"])  # saved with the runs: --report-only renders from the CSVs alone
    plot(designs, max(int(r["budget"]) for r in rows), a.plot_seed, floor, out.path(PNG))
    out.write_markdown(MD, render(rows, floor, designs))
    print(f"wrote {out.path(MD)}")
