"""Search in few evaluations on NB201: HV vs paid queries per pair and proposer, and transfer from an earlier study (issue 29).

    python -m coevo.figures few-evals --pairs cifar10/eyeriss,cifar100/pixel3,imagenet16_120/eyeriss --seeds 3 --jobs 2 --transfer
    python -m coevo.figures few-evals --report-only

Every (pair, proposer, budget, seed) is its own search (no prefixes: the engine sizes its
rounds to what is left), in one SQLite file per run under ``--runs`` (resumable: a finished run
is read back, not rerun). Budget 0 is the zero-information front (the same for every
proposer: nothing is paid; one row per pair). Proposers: ``pelnas`` (query mode: the found set
is the paid cells), ``pelnas-fewshot`` (few-shot mode: paid plus predicted), ``mobo`` (the fair
model-based baseline: the same predictor, free designs and start, no niches or knowledge base)
and ``tpe`` (Optuna's TPE on the encoding, a second reference without the proxies).

Choices (the engine's round schedule, the predictor's switch to extra-trees at 150 labels) were made on
other pairs: cifar10/fpga, imagenet16_120/pixel3 and cifar10/raspi4 (issue 29's closing note); the default
pairs here are for reporting.

Transfer (``--transfer``): source studies pelnas on cifar10/fpga at 300 queries (seeds 0..S-1)
seed target searches at 30 and 100 queries on cifar10/pixel3 (another device: the accuracies
carry over) and on cifar100/fpga (another dataset: they do not): ``pelnas`` without transfer, and
``pelnas --kb-from`` the source of the same seed with ``--kb-from-use`` evaluations, heuristics
and both, so the knowledge base's share is isolated from the raw evaluations'. On the same
dataset, TPE warm-started with the source's 300 trials (their accuracy and the target's latency
of the same cells) is the baseline fed the same prior trials; it is asked for new cells until the
budget is paid (a cell the source measured counts as paid when asked, as pelnas must pay to
report it). Writes ``issue29-budgets.csv``, ``issue29-transfer.csv`` and
``issue29-few-evals.md``.
"""

from __future__ import annotations

import itertools
import statistics
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import Any

import numpy as np

from coevo.figures._common import command_line, figure_parser, read_numbers, write_csv, write_markdown
from coevo.search.stats import excludes_zero, format_interval

BUDGETS = (0, 10, 30, 100, 300)
PROPOSERS = ("pelnas", "mobo", "tpe", "pelnas-fewshot", "mobo-fewshot")
MATCH = {"pelnas": "mobo", "pelnas-fewshot": "mobo-fewshot"}
"""Each engine mode and its fair baseline: the same predictor, free designs, start and schedule, and the same found set
(query mode: the paid cells; few-shot mode: the front of paid and predicted cells)."""
REPORT_PAIRS = ("cifar10/eyeriss", "cifar100/pixel3", "imagenet16_120/eyeriss")
"""The pairs the page reports on (no choice was made on them)."""
TRANSFER_BUDGETS = (30, 100)
SOURCE_BUDGET = 300
TRANSFERS = (("cifar10", "fpga", "cifar10", "pixel3"), ("cifar10", "fpga", "cifar100", "fpga"))
"""(source dataset, device, target dataset, device): another device on the same dataset (the accuracies carry over), and
another dataset on the same device (they do not: a model of them is a feature)."""
USES = ("evaluations", "heuristics", "both")
"""What ``--kb-from`` seeds in each transfer arm (``--kb-from-use``)."""
BUDGETS_CSV, TRANSFER_CSV, MD = "issue29-budgets.csv", "issue29-transfer.csv", "issue29-few-evals.md"
GOALS = {0: 0.96, 30: 0.97, 100: 0.99, 300: 0.995}
"""The issue's HV-ratio goals per paid queries (300 also asks front recall >= 0.5)."""


