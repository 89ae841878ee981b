"""The ``coevo`` command line: a table of commands, each a small function.

User errors (:class:`search.errors.CoevoError`) print one line on stderr and exit 2, with
no traceback. Ctrl-C exits 130 and says how to resume.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import optuna
from rich.console import Console
from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn, TimeRemainingColumn
from rich.table import Table

from agent import cli_kb, cli_runs
from agent.chat.options import add_arguments as add_chat_arguments
from search.errors import CoevoError, UserInputError
from search.problems import PROBLEMS
from search.proposers import PROPOSERS

out = Console(highlight=False)
err = Console(stderr=True, highlight=False)


@dataclass(frozen=True)
class Command:
    """One CLI command: how to add its arguments and what to run."""

    help: str
    add_arguments: Callable[[argparse.ArgumentParser], None]
    run: Callable[[argparse.Namespace], int]


# ---------------------------------------------------------------- search


def _problem_options(args: argparse.Namespace, **extra: object) -> dict[str, object]:
    options: dict[str, object] = {
        "dataset": args.dataset,
        "model": args.model,
        "cluster": args.cluster,
        "global_batch": args.global_batch,
        "resolution": args.resolution,
        "topology": args.topology,
        "k": args.k,
        "traffic": args.traffic,
        "load": args.load,
        "gt_share": args.gt_share,
        **extra,
    }
    if args.mode != "query":
        options["mode"] = args.mode
        options["storage"] = args.storage
    return options


def _add_problem_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--problem", default="nb201", help=f"the problem: {', '.join(PROBLEMS)} (default: nb201)")
    p.add_argument(
        "--mode",
        default="query",
        choices=("query", "zero-cost"),
        help="query: accuracy queries count against the budget; zero-cost: accuracy estimated by zero-cost proxies",
    )
    p.add_argument("--dataset", default=None, help="NB201 dataset: cifar10, cifar100, imagenet16_120 (default: cifar10)")
    p.add_argument("--storage", default=None, help="Optuna storage URL (default: sqlite:///runs/coevo.sqlite3)")
    g = p.add_argument_group("pipeline problem (--problem pipeline)")
    g.add_argument("--model", default=None, help="model preset (unet-sd, uvit-h, ...) or path/to/file.py:function (default: unet-sd)")
    g.add_argument("--cluster", default=None, help="cluster preset (v100x16-ib10, v100x16-ib300, v100x8-pcie) or a JSON file")
    g.add_argument("--global-batch", type=int, default=None, help="samples per training step over all replicas (default: 128)")
    g.add_argument("--resolution", type=int, default=None, help="latent height/width (default: 64)")
    g = p.add_argument_group("noc problem (--problem noc)")
    g.add_argument("--topology", default=None, help="mesh (the designs searched; default)")
    g.add_argument("--k", type=int, default=None, help="mesh side, k x k nodes (default: 8)")
    g.add_argument("--traffic", default=None, help="uniform, transpose, tornado or hotspot (default: hotspot)")
    g.add_argument("--load", type=float, default=None, help="offered load, fraction of a 4-sub-channel link (default: 0.3)")
    g.add_argument("--gt-share", type=float, default=None, help="share of the load in guaranteed-bandwidth flows (default: 0.7)")


def _add_search_args(p: argparse.ArgumentParser) -> None:
    _add_problem_args(p)
    p.add_argument("--device", default=None, help="NB201 latency device, e.g. fpga, raspi4, pixel3, eyeriss (default: fpga)")
    p.add_argument(
        "--proposer",
        default="tpe",
        help=f"{', '.join(PROPOSERS)}: pelnas is the co-evolution engine, the -no* its ablations, the rest Optuna baselines (default: tpe)",
    )
    p.add_argument("--budget", type=int, default=100, help="accuracy queries to spend (default: 100)")
    p.add_argument("--seed", type=int, default=0, help="random seed (default: 0)")
    p.add_argument("--study", default=None, help="study name; an existing study with the same options is resumed")
    p.add_argument("--json", action="store_true", help="print one JSON object instead of tables")
    p.add_argument(
        "--workers",
        type=int,
        default=1,
        help="worker processes on this machine (default: 1); more can join from anywhere with `coevo worker --study NAME`",
    )
    cli_runs.add_timing_arguments(p)
    p.add_argument(
        "--kb-from",
        default=None,
        metavar="STUDY_OR_FILE",
        help="pelnas: seed the knowledge base from another study's (same storage) or an export file (coevo kb export)",
    )
    _add_reasoner_args(p)


def _price(text: str) -> tuple[float, float]:
    try:
        a, b = (float(x) for x in text.split(","))
    except ValueError:
        raise argparse.ArgumentTypeError("give input,output USD per million tokens, e.g. 0.15,0.60") from None
    return a, b


def _add_reasoner_args(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("reasoner (pelnas proposers)")
    g.add_argument(
        "--reasoner",
        default="auto",
        choices=("auto", "offline", "llm"),
        help="auto: the LLM when COEVO_LLM_BASE_URL and COEVO_LLM_MODEL are set, else offline (no LLM)",
    )
    g.add_argument("--llm-base-url", default=None, help="OpenAI-compatible endpoint (env COEVO_LLM_BASE_URL)")
    g.add_argument("--llm-model", default=None, help="model name (env COEVO_LLM_MODEL)")
    g.add_argument("--llm-api-key", default=None, help="API key (env OPENAI_API_KEY); local servers need none")
    g.add_argument("--llm-price", type=_price, default=None, help="input,output USD per million tokens, for cost accounting")
    g.add_argument("--llm-timeout", type=float, default=60.0, help="seconds per LLM request (default: 60)")
    g.add_argument("--round-size", type=int, default=None, help="pelnas: proposals per co-evolution round (default: 20)")
    g.add_argument("--kb-tokens", type=int, default=None, help="pelnas: token budget of the heuristics in each request (default: 600)")


def _proposer_options(args: argparse.Namespace, proposer: str) -> dict[str, object] | None:
    """Build the reasoner for pelnas proposers, check an LLM endpoint answers, and say which reasoner runs."""
    if not proposer.startswith("pelnas"):
        if getattr(args, "kb_from", None):
            raise UserInputError(f"--kb-from needs a pelnas proposer (a knowledge base); {proposer} has none")
        return None
    from agent.reasoners import make_reasoner

    if args.round_size is not None and args.round_size < 1:
        raise UserInputError(f"--round-size must be at least 1, got {args.round_size}")
    reasoner = make_reasoner(
        args.reasoner,
        base_url=args.llm_base_url,
        model=args.llm_model,
        api_key=args.llm_api_key,
        storage=args.storage,
        price_per_mtok=args.llm_price,
        timeout_s=args.llm_timeout,
    )
    if getattr(args, "kb_from", None):
        from knowledge.exchange import records_from
        from knowledge.store import KnowledgeStore

        records_from(KnowledgeStore.for_storage(args.storage), args.kb_from)  # a bad source fails before the study is created
    _announce(reasoner)
    return {"reasoner": reasoner, "round_size": args.round_size, "kb_tokens": args.kb_tokens, "kb_from": getattr(args, "kb_from", None)}


def _announce(reasoner: Any) -> None:
    """Say which reasoner runs; an LLM endpoint is asked whether it answers before anything starts."""
    from agent.reasoners import OFFLINE_NOTE

    if reasoner.label.startswith("offline"):
        err.print(OFFLINE_NOTE)
        return
    with err.status(f"checking the LLM endpoint {reasoner.base_url} ..."):
        line = reasoner.check_endpoint()
    err.print(f"reasoner: {reasoner.label} ({line})")


def _progress() -> Progress:
    """The bar of searches and benches: ``detail`` says done/total and the HV ratio (or a share, for long work)."""
    return Progress(
        TextColumn("[bold]{task.description}"),
        BarColumn(),
        TextColumn("{task.fields[detail]}"),
        TimeElapsedColumn(),
        TextColumn("eta"),
        TimeRemainingColumn(),
        console=err,
        transient=True,
        disable=not err.is_terminal,
    )


def _detail(done: int, total: int, hv: float | str | None) -> str:
    shown = f"{hv:.4f}" if isinstance(hv, float) else (hv or "-")
    return f"{done}/{total} · HV ratio {shown}"


@contextmanager
def _long_work(bar: Progress) -> Iterator[None]:
    """Show what a search step reports while it runs long (one-off reference scoring, say): its own bar and an estimate.

    The search's bar gets a second task for the duration; without a terminal each kind of
    work is announced once on stderr instead.
    """
    from search.work_progress import listening

    tasks: dict[str, Any] = {}

    def listener(what: str, fraction: float) -> None:
        kind = what.split(":")[0]
        if kind not in tasks:
            if not err.is_terminal:
                err.print(f"{kind} ...", soft_wrap=True)
            tasks[kind] = bar.add_task(what, total=1.0, detail="")
        bar.update(tasks[kind], description=what, completed=fraction, detail=f"{fraction:.0%}")
        if fraction >= 1.0:
            bar.remove_task(tasks[kind])

    with listening(listener):
        yield


def cmd_search(args: argparse.Namespace) -> int:
    from search.problems import make_problem
    from search.proposers import get_proposer
    from search.runner import Progress as SearchProgress
    from search.runner import check_seed, run_search

    if args.workers < 1:
        raise UserInputError(f"--workers must be at least 1, got {args.workers}")
    if args.budget <= 0:
        raise UserInputError(f"budget must be a positive number of evaluations, got {args.budget}")
    check_seed(args.seed)
    settings = cli_runs.worker_settings(args)
    problem = make_problem(args.problem, _problem_options(args, device=args.device))
    proposer = get_proposer(args.proposer, _proposer_options(args, args.proposer))
    others = cli_runs.WorkerProcesses(args, args.workers - 1)
    with _progress() as bar:
        name = f"search {args.proposer}" + (f", {args.workers} workers" if args.workers > 1 else "")
        task = bar.add_task(name, total=args.budget, detail=_detail(0, args.budget, None))

        def update(p: SearchProgress) -> None:
            bar.update(task, total=p.budget, completed=p.queries, detail=_detail(p.queries, p.budget, p.hv_ratio))

        with _long_work(bar):
            try:
                result = run_search(
                    problem,
                    proposer,
                    budget=args.budget,
                    seed=args.seed,
                    storage=args.storage,
                    study_name=args.study,
                    on_progress=update,
                    settings=settings,
                    on_open=others.start,
                )
            finally:
                failed = others.wait()
    if failed:
        err.print(f"[yellow]{failed} worker process(es) exited with an error; rerun the same command to finish[/]")
    code = _print_search(args, problem, result)
    return 130 if result.stopped and "signal" in result.stopped else code


def _print_search(args: argparse.Namespace, problem: Any, result: Any) -> int:
    if args.json:
        print(result.to_json())
        return 0
    for note in result.notes:
        err.print(f"[yellow]note:[/] {note}", soft_wrap=True)
    if result.stopped:
        err.print(f"[yellow]{result.stopped}[/]" + ("; rerun the same command to resume" if "signal" in result.stopped else ""))
    summary = Table(title=f"study {result.study}", show_header=False)
    for key in ("problem", "proposer", "reasoner", "seed", "evaluations", "trials", "hv_ratio", "igd", "front_recall", "wall_s", "storage"):
        value = getattr(result, key)
        summary.add_row(key, f"{value:.4f}" if isinstance(value, float) and key != "wall_s" else str(value))
    out.print(summary)
    from agent.tables import print_design_table

    label = problem.design_label
    acc, lat = problem.front_objectives
    print_design_table(
        out,
        f"found front ({len(result.front)} non-dominated of {result.evaluations} evaluated)",
        [lat, acc, "point id"],
        [[f"{row[lat]:.4g}", f"{row[acc]:.2f}", str(row["point_id"])] for row in result.front],
        [str(row[label]) for row in result.front],
        design_header=label,
    )
    return 0


# ---------------------------------------------------------------- bench


def _csv(text: str) -> tuple[str, ...]:
    return tuple(x.strip() for x in text.split(",") if x.strip())


def _add_bench_args(p: argparse.ArgumentParser) -> None:
    _add_problem_args(p)
    p.add_argument(
        "--devices",
        type=_csv,
        default=None,
        help="comma-separated run groups: NB201 devices (default fpga); clusters (pipeline); traffic patterns (noc); models (compress)",
    )
    p.add_argument(
        "--proposers",
        type=_csv,
        default=("random", "nsga2", "tpe"),
        help=f"comma-separated, of {', '.join(PROPOSERS)} (default: random,nsga2,tpe)",
    )
    p.add_argument("--budget", type=int, default=100, help="accuracy queries per run (default: 100)")
    p.add_argument("--seeds", type=int, default=3, help="seeds 0..N-1 per device and proposer (default: 3)")
    p.add_argument("--jobs", type=int, default=1, help="runs in parallel, as processes (default: 1)")
    p.add_argument("--out", type=Path, default=Path("bench-out"), help="output folder (default: ./bench-out)")
    p.add_argument("--json", action="store_true", help="print the per-run results as JSON lines")
    _add_reasoner_args(p)


def cmd_bench(args: argparse.Namespace) -> int:
    from agent.reasoners import OFFLINE_NOTE, llm_settings
    from search.bench import BenchSpec, axis, axis_default, run_bench

    options: dict[str, Any] = {k: v for k, v in _problem_options(args).items() if v is not None and k != "storage"}
    reasoner = None
    if any(p.startswith("pelnas") for p in args.proposers):
        base_url, model, api_key = llm_settings(args.llm_base_url, args.llm_model, args.llm_api_key)
        kind = args.reasoner if args.reasoner != "auto" else ("llm" if base_url and model else "offline")
        err.print(OFFLINE_NOTE if kind == "offline" else f"reasoner: llm:{model}")
        reasoner = {
            "kind": kind,
            "base_url": base_url,
            "model": model,
            "api_key": api_key,
            "price_per_mtok": args.llm_price,
            "timeout_s": args.llm_timeout,
        }
    spec = BenchSpec(
        args.problem,
        options,
        args.devices or (str(options.get(axis(args.problem)) or axis_default(args.problem)),),
        args.proposers,
        tuple(range(args.seeds)) if args.seeds > 0 else (),
        args.budget,
        args.storage,
        args.jobs,
        reasoner,
    )
    spec.validate()
    total = len(spec.devices) * len(spec.proposers) * len(spec.seeds)
    with _progress() as bar:
        task = bar.add_task("bench runs", total=total, detail=f"0/{total}")
        done = [0]

        def finished(r: Any) -> None:
            done[0] += 1
            bar.update(task, advance=1, detail=f"{done[0]}/{total} · last: {_bench_progress(r, args.problem)}")

        report = run_bench(spec, args.out, on_result=finished)
    if args.json:
        for r in report.results:
            print(r.to_json())
    else:
        from rich.markdown import Markdown

        out.print(Markdown(report.markdown))
        out.print("wrote: " + ", ".join(str(p) for p in report.files))
    return 0


def _bench_progress(r: Any, problem: str) -> str:
    """The progress bar's note on a finished bench run (problems without an exact front have no HV ratio)."""
    from search.bench import axis

    hv = "no exact front" if r.hv_ratio is None else f"HV ratio {r.hv_ratio:.4f}"
    return f"{hv} ({r.proposer} {r.problem.get(axis(problem))} s{r.seed})"


