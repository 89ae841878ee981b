"""What the co-design figures share (``codesign``: nb201-accel; ``codesign-cnn``: deploy-cnn; ``codesign-lm``: deploy-lm).

All run the same arms the same way (direct searches of the joint space; a sequential flow whose stage 1
searches on a fixed accelerator and whose stage 2 searches the accelerator among stage 1's front), keep a
row per (arm, budget, seed), compare arms by same-seed differences and plot the fronts of one seed. What
differs (problems, columns, scored pairs, labels) comes in as arguments.
"""

from __future__ import annotations

import argparse
import math
import statistics
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from coevo.figures._common import Output, comma_list, command_line, read_numbers
from coevo.search.compose import ComposedProblem, Part
from coevo.search.errors import UserInputError
from coevo.search.metrics import pareto_mask
from coevo.search.nb201_accel.accel import AccelPart, AccelResult
from coevo.search.problem import LevelProblem, Levels, Objective
from coevo.search.stats import format_interval, t_interval
from coevo.sim.accel.network import Workload

RunKey = tuple[str, int, int]
"""(arm, budget, seed): one run."""
Rows = Sequence[Mapping[str, Any]]
SEQUENTIAL = ("sequential", "sequential-acc")
"""The sequential arms, which joint search is compared against."""
PLOTTED = {"joint": "tab:blue", "sequential": "tab:orange", "sequential-acc": "tab:red"}
"""The arms whose fronts are plotted, and their colours."""


# ---------------------------------------------------------------- rows


def run_key(r: Mapping[str, Any]) -> RunKey:
    """The run (arm, budget, seed) a run or design row belongs to."""
    return str(r["arm"]), int(r["budget"]), int(r["seed"])


def budgets_of(rows: Rows) -> list[int]:
    """The budgets of ``rows``, in increasing order."""
    return sorted({int(r["budget"]) for r in rows})


def arm_groups(rows: Rows, arms: Sequence[str]) -> Iterator[tuple[int, str, list[Mapping[str, Any]]]]:
    """(budget, arm, its rows) per budget and arm (in ``arms`` order) that has rows."""
    for budget in budgets_of(rows):
        for arm in arms:
            rs = [r for r in rows if r["arm"] == arm and int(r["budget"]) == budget]
            if rs:
                yield budget, arm, rs


def run_groups(designs: Rows, arms: Sequence[str]) -> list[tuple[RunKey, list[Mapping[str, Any]]]]:
    """The design rows of each run, runs ordered by budget, arm (in ``arms`` order, unknown ones last) and seed."""
    groups: dict[RunKey, list[Mapping[str, Any]]] = {}
    for d in designs:
        groups.setdefault(run_key(d), []).append(d)
    order = sorted(groups, key=lambda k: (k[1], arms.index(k[0]) if k[0] in arms else 99, k[2]))
    return [(k, groups[k]) for k in order]


def run_row(
    key: RunKey,
    rows: Rows,
    distinct: tuple[str, int],
    kept: Mapping[RunKey, int],
    wall: Mapping[RunKey, float],
    scores: Mapping[str, float],
) -> dict[str, Any]:
    """A run row: its key, evaluations, ``distinct`` (column, count of distinct parts paid), kept, ``scores``, wall time."""
    return {
        "arm": key[0],
        "budget": key[1],
        "seed": key[2],
        "evaluations": len(rows),
        distinct[0]: distinct[1],
        "kept": kept.get(key, ""),
        **scores,
        "wall_s": round(wall.get(key, math.nan), 1),
    }


def arms_table(rows: Rows, arms: Sequence[str], header: str, cells: Callable[[int, str, list[Mapping[str, Any]]], str]) -> str:
    """A Markdown table with a line per budget and arm (:func:`arm_groups`): ``header`` (``| a | b |``), then ``cells`` of each."""
    columns = header.count("|") - 1
    lines = [header, "| " + " | ".join(["---"] * columns) + " |"]
    lines += [cells(budget, arm, rs) for budget, arm, rs in arm_groups(rows, arms)]
    return "\n".join(lines) + "\n"


def kept_text(rs: Rows) -> str:
    """The mean (± 95 % t) number of parts the runs ``rs`` kept, or ``-`` where none kept any (arms without stage 2)."""
    kept = [float(r["kept"]) for r in rs if r["kept"] not in ("", None)]
    return mean_text(kept, 1) if kept else "-"


