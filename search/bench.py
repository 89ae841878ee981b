"""``coevo bench``: proposers x run groups x seeds on one problem, with tables and plots.

A run group is a value of the problem's ``run_group`` option (NB201: the device; pipeline:
the cluster; noc: the traffic; compress: the model).

Every run is an ordinary study in one storage (default: ``OUT/bench.sqlite3``), so an
interrupted bench resumes run by run. Outputs in ``OUT``:

* ``runs.csv``: one row of metrics per run;
* ``results.md``: mean ± std of HV ratio, IGD and front recall per run group and proposer;
* ``histories.json``: HV ratio after every evaluation, per run;
* ``hv_<group>.png`` and ``front_<group>.png``: HV curves and found fronts (seed 0).

HV-against-paid-evaluations curves at several budgets (``coevo bench --budgets 10,20,40,60``,
:attr:`BenchSpec.budgets`) are :mod:`search.bench_budgets`, built on this module.
"""

from __future__ import annotations

import csv
import itertools
import json
import os
import statistics
import urllib.parse
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ProcessPoolExecutor, as_completed
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import optuna

from coevo.search.config import SearchConfig
from coevo.search.errors import UserInputError
from coevo.search.metrics import hypervolume
from coevo.search.plots import plot_exploration, plot_fronts, plot_hv_curves
from coevo.search.problem import Problem
from coevo.search.problems import make_problem, problem_class
from coevo.search.proposers import get_proposer, takes_reasoner
from coevo.search.runner import BANDS, SearchResult
from coevo.search.stats import excludes_zero, format_interval
from coevo.search.storage import open_storage, shown_url
from coevo.search.study import evaluations_from_study
from coevo.sim.paths import make_out_folder

RUN_FIELDS = ("study", "proposer", "seed", "budget", "evaluations", "trials", "hv_ratio", "igd", "front_recall", "wall_s", "search_wall_s")
"""Columns of ``runs.csv`` after the problem's options (one column per option, so each row says what it ran; an
option named like one of these is written as ``option_<name>``)."""


@dataclass(frozen=True)
class BenchSpec:
    """What to run.

    Attributes:
        problem: problem name or reference (e.g. ``nb201``).
        options: problem options shared by all runs (e.g. ``{"dataset": "cifar10"}``).
        groups: one run group per value of the problem's :attr:`~search.problem.Problem.run_group`
            option (NB201: devices; pipeline: clusters); ``()`` for the option's value in ``options``
            (or its default).
        proposers: proposer names.
        seeds: seeds to run for every (group, proposer).
        budget: expensive evaluations per run.
        storage: storage URL; None for ``OUT/bench.sqlite3``.
        jobs: runs in parallel (processes).
        reasoner: settings of the reasoner of the proposers that take one (the co-evolution
            engine; :func:`agent.reasoners.reasoner_from_config`); None: their default (offline).
        engine_options: options of the proposers that take a reasoner (e.g. ``screen``,
            ``round_size``); None values are left at the proposer's default.
        budgets: paid-evaluation budgets to score every run at, increasing (``coevo bench --budgets``,
            :mod:`search.bench_budgets`); ``()`` for the one ``budget``. When given, ``budget`` is
            not used: runs go to the largest of them.
    """

    problem: str
    options: dict[str, Any]
    groups: tuple[str, ...]
    proposers: tuple[str, ...]
    seeds: tuple[int, ...]
    budget: int
    storage: str | None = None
    jobs: int = 1
    reasoner: dict[str, Any] | None = None
    engine_options: dict[str, Any] | None = None
    budgets: tuple[int, ...] = ()

    @property
    def group_option(self) -> str | None:
        """The option the run groups vary (the problem's ``run_group``), or None."""
        return problem_class(self.problem).run_group

    def run_groups(self) -> tuple[str, ...]:
        """The groups to run: as given, else the one of the options (or the option's default)."""
        if self.groups:
            return self.groups
        key = self.group_option
        if key is None:
            return ("-",)
        cls = problem_class(self.problem)
        return (str(self.options.get(key, cls.Options.model_fields[key].get_default())),)

    def validate(self) -> None:
        """Fail fast, before any run, on a bad name or number."""
        if self.budgets:
            check_budgets(self.budgets)
        elif self.budget <= 0:
            raise UserInputError(
                f"--budget must be a positive number of evaluations, got {self.budget} (a bench compares proposers on paid "
                "evaluations; `coevo search --budget 0` gives one proposer's predicted front)"
            )
        if not self.seeds:
            raise UserInputError("--seeds must be at least 1")
        if self.jobs < 1:
            raise UserInputError(f"--jobs must be at least 1, got {self.jobs}")
        if not self.proposers:
            raise UserInputError("give at least one proposer")
        if self.groups and self.group_option is None:
            raise UserInputError(f"problem {self.problem!r} has no run-group option: leave --groups out")
        cls = problem_class(self.problem)
        for group in self.run_groups():
            cls.validate_options(_problem_options(self, group))  # options only: building may be costly (profiles, tables)
        for name in self.proposers:
            get_proposer(name)


