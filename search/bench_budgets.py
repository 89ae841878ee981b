"""``coevo bench --budgets 10,20,40,60``: HV against paid evaluations, per run group and proposer.

One run per (run group, proposer, seed), at the largest budget; the HV at each budget ``B`` is the
HV of the found set of its first ``B`` paid evaluations in trial order (failed evaluations count,
as they count against a budget; answers from the study's own records do not). These are the
"anytime" curves of a run of the largest budget:

* ``random``, ``nsga2``, ``tpe`` (Optuna samplers): one design at a time, nothing depends on
  the budget (TPE's 10 random start-up trials are a constant): a prefix is exactly what a
  shorter run pays;
* ``pelnas`` and its ablations, ``mobo``, ``qnehvi``: one schedule
  (:func:`search.proposers.round_quota`, :func:`~search.proposers.start_quota`) sizes the start
  (at most a third of the budget) and the rounds (the budget over at least 10 rounds, at most
  ``round_size``) by the run's budget, so a prefix is what a run of the largest budget has paid
  by then, which a shorter run with its own smaller rounds may not match; a round is paid niche
  by niche in turn (pelnas) or best first (mobo, qnehvi), so a prefix inside a round holds its
  best picks;
* the screened EAs: generations of their population, in order.

Budget 0 is the zero-information front: nothing paid, the front the free information predicts
(:func:`search.runner.summarize` with no evaluation), the same for every proposer; an empty found
set for a problem with no label-free prior.

``budgets.csv`` says, per row, whether the prefix ends inside a round (``cuts_round``).

Where a run's found set is not its paid evaluations (NB201 few-shot and zero-cost modes:
:attr:`~search.problem.Problem.found_set` ``front`` or ``predicted``), a prefix cannot be scored
without the run's own prediction stage, so there is one study per budget instead (named
``<default study name>-b<B>``, each resumable on its own).

HV: the HV ratio against the true front where the problem has one
(:meth:`~search.problem.Problem.reference`); otherwise the pooled HV ratio of
:func:`search.bench.pooled_scorer`, as ``coevo bench`` ranks such problems (HV over the HV of every
run of the run group pooled, all proposers and seeds; reference point at the problem's acquisition
bounds, or where it has none the pooled worst of :func:`search.bench.pooled_worst`).

Outputs in ``OUT``: ``budgets.csv`` (one row per run x budget), ``budgets.md`` (per run group:
HV per budget and proposer, mean ± 95 % t interval over seeds; each proposer minus the best
baseline at the same budget, paired over seeds; proposers at ``B`` against the best baseline at
``2B``), ``budgets_<group>.png`` (HV against paid evaluations) and ``runs.csv`` (the runs).
"""

from __future__ import annotations

import csv
import dataclasses
import math
import statistics
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import optuna
from optuna.trial import FrozenTrial, TrialState

from coevo.search.bench import (
    BenchReport,
    BenchSpec,
    _problem_options,
    _record_out_folder,
    _write_csv,
    claim_out_folder,
    group_of,
    pooled_scorer,
    pooled_worst,
    run_jobs,
)
from coevo.search.errors import UserInputError
from coevo.search.plots import plot_budget_curves
from coevo.search.problem import Problem
from coevo.search.problems import make_problem
from coevo.search.proposers import get_proposer, takes_reasoner
from coevo.search.runner import SearchResult, study_name_of, summarize
from coevo.search.stats import excludes_zero, format_interval, t_interval
from coevo.search.storage import open_storage
from coevo.search.study import evaluations_from_study, failed_evaluation
from coevo.sim.paths import make_out_folder

BUDGET_FIELDS = ("group", "proposer", "seed", "budget", "paid", "hv", "hv_kind", "front_recall", "cuts_round", "study")
"""Columns of ``budgets.csv`` (after ``problem``); ``hv_kind``: see :func:`budget_rows`."""


@dataclass(frozen=True)
class BudgetRow:
    """One run scored at one budget.

    Attributes:
        group: the run group.
        proposer: the proposer.
        seed: the run's seed.
        budget: the budget it is scored at.
        paid: evaluations of the budget in the scored prefix (fewer than ``budget`` when the run stopped short): paid ones,
            or in zero-cost mode evaluations on the proxies' estimate (nothing paid).
        hv: HV ratio (``hv_kind`` ``ratio``) or pooled HV ratio (``pooled``); None when neither exists.
        hv_kind: ``ratio``, ``pooled``, ``pooled-worst`` or ``none`` (:func:`budget_rows`).
        front_recall: share of the true front found, where the problem has one.
        cuts_round: the prefix ends inside one of the proposer's rounds (see the module's docstring).
        study: the study scored.
    """

    group: str
    proposer: str
    seed: int
    budget: int
    paid: int
    hv: float | None
    hv_kind: str
    front_recall: float | None
    cuts_round: bool
    study: str


