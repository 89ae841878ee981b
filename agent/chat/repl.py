"""``coevo chat``: the terminal session (prompt_toolkit line editing, rich output).

With an endpoint configured, plain lines go to the agent (:mod:`agent.chat.loop`); the
answer streams in, tool calls are shown as they run, and a footer gives the turn's tokens
and cost. Without one, the session says so once, shows how to configure an endpoint, and
runs in command mode (slash commands only). Ctrl-C interrupts a turn, not the session;
Ctrl-D or ``/exit`` leaves.

``--once TEXT`` runs one turn or command and exits; tools that ask first then run only
with ``--yes``, whether the model calls them or ``/run`` does. With ``--json``, stdout
holds exactly one JSON object, ``{session, input, kind, ok, summary, value}``, whatever
happens; a failed call adds ``error`` and ``exit_code``, as every ``coevo ... --json`` error
has (:mod:`agent.json_output`). The human view of the result (a command's table, the text a
``/kb`` printed) is not printed at all, as its data is the JSON's ``value``: stderr carries
only errors and warnings. What a ``/search`` or ``/kb`` writes on stderr (the reasoner line,
progress lines) is the JSON's ``stderr`` instead; of it, only what reads as an error or a
warning is written on stderr too (:class:`HeldStderr`).
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import re
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rich.console import Console
from rich.markup import escape

from coevo.agent.chat.command_line import CliRun, CommandLine
from coevo.agent.chat.commands import CommandContext, dispatch
from coevo.agent.chat.store import Event, SessionStore
from coevo.agent.console import PipeConsole
from coevo.agent.json_output import error_fields, print_object
from coevo.agent.reasoners import ENV_API_KEY, ENV_BASE_URL, ENV_MODEL, llm_settings
from coevo.search.errors import CoevoError, UserInputError
from coevo.search.storage import check_exists, resolve_storage_url
from coevo.tools import REGISTRY, CallPolicy, Tool, asks_first, workspace

if TYPE_CHECKING:  # the agent loop and the LLM client (LangChain, openai) load when an endpoint is configured: start-up time
    from coevo.agent.chat.loop import ChatAgent, TurnResult
    from coevo.agent.llm_client import Price

READ_ONLY = frozenset({"/runs", "/kb", "/session"})
"""Slash commands that read a storage's contents: ``--once`` with one of them never creates the storage."""

HOW_TO_CONFIGURE = (
    f"no LLM endpoint configured: command mode (/help). To chat, set {ENV_BASE_URL} and {ENV_MODEL}, e.g. "
    f"a hosted API: {ENV_BASE_URL}=https://api.openai.com/v1 {ENV_MODEL}=gpt-4o-mini {ENV_API_KEY}=sk-...; "
    f"or a local server: vLLM {ENV_BASE_URL}=http://localhost:8000/v1, llama.cpp http://localhost:8080/v1, "
    f"Ollama http://localhost:11434/v1 (with {ENV_MODEL} the served model's name)."
)


class Terminal:
    """Rendering of a turn's events on a rich console."""

    def __init__(self, console: Console) -> None:
        self.console = console
        self.streaming = False
        self.status: Any = None  # the spinner shown while a tool runs

    def event(self, kind: str, data: dict[str, Any]) -> None:
        if kind == "token":
            self.console.print(data["text"], end="", markup=False, highlight=False, soft_wrap=True)
            self.streaming = True
            return
        if self.streaming:
            self.console.print()
            self.streaming = False
        if kind == "tool_start":
            args = data["args"]  # the text as the model sent it when that is not a JSON object
            shown = args if isinstance(args, str) else json.dumps(args)
            self.console.print(f"[cyan]→ {escape(data['name'])}[/] {escape(shown)}", soft_wrap=True)
            self.status = self.console.status(f"running {data['name']} ...")
            self.status.start()
        elif kind == "tool_end":
            self.stop_spinner()
            mark = {"ok": "[green]ok[/]", "declined": "[yellow]declined[/]"}.get(data["status"], "[red]error[/]")
            first = data["output"].splitlines()[0] if data["output"] else ""
            detail = f": {first[:160]}" if data["status"] == "error" else ""
            self.console.print(f"[cyan]← {escape(data['name'])}[/] {mark} ({data['seconds']:.2f} s){escape(detail)}", soft_wrap=True)

    def stop_spinner(self) -> None:
        """Stop the running tool's spinner (before asking the user something)."""
        if self.status is not None:
            self.status.stop()
            self.status = None

    def end_turn(self) -> None:
        self.stop_spinner()
        if self.streaming:
            self.console.print()
            self.streaming = False


def _price(text: str | None) -> Price | None:
    if not text:
        return None
    from coevo.agent.llm_client import Price

    try:
        return Price.parse(text)
    except ValueError as exc:
        raise UserInputError(f"--llm-price: {exc}") from None


