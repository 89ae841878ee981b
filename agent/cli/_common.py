"""What several ``coevo`` commands share: consoles, the command record, problem-option flags, reasoner flags, progress bars.

Problem options are never written here: each problem declares them once (its ``Options``
model) and :func:`add_problem_arguments` turns them into flags of the problem named by
``--problem`` (or the default), so ``coevo search --problem noc --help`` shows the noc options.
Nor are the search's defaults: the flags leave what is not given to
:class:`~coevo.search.config.SearchConfig`, and :func:`search_config` is the one place flags
become a configuration (commands below this module get objects, never the Namespace).
"""

from __future__ import annotations

import argparse
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, TypeVar, get_args

from coevo.agent.cli._console import err, out
from coevo.agent.cli._progress import Reporter
from coevo.search.config import (
    DEFAULT_KB_FROM_USE,
    DEFAULT_LLM_TIMEOUT_S,
    DEFAULT_PROBLEM,
    FLAGS,
    KB_FROM_USES,
    LLM_TIMEOUT_HELP,
    EngineOptions,
    ReasonerConfig,
    ReasonerKind,
    Screen,
    SearchConfig,
)
from coevo.search.errors import UserInputError
from coevo.search.problem import Problem
from coevo.search.problems import describe_options, problem_names
from coevo.search.storage import DatabaseTimeouts
from coevo.search.workers import Progress, WorkerSettings
from coevo.tools import parse_arguments

__all__ = ["err", "out"]  # re-exported: the consoles live in agent.cli._console

OPTION_DEST = "problem_option__"
T = TypeVar("T")


# ---------------------------------------------------------------- problems


def peek_problem(argv: Sequence[str]) -> str:
    """The ``--problem`` value of a command line (the default when none), read before the parser exists."""
    for k, arg in enumerate(argv):
        if arg == "--problem" and k + 1 < len(argv):
            return argv[k + 1]
        if arg.startswith("--problem="):
            return arg.split("=", 1)[1]
    return DEFAULT_PROBLEM


def add_problem_argument(p: argparse.ArgumentParser) -> None:
    """``--problem`` (a name, ``module:Class`` or ``path/to/file.py:Class``) and ``--options JSON``."""
    p.add_argument(
        "--problem",
        default=DEFAULT_PROBLEM,
        help=f"the problem: {', '.join(problem_names())}, or your own as path/to/file.py:Class or module:Class (default: "
        f"{DEFAULT_PROBLEM}); `coevo problems list` describes them",
    )
    p.add_argument("--options", default=None, metavar="JSON", help="problem options as a JSON object (the option flags below win)")


def add_problem_arguments(p: argparse.ArgumentParser, cls: type[Problem] | None) -> None:
    """One flag per option of problem ``cls``, from its declaration (type, default, bounds or choices, help).

    A flag that would clash with a flag of the command is prefixed with the problem's name.
    """
    if cls is None:
        return
    taken = {s for action in p._actions for s in action.option_strings}
    g = p.add_argument_group(f"options of problem {cls.name} (another --problem shows its own)")
    for row in describe_options(cls):
        flag = "--" + row["name"].replace("_", "-")
        if flag in taken:
            flag = f"--{cls.name}-{row['name'].replace('_', '-')}"
        default = row["default"]
        limits = ", ".join(
            f"{'>=' if k == 'ge' else '>' if k == 'gt' else '<=' if k == 'le' else '<'} {v}" for k, v in (row["bounds"] or {}).items()
        )
        text = f"{row['help']} (default: {default}{'; ' + limits if limits else ''})"
        kwargs: dict[str, Any] = {"dest": OPTION_DEST + row["name"], "default": None, "help": text}
        if row["type"] == "bool":
            kwargs["action"] = argparse.BooleanOptionalAction
        elif row["choices"]:
            kwargs["choices"] = row["choices"]
            kwargs["type"] = type(row["choices"][0])
        else:
            kwargs["type"] = {"int": int, "float": float}.get(row["type"], str)
            kwargs["metavar"] = row["name"].upper()
        g.add_argument(flag, **kwargs)