def parse_budgets(text: str) -> tuple[int, ...]:
    """``--budgets 0,10,20,40,60`` as a tuple of budgets; :class:`UserInputError` unless whole numbers from 0, increasing.

    Budget 0 scores the zero-information front (nothing paid: the front the free information predicts,
    where the problem has a label-free prior; an empty found set elsewhere).
    """
    parts = [x.strip() for x in text.split(",")]
    bad = next((x for x in parts if not x.lstrip("+-").isdigit()), None)
    if bad is not None:
        what = "an empty item" if not bad else f"{bad!r} is not a whole number"
        raise UserInputError(f"--budgets takes increasing evaluation counts from 0, such as 0,10,20,40,60; got {text!r} ({what})")
    return check_budgets(tuple(int(x) for x in parts))


def check_budgets(budgets: Sequence[int]) -> tuple[int, ...]:
    """``budgets`` as a tuple when none is negative, the last is positive and each is larger than the one before."""
    shown = ",".join(str(b) for b in budgets)
    if not budgets or min(budgets) < 0 or budgets[-1] <= 0:
        raise UserInputError(
            f"--budgets takes evaluation counts from 0 (0: nothing paid), the largest one positive, such as 0,10,20,40,60; "
            f"got {shown or 'none'}"
        )
    if any(b <= a for a, b in itertools.pairwise(budgets)):
        raise UserInputError(f"--budgets must increase (each larger than the one before), such as 0,10,20,40,60; got {shown}")
    return tuple(budgets)


@dataclass
class BenchReport:
    """All run results plus the paths written."""

    results: list[SearchResult]
    files: list[Path] = field(default_factory=list)
    markdown: str = ""


def _one_run(
    problem: str,
    options: dict[str, Any],
    proposer: str,
    budget: int,
    seed: int,
    storage: str,
    reasoner: dict[str, Any] | None,
    proposer_options: dict[str, Any] | None = None,
    study_name: str | None = None,
    *,
    threads: int | None = None,
) -> SearchResult:
    """One search in a worker process (everything it gets is picklable; the reasoner is built here)."""
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    takes = takes_reasoner(proposer)
    config = SearchConfig.create(
        problem=problem,
        options=options,
        proposer=proposer,
        budget=budget,
        seed=seed,
        storage=storage,
        study=study_name,
        reasoner=reasoner if takes else None,  # settings: the proposer builds its reasoner here, in the run's process
        proposer_options=proposer_options,
    )
    made = config.make_problem()
    if threads is not None:
        # the problem or the proposer runs torch (zero-cost proxies, QAT, meta profiles, qnehvi's GP, which
        # imports it only later): share the cores between parallel runs; oversubscribed OpenMP threads
        # slowed proxy cells from ~1.5 s to 15-23 s and compress QAT runs about 5x here
        import torch

        torch.set_num_threads(threads)
    return config.run(problem=made)