def _footer(result: TurnResult, store: SessionStore, session: str, *, kept: bool = True) -> str:
    total = store.usage(session)
    shown = f"session {session}" if kept else "session not kept (--once without --session)"
    cost = f" · {result.cost_usd:.4f} USD" if result.cost_usd is not None else ""
    return (
        f"[dim]{result.prompt_tokens} prompt + {result.completion_tokens} completion tokens{cost} · "
        f"{len(result.tool_calls)} tool call(s) · {result.total_s:.1f} s · {shown}: "
        f"{total['prompt_tokens'] + total['completion_tokens']} tokens[/]"
    )


ONCE_STORE = "sqlite://"
"""Where ``--once`` without ``--session`` keeps its session: an in-memory database, gone when the call ends."""

ONCE_DECLINED = "coevo chat --once runs tools that ask first only with --yes"


@dataclass
class Chat:
    """One ``coevo chat`` process: its session, command context, agent (None without an endpoint) and terminal."""

    session: str
    ctx: CommandContext
    agent: ChatAgent | None
    terminal: Terminal
    model: str | None
    base_url: str | None


def _open(args: argparse.Namespace, console: Console, cli: CommandLine | None) -> Chat:
    """The session (new or resumed), the command context (running ``coevo`` commands through ``cli``) and the agent, from the options."""
    # --once without --session: the call's session lives in memory and goes with the process (scripts calling
    # --once must not pile up sessions in the study database); --session S3 records the call in S3
    _check_workspace(args.workspace)  # before anything is opened or created
    kept = args.once is None or bool(args.session)
    command = args.once.strip().split(" ")[0] if args.once is not None else None
    if args.storage is not None and command in READ_ONLY and (kept or command != "/session"):
        # one read-only command: a storage named on the command line that does not exist is an error, not
        # created for the session's record (a typo must not leave an empty database behind)
        check_exists(args.storage)
    if args.session and args.storage is not None:
        check_exists(args.storage)  # a session is resumed from a storage that holds it: a typo must not create one
    store = SessionStore(args.storage if kept else ONCE_STORE)
    base_url, model_name, api_key = llm_settings(args.llm_base_url, args.llm_model, args.llm_api_key)
    if args.session:
        store.check(args.session)
        session = str(args.session)
    else:
        session = store.create(model_name if base_url and model_name else None)
    ws = workspace(args.storage, args.workspace)
    once = args.once is not None
    # under --once nobody can be asked: --yes is the answer to every question, for /run and the model alike;
    # on a terminal the user's own /run of a tool that asks first is asked too, as the model's call is
    # (docs/chat.md: a long run or a change to stored data needs a y, whoever calls it)
    confirm_once = (lambda tool, a: bool(args.yes)) if once else None
    terminal = Terminal(console)
    own = resolve_storage_url(args.storage)  # the tools' storage when a call names none
    user_confirm = confirm_once or _ask(console, terminal, by_model=False)
    run_policy = CallPolicy.user(ws, user_confirm, declined_hint=ONCE_DECLINED if once else "", storage=own)
    ctx = CommandContext(REGISTRY, store, session, args.storage, console, run_policy, cli, kept=kept)
    agent: ChatAgent | None = None
    if base_url and model_name:
        from coevo.agent.chat.loop import ChatAgent
        from coevo.agent.llm_client import LLMSettings, chat_model

        agent = ChatAgent(
            chat_model(LLMSettings(base_url, model_name, api_key, timeout_s=args.llm_timeout, streaming=not args.no_stream)),
            REGISTRY,
            store,
            session,
            storage=own,
            allowed_storages=tuple(args.allow_storage),
            confirm=confirm_once or _ask(console, terminal, by_model=True),
            on_event=terminal.event if not args.json else None,
            max_steps=args.max_steps,
            price_per_mtok=_price(args.llm_price),
            stream=not args.no_stream,
            workspace=ws,
            declined_hint=ONCE_DECLINED if once else "",
        )
    return Chat(session, ctx, agent, terminal, model_name, base_url)


def _bare_command(line: str, *, offline: bool) -> str:
    """``exit`` / ``quit`` typed without the slash leave, as in Python's REPL; ``help`` is ``/help`` where no model
    would read it (command mode). Anything else is returned as typed."""
    word = line.strip().lower()
    if word in ("exit", "quit"):
        return "/exit"
    return "/help" if offline and word == "help" else line


def _check_workspace(folder: str | None) -> None:
    """Refuse a ``--workspace`` that is no folder: the tools' writes are confined to it, and a typo would confine them to nothing.

    Raises:
        UserInputError: the path is missing or a file.
    """
    if folder is None or Path(folder).is_dir():
        return
    what = "is a file" if Path(folder).exists() else "does not exist"
    raise UserInputError(f"--workspace {folder} {what}; give an existing folder, or leave --workspace out (the storage's folder)")


