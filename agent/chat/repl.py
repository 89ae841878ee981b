"""``coevo chat``: the terminal session (prompt_toolkit line editing, rich output).

With an endpoint configured, plain lines go to the agent (:mod:`agent.chat.loop`); the
answer streams in, tool calls are shown as they run, and a footer gives the turn's tokens
and cost. Without one, the session says so once, shows how to configure an endpoint, and
runs in command mode (slash commands only). Ctrl-C interrupts a turn, not the session;
Ctrl-D or ``/exit`` leaves.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from rich.console import Console

from agent.chat.commands import CommandContext, dispatch
from agent.chat.loop import ChatAgent, ChatModelError, TurnResult, make_chat_model
from agent.chat.store import Event, SessionStore
from agent.reasoners import ENV_API_KEY, ENV_BASE_URL, ENV_MODEL, llm_settings
from search.errors import CoevoError, UserInputError
from search.storage import resolve_storage_url
from tools import REGISTRY, Tool

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
            self.console.print(f"[cyan]→ {data['name']}[/] {json.dumps(data['args'])}", soft_wrap=True)
            self.status = self.console.status(f"running {data['name']} ...")
            self.status.start()
        elif kind == "tool_end":
            self._stop_spinner()
            mark = "[green]ok[/]" if data["ok"] else "[red]error[/]"
            first = data["output"].splitlines()[0] if data["output"] else ""
            detail = f": {first[:160]}" if not data["ok"] else ""
            self.console.print(f"[cyan]← {data['name']}[/] {mark} ({data['seconds']:.2f} s){detail}", soft_wrap=True)

    def _stop_spinner(self) -> None:
        if self.status is not None:
            self.status.stop()
            self.status = None

    def end_turn(self) -> None:
        self._stop_spinner()
        if self.streaming:
            self.console.print()
            self.streaming = False


def _price(text: str | None) -> tuple[float, float] | None:
    if not text:
        return None
    try:
        a, b = (float(x) for x in text.split(","))
    except ValueError:
        raise UserInputError("--llm-price takes input,output USD per million tokens, e.g. 0.15,0.60") from None
    return a, b


def _footer(result: TurnResult, store: SessionStore, session: str) -> str:
    total = store.usage(session)
    cost = f" · {result.cost_usd:.4f} USD" if result.cost_usd is not None else ""
    return (
        f"[dim]{result.prompt_tokens} prompt + {result.completion_tokens} completion tokens{cost} · "
        f"{len(result.tool_calls)} tool call(s) · {result.total_s:.1f} s · session {session}: "
        f"{total['prompt_tokens'] + total['completion_tokens']} tokens[/]"
    )


def run(args: argparse.Namespace) -> int:
    """Run ``coevo chat`` (a REPL, or one turn with ``--once``)."""
    console = Console(highlight=False)
    store = SessionStore(args.storage)
    base_url, model_name, api_key = llm_settings(args.llm_base_url, args.llm_model, args.llm_api_key)
    if args.session:
        store.check(args.session)
        session = str(args.session)
    else:
        session = store.create(model_name if base_url and model_name else None)
    ctx = CommandContext(REGISTRY, store, session, args.storage, console)
    terminal = Terminal(console)
    agent: ChatAgent | None = None
    if base_url and model_name:
        if args.max_steps < 1:
            raise UserInputError(f"--max-steps must be at least 1, got {args.max_steps}")
        agent = ChatAgent(
            make_chat_model(base_url=base_url, model=model_name, api_key=api_key, timeout_s=args.llm_timeout),
            REGISTRY,
            store,
            session,
            storage=resolve_storage_url(args.storage),
            confirm=(lambda tool, a: bool(args.yes)) if args.once is not None else _ask(console),
            on_event=terminal.event if not args.json else None,
            max_steps=args.max_steps,
            price_per_mtok=_price(args.llm_price),
            stream=not args.no_stream,
        )
    if args.once is not None:
        return _once(args, ctx, agent, terminal)
    console.print(f"coevo chat · session {session} · " + (f"model {model_name} at {base_url}" if agent else "command mode"))
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
            console.print(f"[red]error:[/] {exc}", soft_wrap=True)
            store.add(session, Event("error", str(exc), {}))
            continue
        except CoevoError as exc:  # e.g. the session database went away: say so, keep the prompt
            terminal.end_turn()
            console.print(f"[red]error:[/] {exc}", soft_wrap=True)
            continue
        terminal.end_turn()
        if result.refused or result.stopped:
            console.print(f"[yellow]{result.answer if result.refused else result.stopped}[/]")
        console.print(_footer(result, store, session))
    console.print(f"session {session} kept; resume with `coevo chat --session {session}`")
    return 0


def _once(args: argparse.Namespace, ctx: CommandContext, agent: ChatAgent | None, terminal: Terminal) -> int:
    text = str(args.once).strip()
    if text.startswith("/"):
        if args.json:
            ctx.console = Console(file=sys.stderr, highlight=False)  # tables go to stderr, the JSON object to stdout
        outcome = dispatch(ctx, text)
        if args.json:
            print(
                json.dumps({"session": ctx.session, "command": text, "ok": outcome.ok, "summary": outcome.summary, "value": outcome.value})
            )
        return 0 if outcome.ok else 2
    if agent is None:
        raise UserInputError(HOW_TO_CONFIGURE)
    try:
        result = agent.turn(text)
    except ChatModelError as exc:
        ctx.store.add(ctx.session, Event("error", str(exc), {}))
        raise
    if args.json:
        print(json.dumps({"session": ctx.session, **result.as_dict()}))
    else:
        terminal.end_turn()
        ctx.console.print(_footer(result, ctx.store, ctx.session))
    return 0


def _replay(store: SessionStore, session: str, console: Console) -> None:
    """Show the tail of a resumed session."""
    past = [e for e in store.events(session) if e.kind in ("user", "assistant", "command") and e.content]
    if not past:
        return
    console.print(f"[dim]resuming {session}: last {min(6, len(past))} of {len(past)} messages[/]")
    for e in past[-6:]:
        who = {"user": "you", "assistant": "coevo", "command": "you"}[e.kind]
        console.print(f"[dim]{who}: {e.content[:300]}[/]", soft_wrap=True)


def _ask(console: Console) -> Any:
    def confirm(tool: Tool, args: dict[str, Any]) -> bool:
        why = "runs for a while" if tool.long_running else "changes stored data or starts work"
        console.print(f"[yellow]{tool.name}[/] {why}: {json.dumps(args)}", soft_wrap=True)
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