@dataclass(frozen=True)
class _Scored:
    """A run (or prefix) scored by :func:`search.runner.summarize`, before the pooled HV is known."""

    group: str
    budget: int
    paid: int
    cuts_round: bool
    result: SearchResult


def run_budget_bench(
    spec: BenchSpec,
    out: Path,
    *,
    on_result: Callable[[SearchResult], None] | None = None,
    on_plan: Callable[[int], None] | None = None,
) -> BenchReport:
    """Run ``spec`` (its ``budgets`` given) and write the budget curves into ``out`` (see the module's docstring).

    ``on_plan`` is told the number of runs before the first (one per budget where prefixes cannot be scored);
    ``on_result`` is called after every run. Runs already finished in the storage are reused, not repeated.
    """
    spec.validate()
    spec = dataclasses.replace(spec, budget=spec.budgets[-1])
    claim_out_folder(spec, out)
    make_out_folder(out, "benchmark outputs")
    storage = spec.storage or f"sqlite:///{out / 'bench.sqlite3'}"
    open_storage(storage)  # create the schema once, before parallel runs race to do it
    problems = {g: make_problem(spec.problem, _problem_options(spec, g), storage=storage) for g in spec.run_groups()}
    engine = {k: v for k, v in (spec.engine_options or {}).items() if v is not None}
    prefixes = all(p.found_set == "all" for p in problems.values())
    jobs, budget_of = [], {}
    for g in spec.run_groups():
        for p in spec.proposers:
            options = engine if takes_reasoner(p) else None
            for s in spec.seeds:
                for b in [spec.budget] if prefixes else spec.budgets:
                    name = None if prefixes else f"{_study_name(problems[g], p, s, options)}-b{b}"
                    budget_of[(g, p, s, name)] = b
                    jobs.append((spec.problem, _problem_options(spec, g), p, b, s, storage, spec.reasoner, options, name))
    if on_plan is not None:
        on_plan(len(jobs))
    results = run_jobs(jobs, spec.jobs, on_result)

    def key(r: SearchResult) -> tuple[str, str, int, str | None]:
        # a study keeps the largest budget it was ever given (an earlier, longer bench): its name says which run it is
        return group_of(spec, r.problem), r.proposer, r.seed, None if prefixes else r.study

    order = {k: n for n, k in enumerate(budget_of)}
    results.sort(key=lambda r: order[key(r)])
    scored = []
    for r in results:
        group = group_of(spec, r.problem)
        if prefixes:
            scored += score_prefixes(problems[group], r, spec.budgets, storage, group=group)
        else:
            budget = budget_of[key(r)]
            scored.append(_Scored(group, budget, r.budget_used, False, r))  # zero-cost runs pay for none: count what the budget did
    rows = budget_rows(problems, scored, storage)
    report = BenchReport(results=results)
    report.files.append(write_budget_csv(rows, spec.problem, out / "budgets.csv"))
    report.files.append(_write_csv(results, out / "runs.csv"))
    report.markdown = budget_markdown(rows, spec, prefixes=prefixes)
    (out / "budgets.md").write_text(report.markdown)
    report.files.append(out / "budgets.md")
    for g in spec.run_groups():
        report.files.append(_plot_group(rows, spec, g, problems[g], out))
    report.files.append(_record_out_folder(spec, out))
    return report


def _study_name(problem: Problem, proposer: str, seed: int, options: Mapping[str, Any] | None) -> str:
    """The default study name of a run (with the proposer's variant: a ``kb_from`` run is another study)."""
    return study_name_of(problem, get_proposer(proposer, options), seed)


def paid_trials(study: optuna.Study) -> list[FrozenTrial]:
    """The trials of ``study`` that paid for an evaluation, in trial order (as :func:`search.study.paid_count` counts them)."""
    trials = study.get_trials(deepcopy=False, states=(TrialState.COMPLETE, TrialState.FAIL))
    paid = [t for t in trials if (bool(t.user_attrs.get("query", True)) if t.state == TrialState.COMPLETE else failed_evaluation(t))]
    return sorted(paid, key=lambda t: t.number)


