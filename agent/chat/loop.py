"""The agent loop of ``coevo chat``: a LangChain chat model bound to the registry's tools.

One turn: the user's line is recorded; the model (streamed) answers or calls tools; each
tool call runs through the registry's LangChain adapter (:func:`tools.adapters.to_langchain`,
the one adapter) under the model's :class:`tools.CallPolicy`: it writes only under the
workspace, and the user confirms it first when the tool is long-running, changes data
or would load the user's code; results, including errors and refusals, go back to the
model as tool messages it can act on, and whether a call succeeded is read from the
message's :class:`tools.adapters.ToolOutcome`, never from its text; repeat up to
``max_steps`` model calls. Model requests go through the shared seam
(:mod:`agent.llm_client`): its retry policy (:data:`agent.llm_client.CHAT_RETRY` by
default: one retry, and none once streamed text was shown) and its token cost.
Everything is recorded in the session as it happens. Ctrl-C raises ``KeyboardInterrupt``
out of :meth:`ChatAgent.turn`; what was recorded stays, and the next turn starts from a
consistent history (tool calls left without a result are closed as interrupted).
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, AIMessageChunk, BaseMessage, HumanMessage, SystemMessage, ToolMessage
from langchain_core.messages.ai import add_usage
from langchain_core.messages.tool import InvalidToolCall, ToolCall, ToolCallChunk, invalid_tool_call, tool_call

from coevo.agent.chat.options import MAX_STEPS
from coevo.agent.chat.store import Event, SessionStore
from coevo.agent.llm_client import CHAT_RETRY, EndpointError, Price, RetryPolicy, clean_text, token_usage, truncate_result
from coevo.prompts import load_prompt
from coevo.search.errors import CoevoError, UserInputError
from coevo.tools import CallPolicy, Confirm, Registry, Tool, llm_name, parse_arguments, shown_url
from coevo.tools import workspace as workspace_of
from coevo.tools.adapters import CallStatus, outcome_of, to_langchain

MAX_OBSERVATION_BYTES = 12_000
"""Tool results longer than this (UTF-8 bytes) are cut, with a "truncated: N of M bytes" note, before they go back to the model."""

EventSink = Callable[[str, dict[str, Any]], None]
"""``(kind, data)``: ``token`` (streamed text), ``tool_start`` (``name``, ``args``: the object, or the text as sent when
that is not one), ``tool_end`` (with ``status``: ok, error or declined); every call the model makes has both."""


def clean_reply(reply: AIMessage) -> AIMessage:
    """``reply`` with no lone surrogate in its text, tool calls or refusal (:func:`agent.llm_client.clean_text`): it is shown and stored."""
    return reply.model_copy(
        update={
            "content": clean_text(reply.content),
            "additional_kwargs": clean_text(reply.additional_kwargs),
            "tool_calls": clean_text(reply.tool_calls),
            "invalid_tool_calls": clean_text(reply.invalid_tool_calls),
        }
    )


def read_tool_calls(chunks: list[ToolCallChunk]) -> tuple[list[ToolCall], list[InvalidToolCall]]:
    """A streamed reply's tool calls from their merged chunks, each call's arguments read by :func:`parse_arguments`.

    Returns:
        the calls whose arguments are a JSON object, and the others with their text as sent and what is wrong with it.
    """
    calls: list[ToolCall] = []
    bad: list[InvalidToolCall] = []
    for chunk in chunks:
        raw = chunk.get("args") or ""
        args, problem = parse_arguments(raw)
        if args is None:
            bad.append(invalid_tool_call(name=chunk.get("name"), args=raw, id=chunk.get("id"), error=problem))
        else:
            calls.append(tool_call(name=chunk.get("name") or "", args=args, id=chunk.get("id")))
    return calls, bad


def explain_invalid_calls(reply: AIMessage) -> AIMessage:
    """``reply`` with each invalid tool call's error said by :func:`parse_arguments` (LangChain's is a multi-line
    paragraph with a troubleshooting link), the same words streamed or not."""
    if not reply.invalid_tool_calls:
        return reply
    bad = [{**c, "error": parse_arguments(c.get("args") or "")[1] or c.get("error")} for c in reply.invalid_tool_calls]
    return reply.model_copy(update={"invalid_tool_calls": bad})


class ChatModelError(CoevoError):
    """The model endpoint failed (timeout, HTTP error, unreadable reply): the session goes on."""


@dataclass
class TurnResult:
    """What one turn produced."""

    answer: str
    tool_calls: list[dict[str, Any]] = field(default_factory=list)
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cost_usd: float | None = None
    model_s: float = 0.0
    tool_s: float = 0.0
    total_s: float = 0.0
    refused: bool = False
    stopped: str | None = None

    @property
    def loop_s(self) -> float:
        """Time spent in the loop itself: the turn minus model calls and tool runs."""
        return max(0.0, self.total_s - self.model_s - self.tool_s)

    def as_dict(self) -> dict[str, Any]:
        """JSON-friendly form (``coevo chat --once --json``)."""
        return {
            "answer": self.answer,
            "tool_calls": self.tool_calls,
            "usage": {"prompt_tokens": self.prompt_tokens, "completion_tokens": self.completion_tokens, "cost_usd": self.cost_usd},
            "refused": self.refused,
            "stopped": self.stopped,
            "seconds": {"total": round(self.total_s, 4), "model": round(self.model_s, 4), "tools": round(self.tool_s, 4)},
        }


def system_prompt(registry: Registry, storage: str, workspace: Path) -> str:
    """The system message: tools and their purposes, house rules, where files may be written."""
    tools = [
        {
            "llm_name": llm_name(t.name),
            "description": t.description,
            "asks": "always" if t.long_running or t.confirm else "for your code" if t.may_load_code else "",
        }
        for t in registry
    ]
    return load_prompt("chat_system").render(tools=tools, storage=shown_url(storage), workspace=str(workspace))[0]["content"]


class ChatAgent:
    """Tool-calling agent over ``registry``, recording into ``store`` under ``session``.

    Args:
        model: a LangChain chat model that supports tool calling (``ChatOpenAI``).
        registry: the tools offered.
        store: where the session is recorded.
        session: session id (its earlier events are the conversation so far).
        storage: the session's study storage: shown to the model, the tools' storage when a call names
            none, and the one storage its calls may always use.
        confirm: asked before a call that asks first (long-running, data-changing, or loading the user's code).
        workspace: the only folder the model's calls may write under (default: the storage's
            folder, see :func:`tools.workspace`).
        on_event: receives streamed text and tool progress (for the terminal).
        max_steps: model calls per turn.
        price_per_mtok: (input, output) USD per million tokens, for cost accounting.
        stream: stream the replies (False: one response per call).
        retry: the seam's retry policy for model requests (default: one retry).
        allowed_storages: further storages the model's calls may use (``--allow-storage``).
        endpoint: the endpoint's URL, named in errors (default: the model's ``openai_api_base``).
    """

    def __init__(
        self,
        model: BaseChatModel,
        registry: Registry,
        store: SessionStore,
        session: str,
        *,
        storage: str,
        confirm: Confirm,
        on_event: EventSink | None = None,
        max_steps: int = MAX_STEPS,
        price_per_mtok: tuple[float, float] | None = None,
        stream: bool = True,
        workspace: Path | None = None,
        declined_hint: str = "",
        retry: RetryPolicy = CHAT_RETRY,
        allowed_storages: tuple[str, ...] = (),
        endpoint: str | None = None,
    ) -> None:
        self.registry = registry
        url = endpoint or getattr(model, "openai_api_base", None)
        # named as a search's reasoner names it, so one endpoint's failure reads the same in both
        self.where = f"the LLM endpoint {url}" if url else "the LLM endpoint"
        self.workspace = (workspace or workspace_of(storage)).resolve()
        # the policy asks through self.confirm at call time, so a later assignment takes effect; the tools'
        # storage is the session's, and the model reaches no other but those the user allowed
        self.policy = CallPolicy.model(
            self.workspace,
            lambda tool, args: self.confirm(tool, args),
            declined_hint=declined_hint,
            storage=storage,
            allowed_storages=allowed_storages,
        )
        self.lc_tools = {llm_name(t.name): to_langchain(t, self.policy) for t in registry}
        self.model = model.bind_tools(list(self.lc_tools.values()))
        self.store = store
        self.session = session
        self.system = system_prompt(registry, storage, self.workspace)
        self.confirm: Confirm = confirm
        self.on_event = on_event or (lambda kind, data: None)
        self.max_steps = max_steps
        self.price = Price(*price_per_mtok) if price_per_mtok else None
        self.stream = stream
        self.retry = retry

    # ------------------------------------------------------------ history

    def history(self) -> list[BaseMessage]:
        """The conversation so far as chat messages (commands and notices are not sent)."""
        out: list[BaseMessage] = [SystemMessage(self.system)]
        pending: list[str] = []
        for e in self.store.events(self.session):
            if e.kind == "user":
                out += [ToolMessage("interrupted: the tool did not run", tool_call_id=c) for c in pending]
                pending = []
                out.append(HumanMessage(e.content))
            elif e.kind == "assistant":
                calls = e.data.get("tool_calls", [])
                out.append(AIMessage(e.content, tool_calls=calls, invalid_tool_calls=e.data.get("invalid_tool_calls", [])))
                pending = [c["id"] for c in calls] + [c["id"] for c in e.data.get("invalid_tool_calls", [])]
            elif e.kind == "tool_result":
                out.append(ToolMessage(e.content, tool_call_id=e.data["tool_call_id"]))
                pending = [c for c in pending if c != e.data["tool_call_id"]]
        out += [ToolMessage("interrupted: the tool did not run", tool_call_id=c) for c in pending]
        return out

    # ------------------------------------------------------------ a turn

    def turn(self, text: str) -> TurnResult:
        """Answer one user line (see the module doc).

        Raises:
            ChatModelError: the endpoint failed; the user's line is recorded, the session goes on.
            KeyboardInterrupt: Ctrl-C; what happened so far is recorded.
        """
        started = time.perf_counter()
        result = TurnResult(answer="")
        self.store.add(self.session, Event("user", text, {}))
        messages = self.history()
        for _step in range(self.max_steps):
            t0 = time.perf_counter()
            ai = self._call(messages)
            result.model_s += time.perf_counter() - t0
            p, c = token_usage(ai)
            cost = self.price.cost_usd(p, c) if self.price else None
            result.prompt_tokens += p
            result.completion_tokens += c
            if cost is not None:
                result.cost_usd = (result.cost_usd or 0.0) + cost
            content = ai.content if isinstance(ai.content, str) else json.dumps(ai.content)
            refusal = ai.additional_kwargs.get("refusal")
            data = (
                {"tool_calls": ai.tool_calls, "invalid_tool_calls": ai.invalid_tool_calls} if ai.tool_calls or ai.invalid_tool_calls else {}
            )
            self.store.add(self.session, Event("assistant", content or (f"(refused) {refusal}" if refusal else ""), data, p, c, cost))
            messages.append(ai)
            if refusal:
                result.answer, result.refused = f"The model declined: {refusal}", True
                break
            if not ai.tool_calls and not ai.invalid_tool_calls:
                result.answer = content
                break
            for call in ai.tool_calls:
                messages.append(self._tool(str(call["id"]), str(call["name"]), dict(call.get("args") or {}), "", result))
            for bad in ai.invalid_tool_calls:
                # shown and recorded as sent (its text), and the model told what is wrong with it
                raw, problem = bad.get("args") or "", bad.get("error") or "not valid JSON"
                messages.append(self._tool(str(bad.get("id")), str(bad.get("name") or "?"), raw, problem, result))
        else:
            result.stopped = f"stopped after {self.max_steps} model calls in one turn; ask again to continue"
            result.answer = result.answer or result.stopped
        result.total_s = time.perf_counter() - started
        return result

    def _call(self, messages: list[BaseMessage]) -> AIMessage:
        """One model reply under the retry policy; a stream is retried only before its first text was shown."""
        shown = False

        def once() -> AIMessage:
            nonlocal shown
            if not self.stream:
                return self._invoke(messages)
            acc: AIMessageChunk | None = None
            try:
                for chunk in self.model.stream(messages):
                    if isinstance(chunk.content, str) and chunk.content:
                        shown = True
                        self.on_event("token", {"text": clean_text(chunk.content)})
                    acc = chunk if acc is None else acc + chunk  # type: ignore[assignment]
            except ValueError as exc:
                if acc is not None or isinstance(exc, json.JSONDecodeError):
                    raise
                # LangChain's "No generation chunks were returned", said of a body holding no event at all
            if acc is None:
                # no event in the reply (an error page, a JSON body, nothing): asked once without streaming, the
                # endpoint either answers or fails with what is wrong with its reply (JSONDecodeError, an HTTP
                # status), in the words a search uses for it, rather than "no generation chunks"
                return self._invoke(messages)
            calls, bad = read_tool_calls(acc.tool_call_chunks)
            if not acc.content and not calls and not bad:
                # an empty streamed reply is usually a refusal, and LangChain drops the refusal
                # text from stream deltas: ask once more without streaming to get it
                again = self._invoke(messages)
                if acc.usage_metadata and again.usage_metadata:  # both calls are paid for
                    again.usage_metadata = add_usage(acc.usage_metadata, again.usage_metadata)
                return again
            return AIMessage(
                acc.content,
                additional_kwargs=acc.additional_kwargs,
                tool_calls=calls,
                invalid_tool_calls=bad,
                usage_metadata=acc.usage_metadata,
            )

        try:
            reply = self.retry.call(once, where=self.where, may_retry=lambda: not shown)
        except EndpointError as exc:
            raise ChatModelError(f"{exc}; ask again") from exc
        return clean_reply(explain_invalid_calls(reply))

    def _invoke(self, messages: list[BaseMessage]) -> AIMessage:
        reply = self.model.invoke(messages)
        if isinstance(reply.content, str) and reply.content:
            self.on_event("token", {"text": clean_text(reply.content)})
        return reply if isinstance(reply, AIMessage) else AIMessage(reply.content)

    def _tool(self, call_id: str, name: str, args: dict[str, Any] | str, problem: str, result: TurnResult) -> ToolMessage:
        """Run one tool call and shape its result for the model; every call is shown as made and counted, run or not.

        Args:
            call_id: the call's id (its result answers it).
            name: the tool's name as the model gave it.
            args: its arguments: the object, or the text as sent when that is not one.
            problem: what is wrong with ``args`` ("" when they are an object).
        """
        try:
            tool: Tool | None = self.registry.get(name)
        except UserInputError:
            tool = None
        shown = tool.name if tool is not None else name
        self.on_event("tool_start", {"name": shown, "args": args})
        if tool is None:
            observation = f"error: there is no tool named {name!r}; the tools are: {', '.join(self.lc_tools)}"
        elif problem or not isinstance(args, dict):
            observation = (
                f"error: the arguments of {name} are {problem or 'not a JSON object'}; nothing ran. Call it again with its "
                "arguments as one JSON object matching its schema"
            )
        else:
            t0 = time.perf_counter()
            # invoked with the tool call itself, the adapter answers a ToolMessage carrying its outcome;
            # the policy asks the user first where needed
            message = self.lc_tools[llm_name(tool.name)].invoke({"name": name, "args": args, "id": call_id, "type": "tool_call"})
            seconds = time.perf_counter() - t0
            observation, status = str(message.content), outcome_of(message).status
            self.on_event("tool_end", {"name": tool.name, "status": status, "seconds": seconds, "output": observation})
            return self._record_tool(call_id, tool.name, args, observation, status, result, seconds)
        self.on_event("tool_end", {"name": shown, "status": "error", "seconds": 0.0, "output": observation})
        return self._record_tool(call_id, shown, args, observation, "error", result, 0.0)

    def _record_tool(
        self, call_id: str, name: str, args: Any, observation: str, status: CallStatus, result: TurnResult, seconds: float
    ) -> ToolMessage:
        observation = truncate_result(clean_text(observation), MAX_OBSERVATION_BYTES)
        result.tool_s += seconds
        ok = status == "ok"
        result.tool_calls.append({"name": name, "args": args, "ok": ok, "seconds": round(seconds, 4)})
        self.store.add(self.session, Event("tool_result", observation, {"tool_call_id": call_id, "name": name, "args": args, "ok": ok}))
        return ToolMessage(observation, tool_call_id=call_id)