def open_output(name: str, ap: argparse.ArgumentParser, argv: list[str] | None) -> tuple[argparse.Namespace, Output]:
    """Figure ``name``'s options parsed from ``argv`` by ``ap``, and its output folder (``--out``, created)."""
    a = ap.parse_args(argv)
    out = Output(Path(a.out), command_line(name, argv))
    out.folder.mkdir(parents=True, exist_ok=True)
    return a, out


def read_saved(out: Output, name: str) -> list[dict[str, Any]]:
    """The rows of CSV ``name`` in ``out``, or none when it was not written."""
    return read_numbers(out.path(name)) if out.path(name).exists() else []


# ---------------------------------------------------------------- numbers and comparisons


def mean_text(vals: Sequence[float], digits: int) -> str:
    """The mean of ``vals`` ± its 95 % t half-width (the mean alone where there is no half-width)."""
    mean, half = t_interval(vals)
    return f"{mean:.{digits}f}" if math.isnan(half) else f"{mean:.{digits}f} ± {half:.{digits}f}"


def median_text(vals: Sequence[float], digits: int) -> str:
    """The median of ``vals``."""
    return f"{statistics.median(vals):.{digits}f}"


def paired(rows: Rows, a: str, b: str, budget: int, field: str = "hv") -> list[float]:
    """Same-seed differences ``a - b`` of ``field`` at ``budget``, over the seeds both arms have, in seed order."""
    by: dict[str, dict[int, float]] = {a: {}, b: {}}
    for r in rows:
        if r["arm"] in by and int(r["budget"]) == budget:
            by[str(r["arm"])][int(r["seed"])] = float(r[field])
    return [by[a][s] - by[b][s] for s in sorted(set(by[a]) & set(by[b]))]


def verdict(diffs: Sequence[float], a: str, b: str) -> str:
    """What paired differences ``a - b`` (higher is better) say: ``a`` ahead, ``b`` ahead, or nothing the seeds resolve."""
    if len(diffs) < 2:
        return "too few seeds to say"
    mean, half = t_interval(diffs)
    if abs(mean) <= half:
        return "no difference the seeds can resolve"
    return f"{a} ahead" if mean > 0 else f"{b} ahead"


def comparisons(rows: Rows, pairs: Sequence[tuple[str, str]], fields: Sequence[str]) -> Iterator[tuple[int, str, str, str, list[float]]]:
    """(budget, a, b, field, same-seed differences ``a - b``) per budget, pair of arms and field that has any."""
    for budget in budgets_of(rows):
        for a, b in pairs:
            for field in fields:
                diffs = paired(rows, a, b, budget, field)
                if diffs:
                    yield budget, a, b, field, diffs


def joint_not_ahead(rows: Rows, fields: Sequence[str]) -> Iterator[tuple[int, str, str, list[float]]]:
    """(budget, sequential arm, field, differences joint - it) where at least two seeds do not put joint search ahead."""
    for budget, _, seq, field, diffs in comparisons(rows, [("joint", s) for s in SEQUENTIAL], fields):
        if len(diffs) >= 2 and verdict(diffs, "joint", seq) != "joint ahead":
            yield budget, seq, field, diffs


def hv_table(rows: Rows, arms: Sequence[str], hv: Mapping[str, str]) -> str:
    """Per budget and arm of a compression x hardware figure: seeds, each HV ratio (median; mean ± 95 % t), evaluations,
    compressions paid, kept, wall time. ``hv``: run-row HV field -> its label (``"accuracy, energy"``)."""

    def cells(budget: int, arm: str, rs: Sequence[Mapping[str, Any]]) -> str:
        scores = [[float(r[field]) for r in rs] for field in hv]
        return (
            f"| {budget} | {arm} | {len(rs)} | "
            + "".join(f"{median_text(v, 4)} | {mean_text(v, 4)} | " for v in scores)
            + f"{mean_text([float(r['evaluations']) for r in rs], 0)} | {mean_text([float(r['compressions']) for r in rs], 0)} | "
            f"{kept_text(rs)} | {median_text([float(r['wall_s']) for r in rs], 0)} |"
        )

    header = (
        "| budget B | arm | seeds | "
        + " | ".join(f"HV ({label}): median | mean ± 95 % t" for label in hv.values())
        + " | joint designs evaluated | distinct compressions paid | kept | wall s, median |"
    )
    return arms_table(rows, arms, header, cells)