def run(args: argparse.Namespace, *, cli: CommandLine | None = None) -> int:
    """Run ``coevo chat`` (a REPL, or one turn with ``--once``).

    Args:
        args: the parsed ``coevo chat`` options.
        cli: runs the ``coevo`` commands behind ``/search`` and ``/kb`` (the CLI hands in
            :func:`agent.cli.chat.in_process`); None: those commands are not available.
    """
    if args.max_steps < 1:  # checked without an endpoint too: a bad value is refused before it can matter
        raise UserInputError(f"--max-steps must be at least 1, got {args.max_steps}")
    if args.json and args.once is None:
        raise UserInputError("--json prints one turn as JSON: use it with --once MESSAGE")
    if args.once is not None and args.json:
        return _once_json(args, cli)
    console = PipeConsole(highlight=False)
    chat = _open(args, console, cli)
    if args.once is not None:
        return _once(args, chat)
    from coevo.agent.chat.loop import ChatModelError

    session, ctx, agent, terminal, store = chat.session, chat.ctx, chat.agent, chat.terminal, chat.ctx.store
    console.print(f"coevo chat · session {session} · " + (f"model {chat.model} at {chat.base_url}" if agent else "command mode"))
    if agent is None:
        console.print(HOW_TO_CONFIGURE, soft_wrap=True)
        store.add(session, Event("notice", HOW_TO_CONFIGURE, {}))
    _replay(store, session, console)
    prompt = _prompt_session()
    while True:
        try:
            line = prompt("coevo> ").strip()
        except KeyboardInterrupt:
            continue  # Ctrl-C on the prompt clears the line
        except EOFError:
            break
        if not line:
            continue
        line = _bare_command(line, offline=agent is None)
        if line.startswith("/"):
            if dispatch(ctx, line).exit:
                break
            continue
        if agent is None:
            console.print(f"[yellow]no LLM endpoint configured[/]: use /help for commands; set {ENV_BASE_URL} and {ENV_MODEL} to chat")
            continue
        try:
            result = agent.turn(line)
        except KeyboardInterrupt:
            terminal.end_turn()
            console.print("[yellow]turn interrupted[/]; the session goes on")
            store.add(session, Event("notice", "turn interrupted by the user", {}))
            continue
        except ChatModelError as exc:
            terminal.end_turn()
            console.print(f"[red]error:[/] {escape(str(exc))}", soft_wrap=True)
            store.add(session, Event("error", str(exc), {}))
            continue
        except CoevoError as exc:  # e.g. the session database went away: say so, keep the prompt
            terminal.end_turn()
            console.print(f"[red]error:[/] {escape(str(exc))}", soft_wrap=True)
            continue
        terminal.end_turn()
        if result.refused or result.stopped:
            console.print(f"[yellow]{escape(str(result.answer if result.refused else result.stopped))}[/]")
        console.print(_footer(result, store, session))
    console.print(f"session {session} kept; resume with `coevo chat --session {session}`")
    return 0


def _once(args: argparse.Namespace, chat: Chat) -> int:
    """One command or turn, shown for people; returns the exit code."""
    code, _ = _one(args, chat)
    return code


def _one(args: argparse.Namespace, chat: Chat) -> tuple[int, dict[str, Any]]:
    """Run ``--once``'s text: exit code and the record ``--json`` prints (without the session)."""
    text = str(args.once).strip()
    ctx = chat.ctx
    if text.startswith("/"):
        outcome = dispatch(ctx, text)
        record = {"kind": "command", "ok": outcome.ok, "summary": outcome.summary, "value": outcome.value}
        return (0 if outcome.ok else 2), record
    if chat.agent is None:
        raise UserInputError(HOW_TO_CONFIGURE)
    from coevo.agent.chat.loop import ChatModelError

    try:
        result = chat.agent.turn(text)
    except ChatModelError as exc:
        ctx.store.add(ctx.session, Event("error", str(exc), {}))
        raise
    chat.terminal.end_turn()
    if not args.json:
        ctx.console.print(_footer(result, ctx.store, ctx.session, kept=ctx.kept))
    # a refusal or a step limit is still an answer: ok, with value["refused"] / value["stopped"] saying which
    summary = result.stopped or (result.answer if result.refused else f"answered; {len(result.tool_calls)} tool call(s)")
    return 0, {"kind": "turn", "ok": True, "summary": summary, "value": result.as_dict()}


TELLS = re.compile(r"\berror\b|warning|\bfailed\b", re.IGNORECASE)
"""What a ``/search`` or ``/kb`` writes on stderr that stays on stderr under ``--once --json``: an error (``error:``,
``exited with an error``), a warning (``UserWarning:``, a logged warning) or a failure (``3 of 30 evaluations
failed``, ``LLM request failed ...; retrying``)."""


