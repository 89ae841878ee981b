"""Adapters from a registry tool to its callers: LangChain (chat, and a search's LLM reasoner, whose round tools are
registry tools: :mod:`agent.reasoners.round_tools`) and the CLI (``coevo tools run``)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

from pydantic import ValidationError, create_model

from coevo.tools._base import (
    Tool,
    ToolArgs,
    ToolArgumentError,
    ToolDeclinedError,
    ToolExecutionError,
    ToolResult,
    describe_validation,
)
from coevo.tools._call import call_tool
from coevo.tools._policy import CallPolicy
from coevo.tools._registry import llm_name

if TYPE_CHECKING:  # LangChain is imported where a tool is bound for a model: `coevo tools run` never loads it
    from langchain_core.messages import ToolMessage
    from langchain_core.tools import StructuredTool

DECLINED = "the user declined to run"
"""Start of the observation a model gets for a call the user did not confirm."""

CallStatus = Literal["ok", "error", "declined"]


@dataclass(frozen=True)
class ToolOutcome:
    """How one call through the LangChain adapter ended: the artifact of its ``ToolMessage``.

    The model reads the message's text; the caller (the chat loop) reads this, so whether a
    call succeeded is a value, never guessed from the text.

    Attributes:
        status: ``ok`` (the tool produced its value), ``error`` (bad arguments or the tool
            failed; the text says what to fix) or ``declined`` (it asks first and the user
            said no; nothing ran).
        result: the tool's result when ``ok``.
    """

    status: CallStatus
    result: ToolResult | None = None

    @property
    def ok(self) -> bool:
        """Whether the tool produced its value."""
        return self.status == "ok"


def outcome_of(message: ToolMessage) -> ToolOutcome:
    """The outcome of a call from its ``ToolMessage``.

    A message without a :class:`ToolOutcome` artifact comes from LangChain's own check of
    the arguments against the schema (``handle_validation_error``), before the adapter ran:
    an error.
    """
    return message.artifact if isinstance(message.artifact, ToolOutcome) else ToolOutcome("error")


def bound_args(tool: Tool, fixed: Mapping[str, Any]) -> type[ToolArgs]:
    """The tool's ``Args`` without the fields ``fixed`` sets: what a caller who cannot change those fields sees.

    Raises:
        TypeError: ``fixed`` names a field the tool does not have.
    """
    unknown = set(fixed) - set(tool.Args.model_fields)
    if unknown:
        raise TypeError(f"tool {tool.name} has no argument(s) {', '.join(sorted(unknown))}")
    if not fixed:
        return tool.Args
    fields: dict[str, Any] = {n: (f.annotation, f) for n, f in tool.Args.model_fields.items() if n not in fixed}
    return create_model(f"{tool.Args.__name__}Bound", __base__=ToolArgs, __doc__=tool.Args.__doc__, **fields)


def to_langchain(
    tool: Tool, policy: CallPolicy | None = None, *, fixed: Mapping[str, Any] | None = None, hide: Sequence[str] = ()
) -> StructuredTool:
    """A LangChain ``StructuredTool`` with an LLM-safe name and the tool's argument schema.

    Args:
        tool: the registry tool.
        policy: applied to every call (a model's calls: :meth:`CallPolicy.model`); None
            runs calls unchecked, as the user's own.
        fixed: arguments the caller sets for the model, left out of the schema the model sees
            and added to every call (an LLM reasoner's round binds its study and storage).
        hide: fields of the result's value removed before the model reads it, with a note
            (a round hides metrics measured against the true front).

    The tool answers ``content_and_artifact``: invoked with a tool call, it returns a
    ``ToolMessage`` whose text is the observation for the model and whose artifact is the
    :class:`ToolOutcome` (read it with :func:`outcome_of`). Errors come back as text the
    model can act on, not as exceptions: ``error: <what to fix>``; a declined call as
    ``the user declined to run ...``.
    """
    from langchain_core.tools import StructuredTool

    fixed = dict(fixed or {})
    schema = bound_args(tool, fixed)

    def _run(**kwargs: Any) -> tuple[str, ToolOutcome]:
        try:
            result = call_tool(tool, {**kwargs, **fixed}, policy=policy)
        except ToolDeclinedError:
            return f"{DECLINED} {llm_name(tool.name)}; do not retry it, ask the user what they want instead", ToolOutcome("declined")
        except (ToolArgumentError, ToolExecutionError) as exc:
            return f"error: {exc}", ToolOutcome("error")
        removed = [k for k in hide if k in result.value]
        if removed:
            value = {k: v for k, v in result.value.items() if k not in removed}
            result = ToolResult(value=value, messages=[*result.messages, f"not shown here: {', '.join(removed)}"])
        return result.model_dump_json(), ToolOutcome("ok", result)

    def _invalid(exc: ValidationError) -> str:
        return f"error: {describe_validation(tool, exc)}"

    return StructuredTool.from_function(
        func=_run,
        name=llm_name(tool.name),
        description=tool.description,
        args_schema=schema,
        handle_validation_error=_invalid,
        response_format="content_and_artifact",
    )


def run_from_cli(tool: Tool, args_json: str | None) -> dict[str, Any]:
    """Run a tool from a JSON object string (``coevo tools run NAME --args JSON``)."""
    return call_tool(tool, args_json or "{}").model_dump()