def findings_text(rows: Rows, pairs: Sequence[tuple[str, str]], columns: Mapping[str, str], first: str) -> str:
    """Per budget, comparison and scored pair (``columns``: HV field -> the objective paired with ``first``): the paired
    HV-ratio difference (mean ± 95 % t) and what it says."""
    out = [
        f"- B = {budget}, ({first}, {columns[field]}), **{a}** vs **{b}**: HV-ratio difference {format_interval(diffs, 4)} "
        f"(paired, {len(diffs)} seeds: {', '.join(f'{d:+.4f}' for d in diffs)}): **{verdict(diffs, a, b)}**."
        for budget, a, b, field, diffs in comparisons(rows, pairs, list(columns))
    ]
    return "\n".join(out) + "\n"


def not_ahead_text(rows: Rows, columns: Mapping[str, str], first: str) -> str:
    """Lines where joint search is not ahead of the sequential flow (paired HV ratio), per budget and scored pair."""
    out = [
        f"- B = {budget}, ({first}, {columns[field]}): joint search is not ahead of **{seq}** "
        f"({verdict(diffs, 'joint', seq)}; HV-ratio difference {format_interval(diffs, 4)})."
        for budget, seq, field, diffs in joint_not_ahead(rows, list(columns))
    ]
    return (
        "\n".join(out) + "\n" if out else "- Joint search is ahead of the sequential flow on both scored pairs at every budget measured.\n"
    )


# ---------------------------------------------------------------- running the arms


def search_run(problem: Any, proposer: str, budget: int, seed: int, runs: Path, name: str) -> list[tuple[Any, dict[str, float]]]:
    """Run (or read back) one search; every paid evaluation, in order."""
    import optuna

    from coevo.search.runner import run_search
    from coevo.search.study import evaluations_from_study

    storage = f"sqlite:///{runs / (name + '.sqlite3')}"
    run_search(problem, proposer, budget=budget, seed=seed, storage=storage, study_name=name)
    study = optuna.load_study(study_name=name, storage=storage)
    return [(e.point, e.values) for e in evaluations_from_study(problem, study) if e.query]


def split_budget(budget: int) -> tuple[int, int]:
    """The sequential flow's (stage 1, stage 2) evaluations out of ``budget``: half each, stage 2 the odd one.

    Raises:
        UserInputError: ``budget`` below 4 (each stage needs two evaluations to make a front).
    """
    if budget < 4:
        raise UserInputError(f"--budgets: each budget must be at least 4 (two evaluations per sequential stage), got {budget}")
    return budget // 2, budget - budget // 2


def stages(arm: str, budget: int) -> tuple[int, int]:
    """(stage 1, stage 2) evaluations of a sequential arm at ``budget``.

    ``sequential``: equal joint-design evaluations, :func:`split_budget`. ``sequential-acc``: equal accuracy
    queries: stage 1 pays ``budget`` cells, and stage 2, which pays no accuracy (its cells' are known), gets
    ``budget`` accelerator evaluations more (so 2 x ``budget`` joint designs in all).
    """
    if arm == "sequential-acc":
        split_budget(budget)  # the same bound on the budget
        return budget, budget
    return split_budget(budget)


DesignRow = Callable[[str, int, int, int, Any, Any], dict[str, Any]]
"""(arm, budget, seed, stage, joint problem, joint design) -> the design's row."""


@dataclass(frozen=True)
class Flow:
    """How one figure runs its arms (:func:`run_flow`)."""

    searchers: Mapping[str, str]
    """The arms that search :attr:`joint` directly, and their proposers; any other arm is sequential."""
    joint: Any
    """The joint problem, whose designs every arm's rows describe."""
    fixed: Callable[[], Any]
    """Stage 1's problem: the joint one on the fixed accelerator."""
    kept: Callable[[list[Any], list[dict[str, Any]]], tuple[int, Any]]
    """From stage 1's points and rows: how many parts it keeps, and stage 2's problem (which has ``joint_point``)."""
    design_row: DesignRow
    """A design's row."""
    names: str
    """The study names: a format string with ``{stage}`` (the arm, or ``seq1``, ``seqacc2``...), ``{budget}`` and ``{seed}``."""


