"""Slash commands of ``coevo chat``: they work with or without an LLM, over the same registry.

``/help``, ``/tools``, ``/run TOOL {json}``, ``/search ARGS`` (as ``coevo search``), ``/kb ARGS``
(as ``coevo kb``), ``/runs``, ``/session``, ``/exit``. A bad command or bad arguments print
what to type instead; the session goes on. Every command and its outcome is recorded.

Every command shows its result on the context's console and returns it as data
(:attr:`Outcome.value`), which ``coevo chat --once ... --json`` prints as its one JSON
object. ``/search`` and ``/kb`` run a ``coevo`` command through the context's
:data:`agent.chat.command_line.CommandLine`, which the CLI hands in (:func:`agent.cli.chat.in_process`): this
module never imports the CLI, which sits above it.
"""

from __future__ import annotations

import json
import shlex
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

from rich.console import Console
from rich.markup import escape
from rich.status import Status

from coevo.agent.chat.command_line import CommandLine
from coevo.agent.chat.store import Event, SessionStore
from coevo.agent.tables import Column, print_table, render_value
from coevo.search.errors import CoevoError
from coevo.tools import CallPolicy, Confirm, Registry, Tool, ToolResult, call_tool


@dataclass
class CommandContext:
    """What a command may use.

    Attributes:
        run_policy: the policy of ``/run`` calls (the user's own: nothing restricted; tools that
            ask first are asked on the terminal, and under ``--once`` refused unless ``--yes``).
            None: run them.
        cli: runs the ``coevo`` commands behind ``/search`` and ``/kb``; None: those two
            commands say they are not available here.
        kept: whether the session is stored (False: ``--once`` without ``--session``, whose
            session lives in memory for the one call and cannot be resumed).
    """

    registry: Registry
    store: SessionStore
    session: str
    storage: str | None
    console: Console
    run_policy: CallPolicy | None = None
    cli: CommandLine | None = None
    kept: bool = True


@dataclass
class Outcome:
    """A command's result: ``ok``, a one-line summary for the record, whether to leave, and its data (JSON-friendly)."""

    ok: bool
    summary: str
    exit: bool = False
    value: Any = None


Handler = Callable[[CommandContext, str], Outcome]


def _help(ctx: CommandContext, rest: str) -> Outcome:
    rows = [[usage or name, text] for name, (_, usage, text) in COMMANDS.items()]
    print_table(ctx.console, "commands", [Column("command"), Column("help", text=True)], rows, show_header=False)
    ctx.console.print("Anything else is a question for the LLM (when one is configured).")
    value = {
        "commands": [{"command": name, "usage": usage, "help": text} for name, (_, usage, text) in COMMANDS.items()],
        "aliases": ALIASES,
    }
    return Outcome(True, "help", value=value)


def _tools(ctx: CommandContext, rest: str) -> Outcome:
    cells = []
    rows = []
    for t in ctx.registry:
        asks = "yes" if t.long_running or t.confirm else "when it would load your code" if t.may_load_code else ""
        cells.append([t.name, asks, t.description])
        rows.append(
            {
                "name": t.name,
                "long_running": t.long_running,
                "confirm": t.confirm,
                "writes": sorted(t.writes),
                "reads": sorted(t.reads),
                "loads_code": list(t.loads_code),
                "description": t.description,
            }
        )
    columns = [Column("name"), Column("asks first", text=True), Column("description", text=True)]
    print_table(ctx.console, f"{len(ctx.registry)} tools", columns, cells)
    return Outcome(True, f"{len(ctx.registry)} tools", value=rows)


def _asked_without(status: Status, confirm: Confirm) -> Confirm:
    """``confirm`` with the spinner stopped while it asks (a question under a live spinner is redrawn over)."""

    def asked(tool: Tool, args: dict[str, Any]) -> bool:
        status.stop()
        try:
            return confirm(tool, args)
        finally:
            status.start()

    return asked


def _run(ctx: CommandContext, rest: str) -> Outcome:
    name, _, raw = rest.strip().partition(" ")
    if not name:
        return Outcome(False, 'usage: /run TOOL {json arguments}, e.g. /run nb201.query {"arch": "..."}; /tools lists the tools')
    tool = ctx.registry.get(name)  # unknown names raise with the list of tools
    with ctx.console.status(f"running {tool.name} ...") as status:
        policy = ctx.run_policy
        if policy is not None and policy.confirm is not None:
            policy = replace(policy, confirm=_asked_without(status, policy.confirm))
        result = call_tool(tool, raw.strip() or "{}", policy=policy)
    render_value(ctx.console, result.value, notes=result.messages)
    for m in result.messages:
        ctx.console.print(f"note: {m}", style="dim", markup=False, soft_wrap=True)  # a note's [brackets] are text
    return Outcome(True, f"{tool.name}: ok", value=as_data(result))  # a failing tool raised: dispatch records the error


