"""How the co-evolution engine's HV depends on its reasoner: simulated reasoners of known quality, or your own endpoint.

Runs, on NB201 (one dataset, several devices, several seeds, one budget), every reasoner
("quality") x screening on/off x tools on/off through the real LLM code path, beside offline
``pelnas``, ``pelnas-nokb`` and TPE measured in the same run, and writes a table with paired
differences against ``pelnas-nokb`` (95 % Student t intervals over devices x seeds):

    # simulated reasoners (no LLM; a loopback endpoint in each run's process), ~1 h on 2 cores:
    python -m coevo.figures reasoner
    # the same comparison for models you have (any OpenAI-compatible endpoint):
    python -m coevo.figures reasoner --llm-base-url http://localhost:8000/v1 --llm-model qwen2.5-7b,llama3.1-8b \\
        --llm-price 0.15,0.60 --out my-reasoner-bench
    # re-render the tables from the saved runs.csv:
    python -m coevo.figures reasoner --report-only

With ``--ensemble a:1,b:1`` one more arm runs both models in one search (screen and tools
on) and the report gives each model's yield: the share of its paid proposals on the found
front. Before a real endpoint is called the script prints the expected number of requests
and tokens (measured per run on the simulated reasoners: about 130 requests, 171k prompt
and 54k completion tokens per 300-query run) and, with ``--llm-price``, the cost, and asks to
go on.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from pathlib import Path
from typing import Any

import optuna

from coevo.figures._common import command_line, figure_parser, mean_std, read_csv, write_csv, write_markdown
from coevo.search.bench import run_jobs
from coevo.search.config import DEFAULT_LLM_TIMEOUT_S, LLM_TIMEOUT_HELP
from coevo.search.metrics import model_yield
from coevo.search.problems import problem_from_spec
from coevo.search.round_log import RoundLogs
from coevo.search.runner import stored_summary
from coevo.search.stats import excludes_zero, format_interval
from coevo.search.storage import open_storage
from coevo.search.study import evaluations_from_study, load_search

NAME = "reasoner"

ARMS = {
    "floor+tools": ("on", True),
    "floor": ("on", False),
    "tools": ("off", True),
    "plain": ("off", False),
    "screen+tools": ("llm", True),
    "screen": ("llm", False),
}
"""Arm name (the token in the study name) -> (``--screen``, tools)."""
LABELS = {
    "floor+tools": "screen on + tools",
    "floor": "screen on",
    "tools": "no screen + tools",
    "plain": "no screen",
    "screen+tools": "screen llm + tools",
    "screen": "screen llm",
}
"""How the report names each arm: ``screen on`` ranks the LLM's candidates with the engine's own, ``screen llm`` the LLM's only."""
DEFAULT_ARMS = ("floor+tools", "floor", "tools", "plain")
SIMULATED = ("sim-random", "sim-mutate", "sim-oracle-0.25")
BASELINES = ("pelnas", "pelnas-nokb", "tpe")
FIELDS = (
    "arm",
    "reasoner",
    "device",
    "seed",
    "hv_ratio",
    "evaluations",
    "wall_s",
    "rounds",
    "llm_requests",
    "tool_calls",
    "prompt_tokens",
    "completion_tokens",
    "screened_out",
    "paid_from_engine",
    "yield",
)
PER_RUN = {"requests": 130, "prompt_tokens": 171_000, "completion_tokens": 54_000}
"""What one 300-query LLM run used on the simulated bench (docs/bench/reasoner/runs.csv): the mean over the four arms
(screen on/off x tools on/off) of each arm's median. A real model writes longer rationales: take it as a floor."""


def _csv(text: str) -> tuple[str, ...]:
    return tuple(x.strip() for x in text.split(",") if x.strip())


def _slug(quality: str) -> str:
    return quality.replace(":", "_").replace(",", "+")


def _complete(storage: str, study: str, budget: int) -> bool:
    """Whether ``study`` exists in ``storage`` with its budget spent (``--existing-only``)."""
    try:
        s = optuna.load_study(study_name=study, storage=storage)
    except KeyError:
        return False
    return sum(1 for t in s.get_trials(deepcopy=False) if t.state.name == "COMPLETE") >= budget