def run_flow(flow: Flow, arm: str, budget: int, seed: int, runs: Path) -> tuple[list[dict[str, Any]], int, float]:
    """Every design arm ``arm`` evaluated at ``budget`` and ``seed`` (as rows), how many parts its stage 2 kept, its wall time."""
    import optuna

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    started = time.perf_counter()

    def search(problem: Any, proposer: str, evaluations: int, stage: str) -> list[tuple[Any, dict[str, float]]]:
        return search_run(problem, proposer, evaluations, seed, runs, flow.names.format(stage=stage, budget=budget, seed=seed))

    def rows_of(stage: int, points: Sequence[Any]) -> list[dict[str, Any]]:
        return [flow.design_row(arm, budget, seed, stage, flow.joint, p) for p in points]

    if arm in flow.searchers:
        found = search(flow.joint, flow.searchers[arm], budget, arm)
        return rows_of(1, [p for p, _ in found]), 0, time.perf_counter() - started
    first, second = stages(arm, budget)
    short = "seq" if arm == "sequential" else "seqacc"
    points = [p for p, _ in search(flow.fixed(), "pelnas", first, f"{short}1")]
    rows = rows_of(1, points)
    n_kept, stage2 = flow.kept(points, rows)
    found = search(stage2, "pelnas", second, f"{short}2")
    rows += rows_of(2, [stage2.joint_point(p) for p, _ in found])
    return rows, n_kept, time.perf_counter() - started


class KeptPart(LevelProblem):
    """Stage 2's choice among the parts stage 1 kept: one unordered level; its one objective, accuracy, is known from stage 1.

    A subclass names the level (:attr:`level`), lists the choices from its options (:meth:`choices`) and writes
    ``evaluate`` (a choice's accuracy).
    """

    objectives = (Objective("accuracy", "maximize", "%", "expensive", bounds=(0.0, 100.0)),)
    level = "choice"
    """The level's name."""

    def __init__(self, options: Any = None, /, **values: Any) -> None:
        super().__init__(options, **values)
        self.levels = {self.level: Levels(self.choices(), ordered=False)}

    def choices(self) -> tuple[Any, ...]:
        """The level's values (from the options)."""
        raise NotImplementedError

    def cheap_values(self, points: Sequence[Any]) -> dict[str, np.ndarray]:
        return {}

    def workload(self, choice: Any) -> Workload:
        """The network workload of the part at level value ``choice``."""
        raise NotImplementedError


class KeptProblem(ComposedProblem):
    """The sequential flow's stage 2: the accelerator searched with a choice among the parts stage 1 kept.

    A subclass sets :attr:`Kept` (the kept part's class, whose level names its part, the niche part) and writes
    ``joint_point``.
    """

    Kept: type[KeptPart]
    """The kept part's class."""
    design_label = "design"

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if "Kept" in cls.__dict__:
            cls.niche_parts = (cls.Kept.level,)

    def parts(self) -> list[Part]:
        kept = self.Kept(self.options)
        accel = AccelPart(dram_gbps=self.options.dram_gbps)
        return [
            Part(kept.level, kept, stage=lambda p, _: kept.workload(p[0]), produces=Workload),
            Part("accel", accel, stage=accel.run, consumes=Workload, produces=AccelResult),
        ]


def measure_runs(
    budgets: Sequence[int],
    seeds: Sequence[int],
    arms: Sequence[str],
    run_arm: Callable[[str, int, int], tuple[list[dict[str, Any]], int, float]],
    note: Callable[[list[dict[str, Any]]], str] = lambda rows: "",
) -> tuple[list[dict[str, Any]], dict[RunKey, int], dict[RunKey, float]]:
    """Run every (budget, seed, arm) with ``run_arm``, printing a line each (``note`` adds to it).

    Returns: every design row, the kept parts of each sequential run, each run's wall time.
    """
    designs: list[dict[str, Any]] = []
    kept: dict[RunKey, int] = {}
    wall: dict[RunKey, float] = {}
    for budget in budgets:
        for seed in seeds:
            for arm in arms:
                rows, k, w = run_arm(arm, budget, seed)
                designs += rows
                if arm.startswith("sequential"):
                    kept[(arm, budget, seed)] = k
                wall[(arm, budget, seed)] = w
                print(f"B={budget} seed={seed} {arm}: {len(rows)} designs{note(rows)} ({w:.0f} s)", flush=True)
    return designs, kept, wall