def as_data(result: ToolResult) -> dict[str, Any]:
    """``result`` as ``coevo tools run --json`` prints it, as data: :meth:`ToolResult.to_strict_json` read back.

    Its one rounding (floats to :data:`search.strict_json.SIGNIFICANT_DIGITS` significant digits, a NaN as null
    with a note), so ``/run`` under ``--once --json`` gives the numbers the command line gives.
    """
    data: dict[str, Any] = json.loads(result.to_strict_json(indent=None))
    return data


def _cli(command: str) -> Handler:
    """A handler running ``coevo COMMAND ARGS`` through the context's :data:`CommandLine`, on the session's storage."""

    def run(ctx: CommandContext, rest: str) -> Outcome:
        if ctx.cli is None:
            return Outcome(False, f"/{command} runs `coevo {command}`, which this session was not given; run `coevo {command}` instead")
        argv = [command, *shlex.split(rest)]
        if ctx.storage and "--storage" not in argv:
            argv += ["--storage", ctx.storage]
        done = ctx.cli(argv)
        if done.printed:
            ctx.console.out(done.printed, end="", highlight=False)
        said = f": {done.error}" if done.error else ""
        return Outcome(done.code == 0, f"coevo {' '.join(argv)} -> exit {done.code}{said}", value=done.value)

    return run


def _runs(ctx: CommandContext, rest: str) -> Outcome:
    result = call_tool(ctx.registry.get("studies.list"), {"storage": ctx.storage})
    render_value(ctx.console, result.value)
    value = as_data(result)["value"]  # rounded as `coevo tools run studies.list --json` rounds it
    return Outcome(True, f"{len(value['studies'])} studies", value=value)


def _session(ctx: CommandContext, rest: str) -> Outcome:
    usage = ctx.store.usage(ctx.session)
    cost = f", {usage['cost_usd']:.4f} USD" if usage["cost_usd"] is not None else ""
    tokens = f"{usage['prompt_tokens']} prompt + {usage['completion_tokens']} completion tokens{cost}"
    if not ctx.kept:
        ctx.console.print(f"this call's session (not kept: --once without --session): {usage['events']} events, {tokens}")
        return Outcome(True, "session not kept", value={"session": None, **usage, "resume": None})
    resume = f"coevo chat --session {ctx.session}"
    ctx.console.print(f"session {ctx.session}: {usage['events']} events, {tokens}; resume with `{resume}`")
    return Outcome(True, f"session {ctx.session}", value={"session": ctx.session, **usage, "resume": resume})


def _exit(ctx: CommandContext, rest: str) -> Outcome:
    if not ctx.kept:
        # the call's session lived in an in-memory store whose ids restart at S1: naming it would point at
        # whichever stored session happens to have that id
        said = "nothing to resume: this call's session is not kept (--once without --session)"
        ctx.console.print(said)
        return Outcome(True, f"exit; {said}", exit=True, value={"session": None, "resume": None})
    return Outcome(True, "exit", exit=True, value={"session": ctx.session, "resume": f"coevo chat --session {ctx.session}"})


COMMANDS: dict[str, tuple[Handler, str, str]] = {
    "/help": (_help, "/help", "this list"),
    "/tools": (_tools, "/tools", "the registered tools"),
    "/run": (_run, "/run TOOL {json}", "run a tool with JSON arguments"),
    "/search": (_cli("search"), "/search ARGS", "run a search, as `coevo search ARGS`"),
    "/kb": (
        _cli("kb"),
        "/kb ARGS",
        "knowledge bases, as `coevo kb ARGS` (list, show, accept, reject, report, ...)",
    ),
    "/runs": (_runs, "/runs", "the studies in storage"),
    "/session": (_session, "/session", "this session's id and token use"),
    "/exit": (_exit, "/exit", "leave (the session is kept, except under --once without --session; resume with --session)"),
}
ALIASES = {"/quit": "/exit", "/q": "/exit", "/?": "/help"}


def dispatch(ctx: CommandContext, line: str) -> Outcome:
    """Run one slash command line and record it (errors included) in the session."""
    word, _, rest = line.strip().partition(" ")
    word = ALIASES.get(word, word)
    entry = COMMANDS.get(word)
    if entry is None:
        outcome = Outcome(
            False, f"unknown command {word}; commands: {', '.join(COMMANDS)} (/help explains them)", value={"commands": list(COMMANDS)}
        )
    else:
        try:
            outcome = entry[0](ctx, rest)
        except CoevoError as exc:
            outcome = Outcome(False, str(exc))
        except BrokenPipeError:  # the reader of the output went away: the command line ends quietly (141), not the command
            raise
        except Exception as exc:  # a bug in a command must not end the session
            outcome = Outcome(False, f"{word} failed unexpectedly ({type(exc).__name__}: {exc}); the session goes on")
    if not outcome.ok:
        ctx.console.print(f"[red]error:[/] {escape(outcome.summary)}", soft_wrap=True)
    ctx.store.add(ctx.session, Event("command", line.strip(), {"ok": outcome.ok, "summary": outcome.summary}))
    return outcome