def _jobs(args: argparse.Namespace, storage: str) -> list[tuple[tuple[Any, ...], dict[str, str]]]:
    """(run arguments of :func:`search.bench._one_run`, row labels) for every run."""
    out: list[tuple[tuple[Any, ...], dict[str, str]]] = []
    qualities = args.llm_model or SIMULATED
    base_url = args.llm_base_url or "simulated"
    for seed in range(args.seeds):  # seed-major: a run cut short leaves whole seeds on every device
        for device in args.devices:
            options = {"dataset": args.dataset, "device": device}
            for name in args.baselines:
                study = f"nb201-{args.dataset}-{device}-{name}-s{seed}"
                if args.existing_only and not _complete(storage, study, args.budget):
                    continue
                out.append(
                    ((("nb201", options, name, args.budget, seed, storage, None, None, study)), {"arm": "offline", "reasoner": name})
                )
            arms = [(q, a) for q in qualities for a in args.arms]
            if args.ensemble:
                arms.append((args.ensemble, "floor+tools"))
            for quality, arm in arms:
                screen, tools = ARMS[arm]
                reasoner = {"kind": "llm", "base_url": base_url, "model": quality, "tools": tools, "timeout_s": args.llm_timeout}
                if args.llm_price:
                    reasoner["price_per_mtok"] = list(args.llm_price)
                study = f"nb201-{args.dataset}-{device}-{_slug(quality)}-{arm}-s{seed}"
                if args.existing_only and not _complete(storage, study, args.budget):
                    continue
                out.append(
                    (
                        ("nb201", options, "pelnas", args.budget, seed, storage, reasoner, {"screen": screen}, study),
                        {"arm": arm, "reasoner": quality},
                    )
                )
    return out


def _span_s(study: optuna.Study) -> float:
    """Seconds from the first trial's start to the last trial's end: the run's time even when this call only resumed it."""
    starts = [t.datetime_start for t in study.get_trials(deepcopy=False) if t.datetime_start is not None]
    ends = [t.datetime_complete for t in study.get_trials(deepcopy=False) if t.datetime_complete is not None]
    return (max(ends) - min(starts)).total_seconds() if starts and ends else 0.0


def _row(result: Any, labels: dict[str, str], storage: str) -> dict[str, Any]:
    logs = RoundLogs(storage).read(result.study)
    guided = [v for k, v in logs.items() if k > 0]
    # summed from the round logs, so a run resumed (or only read back) still reports what it used
    usage = {k: sum(int(v.get("usage_round", {}).get(k, 0) or 0) for v in logs.values()) for k in ("calls", "tool_calls")}
    usage |= {k: sum(int(v.get("usage_round", {}).get(k, 0) or 0) for v in logs.values()) for k in ("prompt_tokens", "completion_tokens")}
    problem = problem_from_spec(result.problem)
    study = optuna.load_study(study_name=result.study, storage=storage)
    final_yield = model_yield(problem, [e for e in evaluations_from_study(problem, study) if e.query])  # at the end of the run
    return {
        **labels,
        "device": result.problem["device"],
        "seed": result.seed,
        "hv_ratio": result.hv_ratio,
        "evaluations": result.evaluations,
        "wall_s": round(_span_s(study), 2),
        "rounds": len(guided),
        "llm_requests": usage.get("calls", 0),
        "tool_calls": usage.get("tool_calls", 0),
        "prompt_tokens": usage.get("prompt_tokens", 0),
        "completion_tokens": usage.get("completion_tokens", 0),
        "screened_out": sum(int(v.get("screening", {}).get("screened_out", 0)) for v in guided),
        "paid_from_engine": sum(int(v.get("screening", {}).get("kept_from_engine", 0)) for v in guided),
        "yield": json.dumps(final_yield) if final_yield else "",
    }