class HeldStderr(io.TextIOBase):
    """stderr while a ``coevo`` command runs under ``--once --json``: keeps everything, passes on what :data:`TELLS`.

    A command's consoles, its progress, logging and ``warnings`` write one message per ``write`` (rich renders a
    print whole, wrapped lines included), so each write is passed on or held as a whole. Not a terminal: the
    command's progress comes as plain lines, not bars drawn over each other.
    """

    def __init__(self, stream: Any) -> None:
        self._stream = stream
        self._held = io.StringIO()

    def write(self, text: str) -> int:
        self._held.write(text)
        if TELLS.search(text):
            self._stream.write(text)
        return len(text)

    def flush(self) -> None:
        self._stream.flush()

    def isatty(self) -> bool:
        return False

    def text(self) -> str:
        """Everything written, passed on or not."""
        return self._held.getvalue()


class QuietCommandLine:
    """``cli`` with its commands' stderr held (:class:`HeldStderr`); :attr:`said` collects what they wrote there."""

    def __init__(self, cli: CommandLine) -> None:
        self.cli = cli
        self.said = ""

    def __call__(self, argv: Sequence[str]) -> CliRun:
        held = HeldStderr(sys.stderr)
        with contextlib.redirect_stderr(held):  # rich's stderr consoles and the CLI's own capture look it up per write
            done = self.cli(argv)
        self.said += held.text()
        return done


def _once_json(args: argparse.Namespace, cli: CommandLine | None) -> int:
    """``--once ... --json``: exactly one JSON object on stdout, whatever happens; errors on stderr, and no human view."""
    stdout = sys.stdout
    console = Console(file=sys.stderr, highlight=False)  # errors only
    # a script reads the result from the JSON's value: the table or text a command shows people would be a
    # second copy of it (on stderr, where a script looks for what went wrong), so the commands' console is quiet
    view = Console(file=io.StringIO(), quiet=True)
    text = str(args.once).strip()
    record: dict[str, Any] = {"session": None, "input": text, "kind": "command" if text.startswith("/") else "turn"}
    # what a /search or /kb writes on stderr (the reasoner line, progress) goes in the JSON: stderr is for what went wrong
    quiet = QuietCommandLine(cli) if cli is not None else None
    # anything that prints while the command runs (coevo's own consoles, a tool, a library) lands on stderr
    with contextlib.redirect_stdout(sys.stderr):
        try:
            chat = _open(args, view, quiet)
            record["session"] = chat.session if chat.ctx.kept else None
            code, result = _one(args, chat)
            record.update(result)
            if not result["ok"]:  # what dispatch told the quiet view
                console.print(f"[red]error:[/] {escape(str(result['summary']))}", soft_wrap=True)
        except CoevoError as exc:
            console.print(f"[red]error:[/] {escape(str(exc))}", soft_wrap=True)
            code = 2
            record.update(ok=False, summary=str(exc), value=None)
    if code:  # a failed call carries the fields every coevo --json error has
        record.update(error_fields(str(record["summary"]), code))
    if quiet is not None and quiet.said:
        record["stderr"] = quiet.said
    print_object(record, stdout)
    return code


def _replay(store: SessionStore, session: str, console: Console) -> None:
    """Show the tail of a resumed session."""
    past = [e for e in store.events(session) if e.kind in ("user", "assistant", "command") and e.content]
    if not past:
        return
    console.print(f"[dim]resuming {session}: last {min(6, len(past))} of {len(past)} messages[/]")
    for e in past[-6:]:
        who = {"user": "you", "assistant": "coevo", "command": "you"}[e.kind]
        console.print(f"[dim]{who}: {escape(e.content[:300])}[/]", soft_wrap=True)


def _ask(console: Console, terminal: Terminal, *, by_model: bool) -> Any:
    def confirm(tool: Tool, args: dict[str, Any]) -> bool:
        terminal.stop_spinner()
        why = ", ".join(asks_first(tool, tool.Args.model_validate(args), by_model=by_model))
        console.print(f"[yellow]{escape(tool.name)}[/] {escape(why)}: {escape(json.dumps(args))}", soft_wrap=True)
        try:
            answer = _prompt_session()("run it? [y/N] ")
        except (KeyboardInterrupt, EOFError):
            return False
        return answer.strip().lower() in ("y", "yes")

    return confirm


def _prompt_session() -> Any:
    """A line reader: prompt_toolkit with history on a terminal, plain input() otherwise."""
    if not sys.stdin.isatty():
        return input
    from prompt_toolkit import PromptSession
    from prompt_toolkit.history import FileHistory

    history = Path.home() / ".coevo_chat_history"
    try:
        return PromptSession(history=FileHistory(str(history))).prompt
    except OSError:
        return PromptSession().prompt