# ---------------------------------------------------------------- the command


def add_search_options(
    ap: argparse.ArgumentParser,
    *,
    budgets: Sequence[int],
    seeds: Sequence[int],
    arms: Sequence[str],
    runs: str,
    datasets: Sequence[str] = (),
) -> argparse.ArgumentParser:
    """Add the figures' options to ``ap``: budgets, seeds, arms, ``--dataset`` (where ``datasets``), runs folder, plot seed."""
    ap.add_argument("--budgets", default=",".join(map(str, budgets)), help="total evaluations per arm, comma-separated (each >= 4)")
    ap.add_argument("--seeds", default=",".join(map(str, seeds)), help="seeds, comma-separated (seed s of every arm is a pair)")
    ap.add_argument("--arms", default=",".join(arms), help=f"arms to run, of {', '.join(arms)}")
    if datasets:
        ap.add_argument("--dataset", default=datasets[0], choices=tuple(datasets))
    ap.add_argument("--runs", type=Path, default=Path(runs), help="folder of the searches' SQLite files (resumable)")
    ap.add_argument("--plot-seed", type=int, default=0, help="the seed whose fronts are plotted (at the largest budget)")
    return ap


def requested(a: argparse.Namespace, arms: Sequence[str]) -> tuple[list[int], list[int], list[str]]:
    """The (budgets, seeds, arms) options :func:`add_search_options` parsed into ``a``, checked.

    Raises:
        UserInputError: a budget or seed that is not an integer, an arm not in ``arms``, a budget below 4.
    """
    budgets, seeds = comma_list(a.budgets, "--budgets", int), comma_list(a.seeds, "--seeds", int)
    chosen = [x.strip() for x in a.arms.split(",") if x.strip()]
    bad = [x for x in chosen if x not in arms]
    if bad:
        raise UserInputError(f"--arms: {', '.join(bad)} is not an arm; arms: {', '.join(arms)}")
    for b in budgets:
        split_budget(b)
    return budgets, seeds, chosen


# ---------------------------------------------------------------- the plot


def plot_fronts(
    chosen: Rows,
    ref: Any,
    second: str,
    path: Path,
    *,
    labels: Mapping[str, str],
    dots: tuple[float, float],
    log_x: bool = False,
    first: str = "accuracy",
) -> None:
    """Each :data:`PLOTTED` arm's designs of ``chosen`` and front on (``second``, ``first``), over ``ref``'s front.

    Args:
        ref: the reference front (``front_first``, ``front_second``, ``floor``).
        labels: ``front`` (the reference front's legend), ``x``, ``y`` and ``title``.
        dots: the designs' marker size and opacity.
        first: the maximised objective's column (deploy-lm's is ``neg_log_ppl``).
    """
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 4.5))
    order = np.argsort(ref.front_second)
    ax.step(ref.front_second[order], ref.front_first[order], where="post", color="0.6", lw=1, label=labels["front"])
    for arm, color in PLOTTED.items():
        ds = [d for d in chosen if d["arm"] == arm]
        if not ds:
            continue
        acc = np.array([float(d[first]) for d in ds])
        other = np.array([float(d[second]) for d in ds])
        ax.scatter(other, acc, s=dots[0], color=color, alpha=dots[1])
        mask = pareto_mask(acc, other) & (acc >= ref.floor)  # the front in the useful region, where HV is counted
        o = np.argsort(other[mask])
        ax.step(other[mask][o], acc[mask][o], where="post", color=color, lw=1.5, marker="o", ms=3, label=f"{arm} front")
    if log_x:
        ax.set_xscale("log")
    ax.set_ylim(bottom=ref.floor)
    ax.set_xlabel(labels["x"])
    ax.set_ylabel(labels["y"])
    ax.set_title(labels["title"])
    ax.legend(fontsize=8, loc="lower right")
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