# ---------------------------------------------------------------- tools


def _add_tools_args(p: argparse.ArgumentParser) -> None:
    sub = p.add_subparsers(dest="tools_command", required=True, metavar="{list,describe,run}")
    ls = sub.add_parser("list", help="list the registered tools")
    ls.add_argument("--json", action="store_true")
    d = sub.add_parser("describe", help="a tool's description and argument schema")
    d.add_argument("name")
    r = sub.add_parser("run", help="run a tool with JSON arguments")
    r.add_argument("name")
    r.add_argument("--args", default="{}", help="arguments as a JSON object")


def cmd_tools(args: argparse.Namespace) -> int:
    from tools import REGISTRY, llm_name
    from tools.adapters import run_from_cli

    if args.tools_command == "list":
        if args.json:
            print(
                json.dumps(
                    [
                        {"name": t.name, "llm_name": llm_name(t.name), "description": t.description, "long_running": t.long_running}
                        for t in REGISTRY
                    ]
                )
            )
            return 0
        table = Table(title=f"{len(REGISTRY)} tools")
        table.add_column("name")
        table.add_column("description")
        for t in REGISTRY:
            table.add_row(t.name, t.description)
        out.print(table)
        return 0
    tool = REGISTRY.get(args.name)
    if args.tools_command == "describe":
        print(
            json.dumps(
                {
                    "name": tool.name,
                    "llm_name": llm_name(tool.name),
                    "description": tool.description,
                    "long_running": tool.long_running,
                    "example": tool.example,
                    "schema": tool.schema(),
                },
                indent=2,
            )
        )
        return 0
    if not tool.long_running:
        print(json.dumps(run_from_cli(tool, args.args), indent=2))
        return 0
    from rich.progress import BarColumn, Progress, TaskProgressColumn, TextColumn, TimeElapsedColumn

    from search.work_progress import listening

    bar = Progress(TextColumn("{task.description}"), BarColumn(), TaskProgressColumn(), TimeElapsedColumn(), console=err, transient=True)
    with bar:
        task = bar.add_task(tool.name, total=1.0)
        with listening(lambda what, done: bar.update(task, description=what, completed=done)):
            value = run_from_cli(tool, args.args)
    print(json.dumps(value, indent=2))
    return 0


