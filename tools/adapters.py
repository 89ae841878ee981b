"""Adapters from a registry tool to its three callers: LangChain, the CLI, and search."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from langchain_core.tools import StructuredTool
from pydantic import ValidationError

from tools._base import Tool, ToolArgumentError, ToolDeclinedError, ToolExecutionError, call_tool, describe_validation
from tools._policy import CallPolicy
from tools._registry import llm_name

DECLINED = "the user declined to run"
"""Start of the observation a model gets for a call the user did not confirm."""


def to_langchain(tool: Tool, policy: CallPolicy | None = None) -> StructuredTool:
    """A LangChain ``StructuredTool`` with an LLM-safe name and the tool's argument schema.

    Args:
        tool: the registry tool.
        policy: applied to every call (a model's calls: :meth:`CallPolicy.model`); None
            runs calls unchecked, as the user's own.

    Errors come back as the tool message (an observation the model can act on), not as
    exceptions: ``error: <what to fix>``; a declined call as ``the user declined to run ...``.
    """

    def _run(**kwargs: Any) -> str:
        try:
            return call_tool(tool, kwargs, policy=policy).model_dump_json()
        except ToolDeclinedError:
            return f"{DECLINED} {llm_name(tool.name)}; do not retry it, ask the user what they want instead"
        except (ToolArgumentError, ToolExecutionError) as exc:
            return f"error: {exc}"

    def _invalid(exc: ValidationError) -> str:
        return f"error: {describe_validation(tool, exc)}"

    return StructuredTool.from_function(
        func=_run, name=llm_name(tool.name), description=tool.description, args_schema=tool.Args, handle_validation_error=_invalid
    )


def run_from_cli(tool: Tool, args_json: str | None) -> dict[str, Any]:
    """Run a tool from a JSON object string (``coevo tools run NAME --args JSON``)."""
    return call_tool(tool, args_json or "{}").model_dump()


def tool_objective(
    tool: Tool, fields: Mapping[str, str], *, fixed: Mapping[str, Any] | None = None
) -> Callable[[Mapping[str, Any]], dict[str, float]]:
    """Turn a tool into an objective evaluator for a search problem.

    Args:
        tool: the tool to call.
        fields: objective name -> field of the tool's ``value`` holding it.
        fixed: arguments added to every call (e.g. dataset and device).

    Returns:
        A function from the point's tool arguments to ``{objective: value}``.
    """

    def evaluate(point_args: Mapping[str, Any]) -> dict[str, float]:
        result = call_tool(tool, {**(fixed or {}), **point_args})
        if not result.ok:
            raise ToolExecutionError(f"{tool.name} returned no value: {'; '.join(result.messages)}")
        return {objective: float(result.value[field]) for objective, field in fields.items()}

    return evaluate