def problem_values(args: argparse.Namespace) -> dict[str, Any]:
    """The problem options given on the command line: ``--options`` JSON, then the option flags over it."""
    values: dict[str, Any] = {}
    if getattr(args, "options", None):
        given, fault = parse_arguments(args.options)  # read as a tool call's arguments are
        if given is None:
            raise UserInputError(f"--options is {fault}; e.g. --options '{{\"k\": 4}}'")
        values.update(given)
    for key, value in vars(args).items():
        if key.startswith(OPTION_DEST) and value is not None:
            values[key.removeprefix(OPTION_DEST)] = value
    return values


def out_folder(text: str) -> Path:
    """An ``--out`` folder (argparse type): an empty one is refused, not read as the current folder."""
    if not text.strip():
        raise argparse.ArgumentTypeError("needs a folder, e.g. --out report")
    return Path(text)


def stopped_by_signal(stopped: str | None) -> bool:
    """Whether a run's ``stopped`` reason is a signal (Ctrl-C, SIGTERM): the command then exits 130 and says to rerun."""
    return stopped is not None and "signal" in stopped


# ---------------------------------------------------------------- reasoners


def _price(text: str) -> tuple[float, float]:
    from coevo.agent.llm_client import Price

    try:
        price = Price.parse(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None
    return price.input_per_mtok, price.output_per_mtok


def engine_defaults() -> dict[str, Any]:
    """The co-evolution engine's own defaults (its constructor's), which the engine flags leave in place when not given."""
    import inspect

    from coevo.agent.coevolution import CoevolutionProposer

    params = inspect.signature(CoevolutionProposer).parameters
    return {name: params[name].default for name in EngineOptions.model_fields if name in params}


def add_reasoner_arguments(p: argparse.ArgumentParser) -> None:
    """Flags of the reasoner of proposers that take one (the co-evolution engine)."""
    g = p.add_argument_group("reasoner (pelnas proposers)")
    g.add_argument(
        "--reasoner",
        default=None,
        choices=get_args(ReasonerKind),
        help="auto: the LLM when COEVO_LLM_BASE_URL and COEVO_LLM_MODEL are set, else offline (no LLM)",
    )
    g.add_argument(
        "--llm-base-url",
        default=None,
        help="OpenAI-compatible endpoint (env COEVO_LLM_BASE_URL); 'simulated' serves simulated reasoners (models sim-random, "
        "sim-mutate, sim-oracle-<noise>: no LLM) on loopback",
    )
    g.add_argument("--llm-model", default=None, help="model name (env COEVO_LLM_MODEL); several with weights, a:3,b:1, share the proposals")
    g.add_argument(
        "--llm-api-key", default=None, help="API key (env OPENAI_API_KEY, preferred: a flag shows in ps); local servers need none"
    )
    g.add_argument("--llm-price", type=_price, default=None, help="input,output USD per million tokens, for cost accounting")
    g.add_argument("--llm-timeout", type=float, default=None, help=f"{LLM_TIMEOUT_HELP} (default: {DEFAULT_LLM_TIMEOUT_S:g})")
    g.add_argument(
        "--tools",
        choices=("on", "off"),
        default=None,
        help="LLM reasoner: call the round's cheap read-only tools (free objectives, study front, KB evidence) while proposing",
    )
    g.add_argument(
        "--screen",
        choices=get_args(Screen),
        default=None,
        help="LLM reasoner: ask for 3x the quota and pay for what the surrogate ranks best by expected HV among the LLM's "
        "candidates and the engine's own (on), the LLM's only (llm), or pay for the LLM's first picks (off)",
    )
    engine = engine_defaults()
    g.add_argument(
        "--round-size", type=int, default=None, help=f"pelnas: proposals per co-evolution round (default: {engine['round_size']})"
    )
    g.add_argument(
        "--kb-tokens",
        type=int,
        default=None,
        help=f"pelnas: token budget of the heuristics in each request (default: {engine['kb_tokens']})",
    )


def add_kb_from_arguments(p: argparse.ArgumentParser) -> None:
    """``--kb-from`` and ``--kb-from-use`` (``coevo search``, and ``coevo kb``, whose default study name they shape)."""
    p.add_argument(
        "--kb-from",
        default=None,
        metavar="STUDY_OR_FILE",
        help="pelnas: seed the search from another study (same storage: its paid evaluations feed the predictor; of this "
        "problem or, for a composed one such as nb201-accel, of the part it predicts, nb201; of another part with the "
        "same parameters, such as quant for deploy-cnn, its heuristics only) or an export file (coevo kb export: its "
        "heuristics); see --kb-from-use",
    )
    p.add_argument(
        "--kb-from-use",
        choices=KB_FROM_USES,
        default=None,
        help="what --kb-from seeds: its paid evaluations (the predictor), its heuristics (the knowledge base) or both "
        f"(default: {DEFAULT_KB_FROM_USE}; heuristics for a source that paid for nothing, such as an export file, "
        "or whose values label no joint design, such as a quant study for deploy-cnn)",
    )


def reasoner_flags(args: argparse.Namespace) -> ReasonerConfig:
    """The reasoner the flags ask for (:class:`ReasonerConfig`; what is not given is left to it and the environment).

    Raises:
        UserInputError: a bad value, naming its flag.
    """
    tools = None if args.tools is None else args.tools == "on"
    values: dict[str, Any] = {"kind": args.reasoner, "base_url": args.llm_base_url, "model": args.llm_model, "api_key": args.llm_api_key}
    values |= {"price_per_mtok": args.llm_price, "timeout_s": args.llm_timeout, "tools": tools}
    return ReasonerConfig.create(names=FLAGS, **values)


def engine_flags(args: argparse.Namespace) -> EngineOptions:
    """The co-evolution engine's options the flags give (None: the engine's default).

    Raises:
        UserInputError: a bad value, naming its flag.
    """
    values = {"round_size": args.round_size, "kb_tokens": args.kb_tokens, "screen": args.screen}
    values |= {"kb_from": getattr(args, "kb_from", None), "kb_from_use": getattr(args, "kb_from_use", None)}
    return EngineOptions.create(names=FLAGS, **values)


def ignored_reasoner_flags(args: argparse.Namespace) -> list[str]:
    """The reasoner flags given on the command line (``--reasoner llm``, ``--llm-model m``, ...): for a proposer without a
    reasoner they are said to be ignored rather than dropped in silence."""
    flags = [flag for field, flag in FLAGS.items() if field.startswith("reasoner.")]  # the one table of flag names
    return [flag for flag in flags if getattr(args, flag.lstrip("-").replace("-", "_"), None) is not None]


def search_config(args: argparse.Namespace) -> SearchConfig:
    """The search the flags of ``coevo search`` describe: the one place they become a :class:`SearchConfig`.

    The reasoner flags apply to proposers that take a reasoner only (others ignore them).

    Raises:
        UserInputError: a bad value, naming its flag and what it may be.
    """
    from coevo.search.proposers import takes_reasoner

    reasoner = reasoner_flags(args) if takes_reasoner(args.proposer) else None
    if reasoner is None and (given := ignored_reasoner_flags(args)):
        err.print(f"note: {', '.join(given)} ignored: proposer {args.proposer!r} takes no reasoner", soft_wrap=True, markup=False)
    # budget and eval_timeout_s: commands that only name a search (coevo kb) have no such flags and leave the defaults
    values: dict[str, Any] = {"problem": args.problem, "options": problem_values(args), "proposer": args.proposer}
    values |= {"budget": getattr(args, "budget", None), "eval_timeout_s": getattr(args, "eval_timeout", None)}
    values |= {"seed": args.seed, "storage": args.storage, "study": args.study, "reasoner": reasoner, "engine": engine_flags(args)}
    return SearchConfig.create(names=FLAGS, **values)


def announce(reasoner: Any) -> None:
    """Say which reasoner runs; an LLM endpoint is asked whether it answers before anything starts."""
    from coevo.agent.reasoners import OFFLINE_NOTE

    if reasoner.label.startswith("offline"):
        err.print(getattr(reasoner, "note", OFFLINE_NOTE))
        return
    with err.status(f"checking the LLM endpoint {reasoner.base_url} ..."):
        line = reasoner.check_endpoint()
    err.print(f"reasoner: {reasoner.label} ({line})")


# ---------------------------------------------------------------- workers


def add_timing_arguments(p: argparse.ArgumentParser) -> None:
    """Heartbeat and fault-tolerance options shared by ``worker`` and ``search``."""
    d = WorkerSettings()
    g = p.add_argument_group("workers")
    g.add_argument(
        "--heartbeat", type=int, default=d.heartbeat_s, help=f"seconds between heartbeats of a running trial (default: {d.heartbeat_s})"
    )
    g.add_argument("--grace", type=int, default=d.grace_s, help=f"a trial silent this long is failed and re-queued (default: {d.grace_s})")
    g.add_argument(
        "--db-patience",
        type=float,
        default=d.patience_s,
        help=f"seconds a worker retries a database that is away (refused, silent, dropped, locked) before it stops "
        f"(default: {d.patience_s:g})",
    )
    g.add_argument(
        "--db-timeout",
        type=float,
        default=d.timeouts.request_s,
        help="seconds one database request may take (connecting, a statement, silence from the server, a SQLite lock) "
        f"before it fails and is retried (default: {d.timeouts.request_s:g})",
    )
    g.add_argument(
        "--eval-timeout",
        type=float,
        default=None,
        metavar="SECONDS",
        help="seconds one evaluation may take before its trial fails as timed out, paid for (inf: no limit; default: the "
        f"problem's own, {Problem.eval_timeout_s:g} s unless it declares another)",
    )


def worker_settings(args: argparse.Namespace) -> WorkerSettings:
    """The :class:`search.workers.WorkerSettings` of ``--heartbeat``, ``--grace``, ``--db-patience`` and ``--db-timeout``.

    Raises:
        UserInputError: values no worker can keep (checked by :class:`WorkerSettings` itself).
    """
    timeouts = DatabaseTimeouts(request_s=args.db_timeout)
    return WorkerSettings(heartbeat_s=args.heartbeat, grace_s=args.grace, patience_s=args.db_patience, timeouts=timeouts)


# ---------------------------------------------------------------- progress


def progress_bar() -> Reporter:
    """The progress of searches and benches on stderr (:class:`agent.cli._progress.Reporter`): a bar, or plain lines when piped."""
    return Reporter()


def search_progress(name: str, budget: int, work: Callable[[Callable[[Progress], None]], T]) -> T:
    """``work(on_progress)``, a search or a worker, with its progress on stderr and whatever long work it reports.

    ``on_progress`` takes the worker's :class:`search.workers.Progress` after each paid evaluation.
    """
    with progress_bar() as bar, bar.listening():
        task = bar.add_task(name, total=budget, detail=detail(0, budget, None))

        def update(p: Progress) -> None:
            if p.idle:  # nothing was left to evaluate (the run's note says so): a 0/600 that never moved would mislead
                bar.discard(task)
                return
            bar.update(task, total=p.budget, completed=p.queries, detail=detail(p.queries, p.budget, p.hv_ratio))

        return work(update)


def detail(done: int, total: int, hv: float | str | None) -> str:
    """``done/total · HV ratio x`` for the bar."""
    shown = f"{hv:.4f}" if isinstance(hv, float) else (hv or "-")
    return f"{done}/{total} · HV ratio {shown}"