def _add_proxies_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--cells", type=int, default=1000, help="random cells to score (default: 1000)")
    p.add_argument("--dataset", default="cifar10", help="accuracy to compare against (default: cifar10)")
    p.add_argument("--storage", default=None, help="where scores are cached (default: sqlite:///runs/coevo.sqlite3)")
    p.add_argument("--jobs", type=int, default=1, help="processes (default: 1)")
    p.add_argument("--seed", type=int, default=0, help="sample seed (default: 0)")
    p.add_argument("--out", type=Path, default=Path("bench-out/proxies"), help="output folder")


def cmd_proxies(args: argparse.Namespace) -> int:
    from rich.markdown import Markdown

    from search.zero_cost_bench import run_proxies

    report = run_proxies(cells=args.cells, dataset=args.dataset, storage=args.storage, out=args.out, jobs=args.jobs, seed=args.seed)
    out.print(Markdown(report.markdown))
    return 0


def cmd_chat(args: argparse.Namespace) -> int:
    from agent.chat.repl import run

    return run(args)


COMMANDS: dict[str, Command] = {
    "chat": Command("interactive session: questions to an LLM agent over the tools, or slash commands", add_chat_arguments, cmd_chat),
    "search": Command("run or resume one search", _add_search_args, cmd_search),
    "worker": Command(
        "join a search on shared storage and evaluate until its budget is done", cli_runs.add_worker_arguments, cli_runs.run_worker
    ),
    "runs": Command("searches in a storage: progress, workers alive, HV so far", cli_runs.add_runs_arguments, cli_runs.run_runs),
    "bench": Command("proposers x devices x seeds, with tables and plots", _add_bench_args, cmd_bench),
    "tools": Command("list, describe and run registered tools", _add_tools_args, cmd_tools),
    "kb": Command("knowledge bases: list, show, accept, reject, export, import, report, ablate", cli_kb.add_arguments, cli_kb.run),
    "proxies": Command("zero-cost proxy quality (Spearman rho) and CPU cost on random NB201 cells", _add_proxies_args, cmd_proxies),
}
"""The table of commands: adding a command is adding an entry."""