def run(args: argparse.Namespace, argv: list[str] | None) -> Path:
    args.out.mkdir(parents=True, exist_ok=True)
    storage = args.storage or f"sqlite:///{args.out / 'reasoner-bench.sqlite3'}"
    open_storage(storage)
    jobs = _jobs(args, storage)
    llm_runs = sum(1 for job, _ in jobs if job[6] is not None)
    if args.llm_base_url and not args.existing_only:
        scale = args.budget / 300 * llm_runs
        prompt, completion = scale * PER_RUN["prompt_tokens"], scale * PER_RUN["completion_tokens"]
        cost = ""
        if args.llm_price:
            cost = f", about ${(prompt * args.llm_price[0] + completion * args.llm_price[1]) / 1e6:.2f} at the given price"
        print(
            f"{llm_runs} LLM runs: about {scale * PER_RUN['requests']:.0f} requests, {prompt / 1e6:.1f}M prompt and "
            f"{completion / 1e6:.1f}M completion tokens{cost} (measured on the simulated reasoners; real replies are longer)"
        )
        if not args.yes and input("go on? [y/N] ").strip().lower() != "y":
            raise SystemExit("nothing ran")
    labels = {job[8]: lab for job, lab in jobs}
    started = time.time()
    done = [0]

    def progress(result: Any) -> None:
        done[0] += 1
        print(f"[{done[0]}/{len(jobs)} {time.time() - started:.0f}s] {result.study}: HV {result.hv_ratio:.4f}", flush=True)

    if args.existing_only:  # read the finished runs back; nothing runs
        results = [stored_summary(load_search(storage, job[8], create=False), storage) for job, _ in jobs]
    else:
        results = run_jobs([job for job, _ in jobs], args.jobs, progress)
    path = args.out / "runs.csv"
    rows = [_row(r, labels[r.study], storage) for r in sorted(results, key=lambda r: r.study)]
    write_csv(path, rows, FIELDS, command=command_line(NAME, argv))
    return path


# ---------------------------------------------------------------- the report