def _run(job: tuple[str, str, str, int, int, str, str | None, str | None], name: str | None = None) -> dict[str, Any]:
    import optuna

    from coevo.search.problems import make_problem
    from coevo.search.runner import run_search

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    dataset, device, proposer, budget, seed, runs, kb_from, use = job
    mode = "few-shot" if proposer.endswith("-fewshot") else "query"
    problem = make_problem("nb201", {"dataset": dataset, "device": device, "mode": mode}, storage=None)
    name = name or f"{proposer}-{dataset}-{device}-b{budget}-s{seed}"
    storage = f"sqlite:///{Path(runs) / (name + '.sqlite3')}"
    from coevo.search.proposers import get_proposer

    prop = get_proposer(proposer.removesuffix("-fewshot"), {"kb_from": kb_from, "kb_from_use": use} if kb_from else None)
    result = run_search(problem, prop, budget=budget, seed=seed, storage=storage, study_name=name)
    return {
        "dataset": dataset,
        "device": device,
        "proposer": proposer,
        "budget": budget,
        "seed": seed,
        "paid": result.evaluations,
        "hv": result.hv_ratio,
        "recall": result.front_recall,
        "reported": result.reported,
        "wall_s": result.wall_s,
    }


def _warm_tpe(job: tuple[Any, ...]) -> dict[str, Any]:
    """TPE on the target device, warm-started with the source study's trials (accuracy carries over; latency is the target's)."""
    import optuna

    from coevo.search.metrics import FrontMetrics
    from coevo.search.problems import make_problem

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    dataset, device, budget, seed, source_storage, source = job
    problem = make_problem("nb201", {"dataset": dataset, "device": device})
    src = optuna.load_study(study_name=source, storage=source_storage)
    study = optuna.create_study(directions=["maximize", "minimize"], sampler=optuna.samplers.TPESampler(seed=seed, multivariate=True))
    dists = problem.distributions()
    for t in src.get_trials(deepcopy=False, states=(optuna.trial.TrialState.COMPLETE,)):
        if not t.user_attrs.get("query") or t.user_attrs.get("failure"):
            continue
        point = problem.from_params(t.params)
        values = problem.evaluate(point)
        study.add_trial(
            optuna.trial.create_trial(params=dict(t.params), distributions=dists, values=[values["accuracy"], values["latency_ms"]])
        )
    paid: dict[str, dict[str, float]] = {}
    asks = 0
    while len(paid) < budget and asks < 50 * budget:
        asks += 1
        trial = study.ask(dists)
        point = problem.from_params(trial.params)
        pid = problem.point_id(point)
        values = problem.evaluate(point)
        study.tell(trial, [values["accuracy"], values["latency_ms"]])
        paid.setdefault(pid, values)
    ref = problem.reference()
    assert ref is not None  # NB201 enumerates its space
    ids = list(paid)
    metrics = FrontMetrics.score(ref, ids, np.array([paid[i]["accuracy"] for i in ids]), np.array([paid[i]["latency_ms"] for i in ids]))
    return {
        "dataset": dataset,
        "device": device,
        "proposer": "tpe-warm",
        "budget": budget,
        "seed": seed,
        "hv": metrics.hv_ratio,
        "recall": metrics.front_recall,
    }


def measure_budgets(
    pairs: list[tuple[str, str]], seeds: int, jobs: int, runs: Path, budgets: tuple[int, ...] = BUDGETS
) -> list[dict[str, Any]]:
    """Every (pair, proposer, budget, seed) run, budget 0 once per pair."""
    work = [(d, v, "pelnas", 0, 0, str(runs), None, None) for d, v in pairs if 0 in budgets]
    work += [(d, v, p, b, s, str(runs), None, None) for d, v in pairs for p in PROPOSERS for b in budgets if b for s in range(seeds)]
    with ProcessPoolExecutor(jobs) as pool:
        return list(pool.map(_run, work))


def measure_transfer(seeds: int, jobs: int, runs: Path) -> list[dict[str, Any]]:
    """Source searches, then each target searched with nothing, evaluations, heuristics or both from them, and the warm-started TPE."""
    sources = sorted({(sd, sv) for sd, sv, _, _ in TRANSFERS})
    with ProcessPoolExecutor(jobs) as pool:
        made = list(pool.map(_run, [(d, v, "pelnas", SOURCE_BUDGET, s, str(runs), None, None) for d, v in sources for s in range(seeds)]))
    work: list[tuple[str, tuple[Any, ...]]] = []
    for sd, sv, td, tv in TRANSFERS:
        for s in range(seeds):
            source = f"pelnas-{sd}-{sv}-b{SOURCE_BUDGET}-s{s}"
            for b in TRANSFER_BUDGETS:
                work.append(("run", (td, tv, "pelnas", b, s, str(runs), None, None)))
                work += [("kb", (td, tv, b, s, str(runs), source, use)) for use in USES]
                if sd == td:  # TPE fed another dataset's accuracies as this one's would be no fair baseline
                    work.append(("tpe", (td, tv, b, s, f"sqlite:///{runs / (source + '.sqlite3')}", source)))
    with ProcessPoolExecutor(jobs) as pool:
        rows = list(pool.map(_transfer_job, work))
    return [dict(r, role="source", source="") for r in made] + rows