def score_prefixes(problem: Problem, result: SearchResult, budgets: Sequence[int], storage: str, *, group: str = "-") -> list[_Scored]:
    """``result``'s study (of run group ``group``) scored at each budget, on the found set of its first ``budget`` paid evaluations."""
    study = optuna.load_study(study_name=result.study, storage=open_storage(storage))
    evaluations = evaluations_from_study(problem, study)
    paid = paid_trials(study)
    n_trials = len(study.get_trials(deepcopy=False))
    scored = []
    for budget in budgets:
        taken = paid[:budget]
        last = taken[-1].number if taken else -1
        prefix = [e for e in evaluations if e.trial_number <= last]
        summary = summarize(
            problem,
            study,
            proposer=result.proposer,
            seed=result.seed,
            budget=budget,
            storage=storage,
            wall_s=0.0,
            evaluations=prefix,
            trials=n_trials,
        )
        scored.append(_Scored(group, budget, len(taken), _cuts_round(taken, paid[budget:]), summary))
    return scored


def _cuts_round(taken: Sequence[FrozenTrial], rest: Sequence[FrozenTrial]) -> bool:
    """Whether the last paid trial of a prefix belongs to a proposer's round that goes on after it."""
    if not taken or not rest:
        return False
    last = taken[-1].user_attrs.get("round")
    return last is not None and rest[0].user_attrs.get("round") == last


def budget_rows(problems: Mapping[str, Problem], scored: Sequence[_Scored], storage: str) -> list[BudgetRow]:
    """:class:`BudgetRow` per scored prefix: the HV ratio, or the pooled HV ratio over every run of its group.

    ``hv_kind``: ``ratio`` (true front), ``pooled`` (reference point at the acquisition bounds),
    ``pooled-worst`` (no bounds: the pooled worst of :func:`search.bench.pooled_worst`), ``none``.
    """
    rows = []
    for group, problem in problems.items():
        mine = [s for s in scored if s.group == group]
        exact = problem.reference() is not None
        bounded = problem.acquisition_bounds() is not None
        worst = None if exact or bounded else pooled_worst(problem, list(dict.fromkeys(s.result.study for s in mine)), storage)
        # the pool: every run's found front (a prefix's front is dominated by its run's, so the longest runs suffice)
        score = None if exact else pooled_scorer(problem, [s.result.front for s in mine], worst)
        kind = "ratio" if exact else "none" if score is None else "pooled" if bounded else "pooled-worst"
        for s in mine:
            r = s.result
            hv = r.hv_ratio if exact else (score(r.front) if score is not None else None)
            rows.append(BudgetRow(group, r.proposer, r.seed, s.budget, s.paid, hv, kind, r.front_recall, s.cuts_round, r.study))
    return rows


def write_budget_csv(rows: Sequence[BudgetRow], problem: str, path: Path) -> Path:
    """``budgets.csv``: one line per :class:`BudgetRow`, after a ``problem`` column."""
    with path.open("w", newline="") as fh:
        writer = csv.DictWriter(fh, fieldnames=["problem", *BUDGET_FIELDS])
        writer.writeheader()
        for row in rows:
            writer.writerow({"problem": problem, **{k: _cell(v) for k, v in dataclasses.asdict(row).items()}})
    return path


def _cell(value: Any) -> Any:
    return "" if value is None else value


def read_budget_csv(path: Path) -> list[BudgetRow]:
    """The rows :func:`write_budget_csv` wrote."""

    def num(text: str) -> float | None:
        return float(text) if text else None

    with path.open(newline="") as fh:
        return [
            BudgetRow(
                r["group"],
                r["proposer"],
                int(r["seed"]),
                int(r["budget"]),
                int(r["paid"]),
                num(r["hv"]),
                r["hv_kind"],
                num(r["front_recall"]),
                r["cuts_round"] == "True",
                r["study"],
            )
            for r in csv.DictReader(fh)
        ]


def hv_table(rows: Sequence[BudgetRow]) -> dict[tuple[str, int, int], float]:
    """``{(proposer, budget, seed): hv}`` of the rows that have an HV."""
    return {(r.proposer, r.budget, r.seed): r.hv for r in rows if r.hv is not None}


def best_baseline(rows: Sequence[BudgetRow], budget: int, baselines: Sequence[str]) -> str | None:
    """The baseline with the highest mean HV over seeds at ``budget`` (None when no baseline has one)."""
    means = {
        p: statistics.fmean(v)
        for p in baselines
        if (v := [r.hv for r in rows if r.proposer == p and r.budget == budget and r.hv is not None])
    }
    return max(means, key=lambda p: means[p]) if means else None


def paired(rows: Sequence[BudgetRow], a: tuple[str, int], b: tuple[str, int]) -> list[float]:
    """HV of proposer ``a[0]`` at budget ``a[1]`` minus ``b[0]``'s at ``b[1]``, one difference per seed both have."""
    table = hv_table(rows)
    seeds = sorted({r.seed for r in rows})
    return [table[(*a, s)] - table[(*b, s)] for s in seeds if (*a, s) in table and (*b, s) in table]