def report(path: Path, budget: str = "") -> str:
    """The markdown tables of a saved ``runs.csv``."""
    rows = read_csv(path)
    devices = sorted({r["device"] for r in rows})
    arms = [(r["reasoner"], r["arm"]) for r in rows]
    order = list(dict.fromkeys(arms))
    offline = [a for a in order if a[1] == "offline"]
    llm = [a for a in order if a[1] != "offline"]
    hv = {(r["reasoner"], r["arm"], r["device"], r["seed"]): float(r["hv_ratio"]) for r in rows if r["hv_ratio"] not in ("", "None")}
    seeds = sorted({r["seed"] for r in rows}, key=int)
    lines = [
        f"HV ratio{budget}, NB201 {', '.join(devices)}, {len(seeds)} seeds: mean ± sd over seeds. Simulated reasoners (sim-...) are "
        "scripted endpoints, not language models (agent/reasoners/simulated.py). `screen on`: the LLM is asked for 3x the quota and "
        "the surrogate picks the quota by expected HV among its candidates and the engine's own (what pelnas-nokb would pay "
        "for); `screen llm`: among the LLM's candidates only; `no screen`: the LLM's first picks are paid for. `tools`: the "
        "reasoner may call the round's cheap read-only tools. Δ nokb: paired difference "
        "against offline pelnas-nokb on the same device and seed, mean ± 95 % t half-width over all devices x seeds "
        "(* = the interval excludes 0).",
        "",
        "| reasoner | arm | " + " | ".join(devices) + " | Δ nokb (pooled, n pairs) |",
        "|---|---|" + "---|" * len(devices) + "---|",
    ]
    for reasoner, arm in offline + llm:
        cells = []
        for d in devices:
            xs = [hv[(reasoner, arm, d, s)] for s in seeds if (reasoner, arm, d, s) in hv]
            cells.append(mean_std(xs, 4, single="n/a"))
        diffs = [
            hv[(reasoner, arm, d, s)] - hv[("pelnas-nokb", "offline", d, s)]
            for d in devices
            for s in seeds
            if (reasoner, arm, d, s) in hv and ("pelnas-nokb", "offline", d, s) in hv
        ]
        delta = (
            ""
            if reasoner == "pelnas-nokb" or len(diffs) < 2
            else format_interval(diffs) + (" *" if excludes_zero(diffs) else "") + f" (n={len(diffs)})"
        )
        lines.append(f"| {reasoner} | {LABELS.get(arm, arm)} | " + " | ".join(cells) + f" | {delta} |")
    lines += [
        "",
        "LLM use per guided round (medians over runs; tokens are the endpoint's counts, estimates of characters / 4 for the "
        "simulated endpoint):",
        "",
        "| reasoner | arm | requests / round | tool calls / round | prompt tokens / round | completion tokens / round | "
        "screened out / round | paid from the engine / round |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for reasoner, arm in llm:
        sub = [r for r in rows if r["reasoner"] == reasoner and r["arm"] == arm and int(r["rounds"]) > 0]
        if not sub:
            continue

        def per_round(field: str, sub: list[dict[str, str]] = sub) -> str:
            return f"{statistics.median(float(r[field]) / int(r['rounds']) for r in sub):.1f}"

        lines.append(
            f"| {reasoner} | {LABELS.get(arm, arm)} | {per_round('llm_requests')} | {per_round('tool_calls')} | "
            f"{per_round('prompt_tokens')} | {per_round('completion_tokens')} | {per_round('screened_out')} | "
            f"{per_round('paid_from_engine')} |"
        )
    ensembles = [r for r in rows if "," in r["reasoner"] and r["yield"]]
    if ensembles:
        lines += [
            "",
            "Yield of each model in the multi-model runs (share of its paid proposals on the front of all paid evaluations at the "
            "end; median over runs, with the paid proposals summed):",
            "",
            "| models | model | paid proposals | on the front | yield (median) |",
            "|---|---|---|---|---|",
        ]
        for models in dict.fromkeys(r["reasoner"] for r in ensembles):
            per: dict[str, list[dict[str, Any]]] = {}
            for r in ensembles:
                if r["reasoner"] == models:
                    for name, y in json.loads(r["yield"]).items():
                        per.setdefault(name, []).append(y)
            for name, ys in per.items():
                paid = sum(y["paid"] for y in ys)
                front = sum(y["on_front"] for y in ys)
                lines.append(f"| {models} | {name} | {paid} | {front} | {statistics.median(y['yield'] for y in ys):.3f} |")
    walls = {a: statistics.median(float(r["wall_s"]) for r in rows if (r["reasoner"], r["arm"]) == a) for a in order}
    lines += ["", "Median wall time per run (s): " + ", ".join(f"{r} {a}: {w:.1f}" for (r, a), w in walls.items()), ""]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    p = figure_parser(NAME, __doc__)
    p.add_argument("--dataset", default="cifar10")
    p.add_argument("--devices", type=_csv, default=("fpga", "raspi4"))
    p.add_argument("--seeds", type=int, default=5)
    p.add_argument("--budget", type=int, default=300)
    p.add_argument("--jobs", type=int, default=2)
    p.add_argument("--arms", type=_csv, default=DEFAULT_ARMS, help=f"of {', '.join(ARMS)} (default: {', '.join(DEFAULT_ARMS)})")
    p.add_argument(
        "--existing-only", action="store_true", help="only the runs already complete in the storage (tables of a bench cut short)"
    )
    p.add_argument("--baselines", type=_csv, default=BASELINES)
    p.add_argument("--llm-base-url", default=None, help="your endpoint (default: the simulated reasoners)")
    p.add_argument("--llm-model", type=_csv, default=None, help="your models, each one reasoner row (default: sim-...)")
    p.add_argument("--ensemble", default="", help="one more arm with several models in one search, e.g. a:1,b:1")
    p.add_argument("--llm-price", type=lambda t: tuple(float(x) for x in t.split(",")), default=None, help="input,output USD/Mtok")
    p.add_argument("--llm-timeout", type=float, default=DEFAULT_LLM_TIMEOUT_S, help=LLM_TIMEOUT_HELP)
    p.add_argument("--storage", default=None)
    p.add_argument("--yes", action="store_true", help="do not ask before calling a real endpoint")
    args = p.parse_args(argv)
    bad = [a for a in args.arms if a not in ARMS]
    if bad:
        p.error(f"unknown arm(s) {', '.join(bad)}; arms: {', '.join(ARMS)}")
    path = args.out / "runs.csv" if args.report_only else run(args, argv)
    print(write_markdown(args.out / "results.md", report(path, f" at {args.budget} queries"), command_line(NAME, argv)))