def _transfer_job(item: tuple[str, tuple[Any, ...]]) -> dict[str, Any]:
    kind, args = item
    if kind == "run":
        return dict(_run(args), role="no transfer", source="")
    if kind == "tpe":
        return dict(_warm_tpe(args), role="warm-started TPE", source=args[-1])
    dataset, device, budget, seed, runs, source, use = args
    folder = Path(runs)
    name = f"pelnas-{dataset}-{device}-b{budget}-s{seed}-kb-{use}-{source}"
    target = folder / (name + ".sqlite3")
    if not target.exists():  # the target reads the source study from its own storage: copy the source in first
        _copy_database(folder / (source + ".sqlite3"), target)
        kb = folder / (source + ".kb.sqlite3")
        if kb.exists():
            _copy_database(kb, folder / (name + ".kb.sqlite3"))
    row = _run((dataset, device, "pelnas", budget, seed, runs, source, use), name=name)
    return dict(row, proposer=f"pelnas --kb-from-use {use}", role=use, source=source)


def _copy_database(source: Path, target: Path) -> None:
    """Copy a SQLite database with SQLite's backup API: a file copy would miss what is still in its write-ahead log."""
    import sqlite3

    with sqlite3.connect(source) as src, sqlite3.connect(target) as dst:
        src.backup(dst)


def _stat(values: list[float]) -> str:
    values = [v for v in values if v == v]
    if not values:
        return "n/a"
    if len(values) == 1:
        return f"{values[0]:.4f}"
    return f"{statistics.median(values):.4f} [{min(values):.4f}, {max(values):.4f}]"


def _by_seed(rows: list[dict[str, Any]], proposer: str) -> dict[int, float]:
    return {int(r["seed"]): float(r["hv"]) for r in rows if r["proposer"] == proposer}


def _budget_row(mine: list[dict[str, Any]], budget: int, proposers: list[str]) -> str:
    """One budget's row of a pair's table: each proposer's HV, each engine mode minus its baseline paired by seed, recall."""
    at = [r for r in mine if int(r["budget"]) == budget]
    cells = [_stat([float(r["hv"]) for r in at if r["proposer"] == p or budget == 0]) for p in proposers]
    paired = [_paired(_by_seed(at, mode), _by_seed(at, base)) if budget else "n/a" for mode, base in MATCH.items()]
    recall = [float(r["recall"]) for r in at if r["proposer"] == "pelnas"]
    return f"| {budget} | " + " | ".join(cells + paired) + f" | {_stat(recall) if recall else 'n/a'} |"