def _interval(values: Sequence[float]) -> str:
    """``mean ± half-width`` (95 % t) without a sign, for HV levels; ``n/a`` for none."""
    if not values:
        return "n/a"
    mean, half = t_interval(values)
    return f"{mean:.4f}" if math.isnan(half) else f"{mean:.4f} ± {half:.4f}"


def _diff(values: Sequence[float]) -> str:
    return format_interval(values) + (" *" if excludes_zero(values) else "")


def baselines_of(proposers: Sequence[str]) -> list[str]:
    """The proposers that are baselines (not driven by a reasoner: not the co-evolution engine)."""
    return [p for p in proposers if not takes_reasoner(p)]


def budget_markdown(rows: Sequence[BudgetRow], spec: BenchSpec, *, prefixes: bool = True) -> str:
    """``budgets.md``: per run group, HV per budget and proposer, paired differences against the best baseline."""
    kinds = {r.hv_kind for r in rows}
    how = (
        "One run per (run group, proposer, seed) at the largest budget; the HV at each budget is that of the found set of "
        "the run's first B paid evaluations in trial order (anytime curves of a run of the largest budget: the model-based "
        "proposers size their start and rounds by that budget; budget 0 is the zero-information front; `cuts_round` in "
        "budgets.csv marks prefixes that end inside a round, see search/bench_budgets.py)."
        if prefixes
        else "The found set of these runs is not their paid evaluations (it is scored after a prediction stage), so each "
        "budget is its own run (study `<name>-b<B>`)."
    )
    hv_note = {
        "ratio": "HV ratio against the problem's true front.",
        "pooled": "HV: a found front's HV over the HV of the fronts of every run of its run group pooled (all proposers and "
        "seeds: the best known front, as the problem has no true one; reference point at the problem's acquisition bounds): "
        "it ranks the proposers of this bench only.",
        "pooled-worst": "HV: a found front's HV over the HV of the fronts of every run of its run group pooled (all proposers "
        "and seeds: the best known front, as the problem has no true one); the problem has no acquisition bounds, so the "
        "reference point is the pooled worst: the lowest first and highest second objective over every paid evaluation of "
        "the group. It ranks the proposers of this bench only.",
        "none": "no HV: the problem has no true front, and no pooled front with a hypervolume to rank the runs against.",
    }
    lines = [
        f"# coevo bench --budgets: {spec.problem}, budgets {list(spec.budgets)}, seeds {list(spec.seeds)}",
        "",
        how + " " + " ".join(hv_note[k] for k in sorted(kinds)) + " Mean ± half-width of the Student t 95 % interval over seeds; "
        "paired differences are over the seeds both runs have, * marks an interval that excludes 0.",
    ]
    key = spec.group_option or "group"
    for group in spec.run_groups():
        mine = [r for r in rows if r.group == group]
        lines += ["", f"## {key} {group}" if spec.group_option else "## results", ""]
        lines += _level_table(mine, spec)
        lines += _paired_table(mine, spec)
        lines += _half_table(mine, spec)
    return "\n".join(lines) + "\n"


def rerender_budget_page(folder: Path) -> Path:
    """Write ``folder/budgets.md`` again from ``folder/budgets.csv`` alone (what the bench's proposers, seeds and budgets were
    is read from the rows); returns the page. For a page written before its renderer changed: no run is needed."""
    path = folder / "budgets.csv"
    rows = read_budget_csv(path)
    if not rows:
        raise UserInputError(f"{path} has no rows: rerun the bench that wrote it")
    with path.open(newline="") as fh:
        problem = next(csv.DictReader(fh))["problem"]
    spec = BenchSpec(
        problem=problem,
        options={},
        groups=tuple(dict.fromkeys(r.group for r in rows)),
        proposers=tuple(dict.fromkeys(r.proposer for r in rows)),
        seeds=tuple(sorted({r.seed for r in rows})),
        budget=max(r.budget for r in rows),
        budgets=tuple(sorted({r.budget for r in rows})),
    )
    page = folder / "budgets.md"
    own_runs = all(r.study.endswith(f"-b{r.budget}") for r in rows)  # each budget its own run (a study per budget)
    page.write_text(budget_markdown(rows, spec, prefixes=not own_runs))
    return page


