"""One call of a tool: validate its raw arguments, admit it under a :class:`CallPolicy`, run it.

The contract (:mod:`tools._base`) and the policy (:mod:`tools._policy`) sit below this module;
it is the one place that puts them together, so neither imports the other's caller.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from pydantic import ValidationError

from coevo.search.errors import CoevoError, UserInputError
from coevo.tools._base import Tool, ToolArgs, ToolArgumentError, ToolExecutionError, ToolResult, describe_validation
from coevo.tools._policy import CallPolicy

JSON_KINDS = {list: "an array", str: "a string", int: "a number", float: "a number", bool: "a boolean", type(None): "null"}
"""How a JSON value that is not an object is named when a tool call's arguments are one."""


def parse_arguments(raw: str) -> tuple[dict[str, Any] | None, str]:
    """A tool call's argument text as sent: ``(the object, "")``, or ``(None, what is wrong with it)``.

    The one reading of argument text, for :func:`call_tool`, chat (before the call, to show the model's call as made)
    and ``--options``. Read as the OpenAI client reads a whole reply's (``json.loads``, control characters allowed in
    strings), never completed as a partial stream is: LangChain's streaming parser turns ``{bad`` into ``{}``, and the
    model would be told its call lacks an argument instead of that it sent no JSON. No text at all is no arguments
    (what OpenAI-compatible servers send for a call without any).

    >>> parse_arguments('{"arch": "x"}'), parse_arguments("")
    (({'arch': 'x'}, ''), ({}, ''))
    >>> parse_arguments("{bad")
    (None, 'not valid JSON (Expecting property name enclosed in double quotes: line 1 column 2 (char 1))')
    >>> parse_arguments("[1, 2]")
    (None, 'valid JSON but not a JSON object (an array)')
    """
    if not raw.strip():
        return {}, ""
    try:
        value = json.loads(raw, strict=False)
    except json.JSONDecodeError as exc:
        return None, f"not valid JSON ({exc})"
    if not isinstance(value, dict):
        return None, f"valid JSON but not a JSON object ({JSON_KINDS.get(type(value), 'something else')})"
    return value, ""


def call_tool(tool: Tool, raw: Mapping[str, Any] | str | None, *, policy: CallPolicy | None = None) -> ToolResult:
    """Validate raw arguments (a mapping or a JSON object string), admit the call under ``policy``, run the tool.

    Args:
        tool: the tool.
        raw: its arguments.
        policy: who is calling and what they may do (:class:`tools.CallPolicy`), and their storage
            (a storage argument left out is the policy's); None is the user's own call with no
            one to ask (``coevo tools run``): nothing is restricted.

    Raises:
        ToolArgumentError: the arguments are malformed or out of the tool's domain, or a
            model's call would write outside the workspace (``OutsideWorkspaceError``).
        ToolDeclinedError: the call asks first and was not confirmed; the tool did not run.
        ToolExecutionError: the tool failed on valid arguments.
    """
    if isinstance(raw, str):
        parsed, fault = parse_arguments(raw)
        if parsed is None:
            raise ToolArgumentError(f"arguments for {tool.name} are {fault}; example: {json.dumps(tool.example)}")
        raw = parsed
    if raw is None:
        raw = {}
    if not isinstance(raw, Mapping):
        raise ToolArgumentError(
            f"arguments for {tool.name} must be a JSON object, got {type(raw).__name__}; example: {json.dumps(tool.example)}"
        )
    raw = dict(raw) if policy is None else policy.with_defaults(tool, dict(raw))  # the caller's storage where none is named
    try:
        args = tool.Args.model_validate(raw)
    except ValidationError as exc:
        raise ToolArgumentError(describe_validation(tool, exc)) from None
    if policy is None:
        return _run(tool, args)
    policy.admit(tool, args)
    with policy.active():
        return _run(tool, args)


def _run(tool: Tool, args: ToolArgs) -> ToolResult:
    try:
        return tool.run(args)
    except UserInputError as exc:
        raise ToolArgumentError(f"{tool.name}: {exc}") from exc
    except CoevoError as exc:
        raise ToolExecutionError(f"{tool.name} failed: {exc}") from exc
    except Exception as exc:  # a tool bug must reach the caller as a failure, not a crash
        raise ToolExecutionError(f"{tool.name} failed: {type(exc).__name__}: {exc}") from exc