def _goals(rows: list[dict[str, Any]]) -> list[str]:
    """Each goal of the issue against each engine mode's median HV (and recall at 300), with the gap where it is missed."""
    out = [
        "## The issue's goals",
        "",
        "Median HV ratio over seeds of each engine mode; `gap`: how far below the goal (0 where met; at 300 the goal "
        "also asks front recall >= 0.5, the query mode's median recall beside it). `ahead`: the mode minus its fair "
        "baseline (the same found set: mobo in query mode, mobo-fewshot in few-shot mode), paired by seed, with * where "
        "the 95 % interval excludes 0 (the goals ask for that too).",
        "",
        "| pair | budget | goal | pelnas (query) | gap | ahead of mobo | pelnas (few-shot) | gap | ahead of mobo-fewshot |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for dataset, device in sorted({(r["dataset"], r["device"]) for r in rows}):
        for budget, goal in GOALS.items():
            at = [r for r in rows if (r["dataset"], r["device"]) == (dataset, device) and int(r["budget"]) == budget]
            cells = []
            for mode, base in MATCH.items():
                hv = [float(r["hv"]) for r in at if r["proposer"] == mode or budget == 0]
                med = statistics.median(hv) if hv else float("nan")
                gap = max(0.0, goal - med) if hv else float("nan")
                ahead = _paired(_by_seed(at, mode), _by_seed(at, base)) if budget else "n/a (nothing paid)"
                cells += [f"{med:.4f}", f"{gap:.4f}", ahead]
            if budget == 300:
                recall = [float(r["recall"]) for r in at if r["proposer"] == "pelnas"]
                cells[0] += f" (recall {statistics.median(recall):.2f})" if recall else ""
            out.append(f"| {dataset} / {device} | {budget} | {goal} | " + " | ".join(cells) + " |")
    out.append("")
    return out


def render(rows: list[dict[str, Any]], transfer: list[dict[str, Any]]) -> str:
    """The markdown, from the saved rows."""
    out = [
        "# NB201 in few evaluations: HV ratio vs paid queries (issue 29)",
        "",
        "Median over seeds [min, max] of the HV ratio. `pelnas` and `mobo` in query mode (the found set is the paid "
        "cells), `-fewshot` in few-shot mode (the front of paid and predicted cells); `mobo` is the fair model-based "
        "baseline of each mode (the same predictor, free designs, start and round schedule; no niches, no knowledge "
        "base); `tpe` sees no proxy (a second reference). The `-` columns are each mode minus its baseline, paired by "
        "seed, mean with a 95 % t-interval (* where it excludes 0). Budget 0 is the zero-information front (nothing "
        "paid; the same for every proposer).",
        "",
    ]
    out += _goals(rows) + _monotone(rows)
    pairs = sorted({(r["dataset"], r["device"]) for r in rows})
    budgets = sorted({int(r["budget"]) for r in rows})
    proposers = [p for p in PROPOSERS if any(r["proposer"] == p for r in rows)]
    for dataset, device in pairs:
        mine = [r for r in rows if (r["dataset"], r["device"]) == (dataset, device)]
        diffs = [f"{mode} - {base}" for mode, base in MATCH.items()]
        out += [f"## {dataset} / {device}", "", "| budget | " + " | ".join(proposers + diffs) + " | recall pelnas |"]
        out.append("|---:|" + "---:|" * (len(proposers) + len(diffs) + 1))
        out += [_budget_row(mine, b, proposers) for b in budgets]
        out.append("")
    if transfer:
        out += render_transfer(transfer)
    return "\n".join(out)


def _monotone(rows: list[dict[str, Any]]) -> list[str]:
    """Whether few-shot mode's median HV never falls as paid queries are added, per pair (the issue's must-contain 4)."""
    out = ["Few-shot mode, monotone in information (median HV over seeds at each budget never below the one before):", ""]
    for dataset, device in sorted({(r["dataset"], r["device"]) for r in rows}):
        mine = [r for r in rows if (r["dataset"], r["device"]) == (dataset, device)]
        medians = {
            b: statistics.median(float(r["hv"]) for r in mine if int(r["budget"]) == b and (b == 0 or r["proposer"] == "pelnas-fewshot"))
            for b in sorted({int(r["budget"]) for r in mine})
        }
        falls = [f"{a} -> {b}: {medians[a]:.4f} -> {medians[b]:.4f}" for a, b in itertools.pairwise(medians) if medians[b] < medians[a]]
        out.append(f"* {dataset} / {device}: " + ("yes" if not falls else "no, it falls at " + "; ".join(falls)))
    out.append("")
    return out


def _paired(a: dict[int, float], b: dict[int, float]) -> str:
    common = sorted(set(a) & set(b))
    if len(common) < 2:
        return "n/a"
    diffs = [a[s] - b[s] for s in common]
    return format_interval(diffs) + (" *" if excludes_zero(diffs) else "")


def render_transfer(transfer: list[dict[str, Any]]) -> list[str]:
    """The transfer tables: one per (target dataset, device), from the saved rows."""
    out: list[str] = []
    targets = sorted({(r["dataset"], r["device"]) for r in transfer if r.get("role") not in ("source", None)})
    sources = {(r["dataset"], r["device"]) for r in transfer if r.get("role") == "source"}
    for dataset, device in targets:
        mine = [r for r in transfer if (r["dataset"], r["device"]) == (dataset, device)]
        src = ", ".join(f"{d} / {v}" for d, v in sorted(sources))
        out += [
            f"## Transfer into {dataset} / {device} (sources: pelnas on {src}, {SOURCE_BUDGET} queries)",
            "",
            "Per seed s, the source is the pelnas study of seed s. Median [min, max] of the target's HV ratio. "
            "`evaluations`: the source's paid evaluations feed the predictor (labels where the objective carries over, "
            "else a model of them as a feature); `heuristics`: its knowledge base is imported; `both`: the two. "
            "Paired differences by seed, mean with a 95 % t-interval (* where it excludes 0). The last column is the "
            "knowledge base's share: what the heuristics add over the raw evaluations.",
            "",
        ]
        roles = ["no transfer", *USES] + (["warm-started TPE"] if any(r.get("role") == "warm-started TPE" for r in mine) else [])
        out += ["| budget | " + " | ".join(roles) + " | both - no transfer | both - evaluations |", "|---:|" + "---:|" * (len(roles) + 2)]
        for b in TRANSFER_BUDGETS:
            get = {
                role: {int(r["seed"]): float(r["hv"]) for r in mine if r.get("role") == role and int(r["budget"]) == b} for role in roles
            }
            cells = " | ".join(_stat(list(get[role].values())) for role in roles)
            out.append(f"| {b} | {cells} | {_paired(get['both'], get['no transfer'])} | {_paired(get['both'], get['evaluations'])} |")
        out += ["", _transfer_goal(mine), ""]
    return out


def _transfer_goal(mine: list[dict[str, Any]]) -> str:
    """The issue's transfer goal on one target: the seeded 30-query HV at least the unseeded 100-query HV (medians over seeds)."""
    low, high = TRANSFER_BUDGETS[0], TRANSFER_BUDGETS[-1]

    def median(role: str, budget: int) -> float:
        return statistics.median(float(r["hv"]) for r in mine if r.get("role") == role and int(r["budget"]) == budget)

    goal = median("no transfer", high)
    parts = []
    for use in ("evaluations", "both"):
        got = median(use, low)
        parts.append(f"`{use}` {got:.4f} ({'met' if got >= goal else f'misses by {goal - got:.4f}'})")
    return (
        f"Goal: with the prior study, the HV at {low} queries at least the HV at {high} without it ({goal:.4f}, median): "
        + "; ".join(parts)
        + "."
    )


def main(argv: list[str] | None = None) -> int:
    p = figure_parser("few-evals", __doc__)
    p.add_argument(
        "--pairs", default="cifar10/eyeriss,cifar100/pixel3,imagenet16_120/eyeriss", help="dataset/device pairs, comma-separated"
    )
    p.add_argument("--seeds", type=int, default=3)
    p.add_argument("--jobs", type=int, default=2)
    p.add_argument("--runs", type=Path, default=Path("runs/few-evals"), help="one SQLite file per run (resumable)")
    p.add_argument(
        "--transfer", action="store_true", help="also measure transfer (TRANSFERS: fpga -> pixel3 on cifar10, cifar10 -> cifar100 on fpga)"
    )
    p.add_argument("--budgets", default=",".join(map(str, BUDGETS)), help="paid queries per run (default: 0,10,30,100,300)")
    args = p.parse_args(argv)
    out: Path = args.out
    command = command_line("few-evals", argv)
    if not args.report_only:
        args.runs.mkdir(parents=True, exist_ok=True)
        pairs = [(x.split("/")[0], x.split("/")[1]) for x in args.pairs.split(",")]
        write_csv(
            out / BUDGETS_CSV,
            measure_budgets(pairs, args.seeds, args.jobs, args.runs, tuple(int(b) for b in args.budgets.split(","))),
            command=command,
        )
        if args.transfer:
            write_csv(out / TRANSFER_CSV, measure_transfer(args.seeds, args.jobs, args.runs), command=command)
    rows = read_numbers(out / BUDGETS_CSV)
    transfer = read_numbers(out / TRANSFER_CSV) if (out / TRANSFER_CSV).exists() else []
    print(write_markdown(out / MD, render(rows, transfer), command))
    return 0