def _level_table(rows: Sequence[BudgetRow], spec: BenchSpec) -> list[str]:
    lines = ["| budget | " + " | ".join(spec.proposers) + " |", "|---|" + "---|" * len(spec.proposers)]
    for b in spec.budgets:
        cells = [_interval([r.hv for r in rows if r.proposer == p and r.budget == b and r.hv is not None]) for p in spec.proposers]
        short = sorted({r.paid for r in rows if r.budget == b and r.paid < b})
        lines.append(f"| {b}{f' (paid {short[0]}..)' if short else ''} | " + " | ".join(cells) + " |")
    return lines


def _paired_table(rows: Sequence[BudgetRow], spec: BenchSpec) -> list[str]:
    baselines = baselines_of(spec.proposers)
    if not baselines or len(spec.proposers) < 2:
        return []
    lines = [
        "",
        "Each proposer minus the best baseline at the same budget (the baseline of the highest mean HV there, "
        f"of {', '.join(baselines)}: chosen on these runs, which favours it), paired over seeds:",
        "",
        "| budget | best baseline | " + " | ".join(spec.proposers) + " |",
        "|---|---|" + "---|" * len(spec.proposers),
    ]
    for b in spec.budgets:
        best = best_baseline(rows, b, baselines)
        if best is None:
            continue
        cells = ["-" if p == best else _diff(paired(rows, (p, b), (best, b))) for p in spec.proposers]
        lines.append(f"| {b} | {best} | " + " | ".join(cells) + " |")
    return lines


def _half_table(rows: Sequence[BudgetRow], spec: BenchSpec) -> list[str]:
    """Each proposer that is not a baseline at budget B against the best baseline at 2B, where both budgets are listed."""
    baselines = baselines_of(spec.proposers)
    engines = [p for p in spec.proposers if p not in baselines]
    pairs = [(b, 2 * b) for b in spec.budgets if 2 * b in spec.budgets]
    if not baselines or not engines or not pairs:
        return []
    lines = [
        "",
        "Half the evaluations: each co-evolution proposer at budget B minus the best baseline at 2B, paired over seeds "
        "(it reaches the baseline's HV when the 95 % interval of the difference lies at or above 0, misses it when the "
        "interval lies below 0, and the seeds cannot tell when it holds 0):",
        "",
        "| proposer at B | best baseline at 2B | HV at B | HV at 2B | difference | reaches it |",
        "|---|---|---|---|---|---|",
    ]
    for p in engines:
        for b, b2 in pairs:
            best = best_baseline(rows, b2, baselines)
            if best is None:
                continue
            diffs = paired(rows, (p, b), (best, b2))
            mine = [r.hv for r in rows if r.proposer == p and r.budget == b and r.hv is not None]
            theirs = [r.hv for r in rows if r.proposer == best and r.budget == b2 and r.hv is not None]
            verdict = reaches(diffs, theirs)
            lines.append(f"| {p} at {b} | {best} at {b2} | {_interval(mine)} | {_interval(theirs)} | {_diff(diffs)} | {verdict} |")
    return lines


def reaches(diffs: Sequence[float], baseline: Sequence[float]) -> str:
    """Whether the paired differences say the proposer at B reaches the baseline's HV at 2B, judged on their 95 % interval.

    ``yes`` when the interval lies at or above 0, ``no, by X (Y % of the baseline's mean HV)`` when
    it lies below 0, ``undecided`` when it holds 0 or there is one pair only (no interval), ``n/a``
    without pairs. A mean above 0 with an interval over 0 is not a yes: the seeds cannot tell.
    """
    if not diffs:
        return "n/a"
    mean, half = t_interval(diffs)
    if math.isnan(half):
        return "undecided (one seed: no interval)"
    if mean - half >= 0:
        return "yes"
    if mean + half < 0:
        share = f" ({-mean / statistics.fmean(baseline):.1%} of the baseline's mean)" if baseline and statistics.fmean(baseline) > 0 else ""
        return f"no, by {-mean:.4f}{share}"
    return "undecided (the interval holds 0)"


def _plot_group(rows: Sequence[BudgetRow], spec: BenchSpec, group: str, problem: Problem, out: Path) -> Path:
    mine = [r for r in rows if r.group == group]
    curves = {
        p: {b: [r.hv for r in mine if r.proposer == p and r.budget == b and r.hv is not None] for b in spec.budgets} for p in spec.proposers
    }
    kind = next((r.hv_kind for r in mine), "ratio")
    ylabel = "HV ratio (true front)" if kind == "ratio" else "HV / pooled best HV"
    title = f"{spec.problem}{'' if group == '-' else f' {group}'}: HV at each budget (mean, 95 % t band, {len(spec.seeds)} seeds)"
    paid = ", ".join(problem.expensive) + " evaluations"
    return plot_budget_curves(curves, title, out / f"budgets_{Path(group).stem}.png", paid=paid, ylabel=ylabel)