def build_parser() -> argparse.ArgumentParser:
    """The argument parser for every command in :data:`COMMANDS`."""
    parser = argparse.ArgumentParser(prog="coevo", description="LLM-agent driven, hardware-aware design search.")
    parser.add_argument("--version", action="version", version=f"coevo {_version()}")
    sub = parser.add_subparsers(dest="command", required=True, metavar="{" + ",".join(COMMANDS) + "}")
    for name, command in COMMANDS.items():
        command.add_arguments(sub.add_parser(name, help=command.help, description=command.help))
    return parser


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("coevo")
    except PackageNotFoundError:  # run from a checkout that is not installed
        return "unknown (not installed)"


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``coevo`` console script.

    Exit status: 0 done; 2 an error in what was asked (one line on stderr, no traceback);
    130 interrupted (rerun to resume); 141 the reader of stdout went away (``| head``), quietly.
    """
    args = build_parser().parse_args(argv)
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    try:
        return COMMANDS[args.command].run(args)
    except CoevoError as exc:
        err.print(f"[red]error:[/] {exc}", soft_wrap=True)
        return 2
    except KeyboardInterrupt:
        err.print("interrupted; rerun the same command to resume from storage")
        return 130
    except BrokenPipeError:
        # stdout's reader closed early: say nothing, and keep Python from complaining while it
        # flushes stdout at exit (as a Unix tool killed by SIGPIPE, status 128 + 13)
        with suppress(OSError):
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 141


if __name__ == "__main__":
    sys.exit(main())