def run_jobs(jobs: Sequence[tuple[Any, ...]], n_jobs: int, on_result: Callable[[SearchResult], None] | None = None) -> list[SearchResult]:
    """Run :func:`_one_run` argument tuples, ``n_jobs`` processes at a time (in this process for 1).

    Stops at the first failure (or Ctrl-C) instead of finishing every queued run; finished
    runs stay in storage and a rerun resumes the rest. Results come in completion order.
    """
    results: list[SearchResult] = []
    if n_jobs == 1:
        for job in jobs:
            results.append(_one_run(*job))
            if on_result:
                on_result(results[-1])
        return results
    threads = max(1, (os.cpu_count() or 1) // n_jobs)
    with ProcessPoolExecutor(max_workers=n_jobs) as pool:
        futures = [pool.submit(_one_run, *job, threads=threads) for job in jobs]
        try:
            for fut in as_completed(futures):
                results.append(fut.result())
                if on_result:
                    on_result(results[-1])
        except BaseException:
            pool.shutdown(wait=False, cancel_futures=True)
            raise
    return results


BENCH_RECORD = "bench.json"
"""What the benchmark whose files an output folder holds ran (:func:`claim_out_folder`): no secret, no result."""


def _without_secrets(url: str) -> str:
    """``url`` without user, password or query (an endpoint URL may carry a token in either)."""
    parts = urllib.parse.urlsplit(url)
    host = parts.hostname or ""
    return urllib.parse.urlunsplit((parts.scheme, host + (f":{parts.port}" if parts.port else ""), parts.path, "", ""))


def _options(spec: BenchSpec) -> dict[str, Any]:
    """The problem's options with its defaults filled in (``--dataset cifar10``, the default, names the same runs as none),
    the run group's option left out (the runs name it)."""
    try:
        options = problem_class(spec.problem).Options.model_validate(spec.options).model_dump(mode="json")
    except Exception:  # an option the model refuses is the run's to report; the options as given still identify it
        options = dict(spec.options)
    options.pop(spec.group_option or "", None)
    return options


def _identity(spec: BenchSpec) -> dict[str, Any]:
    """The settings that decide a benchmark's files, as JSON reads them back, with no secret: the reasoner without its
    key (and, offline, without the endpoint it did not use), URLs without user, password or query."""
    given = spec.reasoner or {}
    reasoner = {"kind": given["kind"]} if given.get("kind") else {}
    if given.get("kind") == "llm":
        reasoner |= {"model": given.get("model"), "base_url": _without_secrets(str(given.get("base_url") or ""))}
    identity = {
        "problem": spec.problem,
        "options": _options(spec),
        "budget": spec.budget,
        "budgets": list(spec.budgets),
        "storage": shown_url(spec.storage) if spec.storage else None,
        "reasoner": reasoner,
        "engine_options": spec.engine_options or {},
        "runs": sorted([g, p, s] for g in spec.run_groups() for p in spec.proposers for s in spec.seeds),
    }
    loaded: dict[str, Any] = json.loads(json.dumps(identity, default=str))
    return loaded


def _describe(identity: Mapping[str, Any]) -> str:
    runs = identity.get("runs", [])
    groups = sorted({str(r[0]) for r in runs})
    proposers = sorted({str(r[1]) for r in runs})
    seeds = len({r[2] for r in runs})
    budget = identity.get("budgets") or identity.get("budget")
    reasoner = identity.get("reasoner") or {}
    llm = f", reasoner {reasoner.get('kind')}" + (f":{reasoner['model']}" if reasoner.get("model") else "") if reasoner else ""
    return f"{identity.get('problem')} on {','.join(groups)}, proposers {','.join(proposers)}, {seeds} seed(s), budget {budget}{llm}"


def claim_out_folder(spec: BenchSpec, out: Path) -> None:
    """Refuse an output folder whose files are another benchmark's that this one would replace.

    A benchmark rewrites ``runs.csv`` and its tables from its own runs: run into the folder of another (other
    proposers, devices, options or reasoner), it would drop the earlier runs from the files, though their studies stay
    in the storage. The same benchmark again (a resume), one that adds runs to it (more seeds), or one that extends
    its studies (a larger budget, ``--budgets`` scored on them) may write there.

    Raises:
        UserInputError: the folder holds another benchmark's files (one line, with the fix).
    """
    record = out / BENCH_RECORD
    try:
        earlier = json.loads(record.read_text())
    except (OSError, ValueError):
        return  # none (or unreadable: it is rewritten at the end): nothing known to protect
    here = _identity(spec)
    # a larger budget (or --budgets over a plain bench) extends the same studies: their files hold the longer runs
    extends = ("runs", "budget", "budgets")
    differ = [k for k in here if k not in extends and earlier.get(k) != here[k]]
    dropped = sorted({tuple(r) for r in earlier.get("runs", [])} - {tuple(r) for r in here["runs"]})
    if differ or dropped:
        why = [f"its {', '.join(differ)} differ{'s' if len(differ) == 1 else ''}"] if differ else []
        if dropped:
            shown = ", ".join(f"{p} on {g} seed {s}" for g, p, s in dropped[:3]) + (" ..." if len(dropped) > 3 else "")
            why.append(f"it would drop {len(dropped)} of its runs from the files ({shown})")
        raise UserInputError(
            f"--out {out} holds the results of another benchmark ({_describe(earlier)}): {'; '.join(why)}. Pass another --out "
            f"(deleting {out} would delete the runs' storage in it too, unless --storage named another)"
        )


def _record_out_folder(spec: BenchSpec, out: Path) -> Path:
    (out / BENCH_RECORD).write_text(json.dumps(_identity(spec)))
    return out / BENCH_RECORD


def run_bench(spec: BenchSpec, out: Path, *, on_result: Callable[[SearchResult], None] | None = None) -> BenchReport:
    """Run every (group, proposer, seed) of ``spec`` and write the outputs into ``out``.

    ``on_result`` is called after every run. A spec with ``budgets`` is for
    :func:`search.bench_budgets.run_budget_bench` (``ValueError`` here).
    """
    if spec.budgets:
        raise ValueError("a bench with several budgets runs through search.bench_budgets.run_budget_bench")
    spec.validate()
    claim_out_folder(spec, out)
    make_out_folder(out, "benchmark outputs")
    storage = spec.storage or f"sqlite:///{out / 'bench.sqlite3'}"
    open_storage(storage)  # create the schema once, before parallel runs race to do it
    groups = spec.run_groups()
    engine = {k: v for k, v in (spec.engine_options or {}).items() if v is not None}
    jobs = [
        (spec.problem, _problem_options(spec, g), p, spec.budget, s, storage, spec.reasoner, engine if takes_reasoner(p) else None)
        for g in groups
        for p in spec.proposers
        for s in spec.seeds
    ]
    results = run_jobs(jobs, spec.jobs, on_result)
    order = {(group_of(spec, job[1]), job[2], job[4]): k for k, job in enumerate(jobs)}
    results.sort(key=lambda r: order[(group_of(spec, r.problem), r.proposer, r.seed)])
    report = BenchReport(results=results)
    report.files.append(_write_csv(results, out / "runs.csv"))
    (out / "histories.json").write_text(json.dumps([{"study": r.study, "hv_history": r.hv_history} for r in results]))
    report.files.append(out / "histories.json")
    pooled = {g: pooled_hv_ratios(spec, [r for r in results if group_of(spec, r.problem) == g], storage) for g in groups}
    report.markdown = markdown_table(results, spec, pooled) + paired_table(results, spec, pooled) + exploration_table(results, spec)
    (out / "results.md").write_text(report.markdown)
    report.files.append(out / "results.md")
    report.files.extend(_plots(spec, results, out, storage))
    report.files.append(_record_out_folder(spec, out))
    return report


def group_of(spec: BenchSpec, options: Mapping[str, Any]) -> str:
    """The run group a run's options (or recorded problem spec) belong to."""
    key = spec.group_option
    return "-" if key is None else str(options.get(key))


def _write_csv(results: Sequence[SearchResult], path: Path) -> Path:
    options = list(dict.fromkeys(k for r in results for k, v in r.problem.items() if k != "problem" and not isinstance(v, dict | list)))
    # a problem option named like a run's column (quant's and fpga-transformer's ``seed``) gets its own column
    column = {k: f"option_{k}" if k in RUN_FIELDS else k for k in options}
    with path.open("w", newline="") as fh:
        writer = csv.DictWriter(fh, fieldnames=["problem", *column.values(), *RUN_FIELDS])
        writer.writeheader()
        for r in results:
            row = {"problem": r.problem["problem"], **{column[k]: r.problem.get(k) for k in options}}
            writer.writerow(row | {f: getattr(r, f) for f in RUN_FIELDS})
    return path


def _mean_std(values: Sequence[float | None]) -> str:
    """``0.9912 ± 0.0034`` (mean ± std over seeds; a seed without the value is None).

    One value has no spread, so it says so instead of ``± 0.0000``; seeds without the value are
    counted, so a mean over fewer seeds than ran reads e.g. ``0.9805 (1 of 3 seeds)``.
    """
    have = [v for v in values if v is not None]
    if not have:
        return "n/a"
    shown = f"{have[0]:.4f}" if len(have) == 1 else f"{statistics.fmean(have):.4f} ± {statistics.stdev(have):.4f}"
    if len(have) < len(values):
        return f"{shown} ({len(have)} of {len(values)} seeds)"
    return shown + (" (1 seed)" if len(have) == 1 else "")


def pooled_hv_ratios(spec: BenchSpec, results: Sequence[SearchResult], storage: str) -> dict[str, float] | None:
    """Per study of one run group: HV of its found front over the HV of every run's fronts pooled.

    For problems whose exact front is unknown (no :meth:`~search.problem.Problem.reference`):
    the pooled front is the best known one, so these ratios compare proposers within the
    group and say nothing about distance to the true front. The HV reference point is the
    problem's acquisition bounds, or where it has none the pooled worst (:func:`pooled_worst`).
    None when the problem has an exact front.
    """
    if not results or any(r.hv_ratio is not None for r in results):
        return None
    problem = make_problem(spec.problem, _problem_options(spec, group_of(spec, results[0].problem)), storage=storage)
    worst = None if problem.acquisition_bounds() is not None else pooled_worst(problem, [r.study for r in results], storage)
    score = pooled_scorer(problem, [r.front for r in results], worst)
    return None if score is None else {r.study: score(r.front) for r in results}


def pooled_worst(problem: Problem, studies: Sequence[str], storage: str) -> tuple[float, float] | None:
    """The pooled worst point: the lowest first and the highest second front objective over every paid evaluation of ``studies``.

    The HV reference point of a problem without acquisition bounds (the proposers fall back to the
    same per run: the worst paid first objective, the largest second); None when nothing was paid.
    """
    first, second = problem.front_objectives
    y1: list[float] = []
    y2: list[float] = []
    for name in studies:
        study = optuna.load_study(study_name=name, storage=open_storage(storage))
        paid = [e for e in evaluations_from_study(problem, study) if e.query]
        y1 += [e.values[first] for e in paid]
        y2 += [e.values[second] for e in paid]
    return (min(y1), max(y2)) if y1 else None


def pooled_scorer(
    problem: Problem, fronts: Sequence[Sequence[dict[str, Any]]], worst: tuple[float, float] | None = None
) -> Callable[[Sequence[dict[str, Any]]], float] | None:
    """The pooled HV ratio of :func:`pooled_hv_ratios`: a front's HV over the HV of ``fronts`` pooled.

    ``fronts`` are found fronts (rows with the problem's :attr:`~search.problem.Problem.front_objectives`);
    the reference point is the problem's acquisition bounds, else ``worst`` (:func:`pooled_worst`).
    None when there is neither, or the pooled front has no hypervolume.
    """
    bounds = problem.acquisition_bounds() or worst
    if bounds is None:
        return None
    first, second = problem.front_objectives

    def hv(rows: Sequence[dict[str, Any]]) -> float:
        return hypervolume(np.array([r[first] for r in rows]), np.array([r[second] for r in rows]), *bounds)

    best = hv([row for front in fronts for row in front])
    if best <= 0:
        return None
    return lambda rows: hv(rows) / best


FOUND_SETS = {
    "all": "the found set is every evaluated design",
    "front": "objectives are estimated during the search and only the reported front is scored, afterwards, on the truth",
    "predicted": "a predictor trained on the paid evaluations scores more designs after the search, and the front of paid "
    "and predicted designs is reported, then scored on the truth",
}
"""How a bench table's runs are scored, by :attr:`~search.problem.Problem.found_set`."""


def markdown_table(results: Sequence[SearchResult], spec: BenchSpec, pooled: Mapping[str, dict[str, float] | None] | None = None) -> str:
    """Mean ± std (over seeds) per run group and proposer.

    ``pooled``: :func:`pooled_hv_ratios` per group, shown (marked †) where no exact HV ratio exists.
    """
    seeing = [p for p in spec.proposers if _sees_cheap(p)]
    lines = _table_head(results, spec, seeing)
    for group in spec.run_groups():
        by_study = (pooled or {}).get(group)
        for proposer in spec.proposers:
            rs = [r for r in results if group_of(spec, r.problem) == group and r.proposer == proposer]
            lines.append(_table_row(group, proposer, rs, by_study, seeing))
    if any(v is not None for v in (pooled or {}).values()):
        lines += [
            "",
            "† No exact front for this problem: HV of each run's found front over the HV of every run's fronts in its group "
            "pooled (the best known front; reference point at the problem's bounds, or where it has none at the worst values of "
            "every paid evaluation of the group). It ranks the proposers of this table only.",
        ]
    return "\n".join(lines) + "\n"


def _table_head(results: Sequence[SearchResult], spec: BenchSpec, seeing: Sequence[str]) -> list[str]:
    """The table's title, the paragraph on what the budget counts and how runs are scored, and the header rows."""
    cls = problem_class(spec.problem)
    key = spec.group_option
    # the problem's effective options (defaults included) as the runs recorded them, less the run-group option
    recorded = results[0].problem if results else {"problem": spec.problem, **spec.options}
    opts = ", ".join(f"{k}={v}" for k, v in recorded.items() if k not in ("problem", key) and not isinstance(v, dict | list))
    expensive = ", ".join(o.name for o in cls.objectives if o.cost == "expensive") or "none"
    found_set = results[0].found_set if results else "all"
    scored = FOUND_SETS.get(found_set, found_set)
    marker = (
        f" Column 'sees cheap' (◆): proposers that see the cheap objective(s) of every candidate before paying for it "
        f"({', '.join(seeing)}); the others learn them only from what they pay for."
        if seeing
        else ""
    )
    return [
        f"# coevo bench: {spec.problem}{f' ({opts})' if opts else ''}, budget {spec.budget}, seeds {list(spec.seeds)}",
        "",
        f"The budget counts evaluations of the expensive objective(s) ({expensive}); {scored}. HV ratio and IGD as "
        f"defined in docs/design.md (useful region of {cls.objectives[0].name}). Wall time is per run (every invocation "
        "that evaluated for it, summed: a run reused from storage keeps the time it took), with "
        f"{spec.jobs} run(s) in parallel." + marker,
        "",
        f"| {key or 'group'} | proposer | HV ratio | IGD | front recall | wall s |" + (" sees cheap |" if seeing else ""),
        "|---|---|---|---|---|---|" + ("---|" if seeing else ""),
    ]


def _table_row(group: str, proposer: str, rs: Sequence[SearchResult], by_study: dict[str, float] | None, seeing: Sequence[str]) -> str:
    """One (run group, proposer) row: mean ± std over its seeds; the pooled HV ratio (†) where ``by_study`` has one."""
    hv = _mean_std([r.hv_ratio for r in rs])
    if by_study is not None:
        hv = _mean_std([by_study[r.study] for r in rs]) + " †"
    sees = (" ◆ |" if proposer in seeing else " |") if seeing else ""
    return (
        f"| {group} | {proposer} | {hv} | "
        f"{_mean_std([r.igd for r in rs])} | "
        f"{_mean_std([r.front_recall for r in rs])} | "
        f"{statistics.fmean([run_seconds(r) for r in rs]):.1f} |" + sees
    )


def run_seconds(result: SearchResult) -> float:
    """A run's wall time for the tables: every invocation that evaluated for it, summed (a run reused from storage keeps the
    time it took, not the second its rerun took); this invocation's for a study from before coevo recorded it."""
    return result.search_wall_s if result.search_wall_s is not None else result.wall_s


def _sees_cheap(name: str) -> bool:
    """Whether proposer ``name`` reads cheap objectives of candidates before paying (built with defaults to ask it)."""
    try:
        return bool(getattr(get_proposer(name), "sees_cheap_objectives", False))
    except (UserInputError, TypeError):  # a plug-in that cannot be built without options: unmarked
        return False


def paired_table(
    results: Sequence[SearchResult], spec: BenchSpec, pooled: Mapping[str, dict[str, float] | None] | None = None, metric: str = "hv_ratio"
) -> str:
    """Paired differences of every proposer against the first one of ``spec.proposers``, on the same seeds.

    Per run group and pooled over groups: mean difference (other - first) of ``metric`` with a
    Student t 95 % interval over the (group, seed) pairs; ``*`` marks an interval that excludes 0.
    Empty with fewer than two proposers or two seeds. HV ratios fall back to the pooled ratios
    (see :func:`pooled_hv_ratios`) where the problem has no exact front.
    """
    if len(spec.proposers) < 2 or len(spec.seeds) < 2:
        return ""

    def value(r: SearchResult) -> float | None:
        by_study = (pooled or {}).get(group_of(spec, r.problem))
        if metric == "hv_ratio" and by_study is not None:
            return by_study.get(r.study)
        v = getattr(r, metric)
        return None if v is None else float(v)

    table = {(group_of(spec, r.problem), r.proposer, r.seed): value(r) for r in results}
    first, others = spec.proposers[0], spec.proposers[1:]
    groups = spec.run_groups()
    lines = [
        "",
        f"## Paired differences against {first}",
        "",
        f"{metric} of each proposer minus {first}'s on the same run group and seed: mean and Student t 95 % interval "
        "over seeds (pooled: over every pair); * marks an interval that excludes 0.",
        "",
        f"| proposer | {' | '.join(groups)} | pooled |",
        "|---|" + "---|" * (len(groups) + 1),
    ]
    for other in others:
        cells, pooled_diffs = [], []
        for g in groups:
            diffs = [
                float(b - a)
                for s in spec.seeds
                if (a := table.get((g, first, s))) is not None and (b := table.get((g, other, s))) is not None
            ]
            pooled_diffs += diffs
            cells.append(format_interval(diffs) + (" *" if excludes_zero(diffs) else ""))
        cells.append(format_interval(pooled_diffs) + (" *" if excludes_zero(pooled_diffs) else ""))
        lines.append(f"| {other} | " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def _shares(results: Sequence[SearchResult], part: str) -> dict[str, float]:
    totals: dict[str, float] = {}
    for r in results:
        counts = r.exploration.get(part, {})
        pairs = list(counts.items() if isinstance(counts, dict) else enumerate(counts))
        n = sum(v for _, v in pairs) or 1
        for k, v in pairs:
            totals[str(k)] = totals.get(str(k), 0.0) + v / n / len(results)
    return totals


def exploration_table(results: Sequence[SearchResult], spec: BenchSpec) -> str:
    """Exploration bias: mean share of evaluations per niche and per band of the second objective, per proposer."""
    niche_ids = list(results[0].exploration.get("niches", {})) if results else []
    band_objective = results[0].exploration.get("band_objective", "the second objective") if results else "the second objective"
    lines = [
        "",
        "## Exploration bias",
        "",
        f"Mean share of evaluated designs per niche (the problem's niche partition) and per band of {band_objective} "
        f"(band1..band{BANDS}: {BANDS} equal-width bands over the space's range, lowest first), over run groups and seeds.",
        "",
        "| proposer | " + " | ".join(niche_ids) + " | " + " | ".join(f"band{k + 1}" for k in range(BANDS)) + " |",
        "|---|" + "---|" * (len(niche_ids) + BANDS),
    ]
    for proposer in spec.proposers:
        rs = [r for r in results if r.proposer == proposer]
        niches = _shares(rs, "niches")
        bands = _shares(rs, "bands")
        cells = [f"{niches.get(n, 0):.2f}" for n in niche_ids] + [f"{bands.get(str(k), 0):.2f}" for k in range(BANDS)]
        lines.append(f"| {proposer} | " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def _problem_options(spec: BenchSpec, group: str) -> dict[str, Any]:
    key = spec.group_option
    return {**spec.options, key: group} if key is not None else dict(spec.options)


def _plots(spec: BenchSpec, results: Sequence[SearchResult], out: Path, storage: str) -> list[Path]:
    paths = [
        plot_exploration(
            {p: _shares([r for r in results if r.proposer == p], "niches") for p in spec.proposers},
            f"{spec.problem}: share of evaluations per niche",
            out / "exploration.png",
        )
    ]
    for group in spec.run_groups():
        problem = make_problem(spec.problem, _problem_options(spec, group), storage=storage)
        ref = problem.reference()
        rs = [r for r in results if group_of(spec, r.problem) == group]
        title = f"{spec.problem} {' '.join(str(v) for v in spec.options.values())} {group}, budget {spec.budget}"
        curves = {p: [r.hv_history for r in rs if r.proposer == p and r.hv_history] for p in spec.proposers}
        if any(curves.values()):  # zero-cost runs have no HV history: nothing to draw
            paid = ", ".join(problem.expensive) + " queries"  # NB201: accuracy queries
            paths.append(plot_hv_curves(curves, title, out / f"hv_{Path(group).stem}.png", paid=paid))
        if ref is None:
            continue
        y1, y2 = problem.front_objectives
        first = min(spec.seeds)
        found = {r.proposer: ([row[y1] for row in r.front], [row[y2] for row in r.front]) for r in rs if r.seed == first}
        labels = {o.name: f"{o.name} ({o.unit})" if o.unit else o.name for o in problem.objectives}
        paths.append(
            plot_fronts(
                ref, found, f"{title} (seed {first}, found fronts)", out / f"front_{Path(group).stem}.png", labels=(labels[y2], labels[y1])
            )
        )
    return paths
