"""The Tool contract shared by chat, CLI and search.

A tool is a name, a description, a pydantic ``Args`` model and ``run(args) -> ToolResult``.
Callers never call ``run`` directly: :func:`tools.call_tool` (:mod:`tools._call`) validates
raw arguments first, so a bad argument (:class:`ToolArgumentError`) and a failing tool
(:class:`ToolExecutionError`) are different errors, each with a message that says what to
change. This module is the bottom of the package: it imports no other module of ``tools``.
"""

from __future__ import annotations

import json
import re
from abc import ABC, abstractmethod
from collections.abc import Iterator
from pathlib import Path
from typing import Any, ClassVar, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from coevo.search.errors import CoevoError, UserInputError
from coevo.search.plugins import parse_reference
from coevo.search.strict_json import SIGNIFICANT_DIGITS, strict_dumps

NAME_PATTERN = re.compile(r"^[a-z][a-z0-9_]*(\.[a-z][a-z0-9_]*)*$")
"""Tool names: dotted lowercase words, e.g. ``nb201.query``."""


class ToolArgumentError(UserInputError):
    """The arguments do not fit the tool's schema or domain; the message says how to fix them."""


class ToolExecutionError(CoevoError):
    """The tool failed while running valid arguments."""


class ToolDeclinedError(CoevoError):
    """The call asks first (long run, changes data, a model loading user code) and was not confirmed; nothing ran."""


Target = Literal["file", "storage"]
"""What a written argument names: a file path, or a study storage URL (``sqlite:///PATH``; None is the default storage)."""


class ToolArgs(BaseModel):
    """Base of every tool's ``Args`` model: unknown fields are an error, not ignored."""

    model_config = ConfigDict(extra="forbid")


class ToolResult(BaseModel):
    """What a tool returns when it produced its value.

    There is no success flag: a tool that cannot produce its value raises (a
    :class:`search.errors.UserInputError` for the caller's mistake, any other error for its
    own failure), and :func:`tools.call_tool` turns that into :class:`ToolArgumentError` or
    :class:`ToolExecutionError`. A returned result is a success; callers never inspect it
    to find out.

    Attributes:
        value: the result; numeric fields carry their unit in the name (``latency_ms``).
        messages: notes for the caller (warnings, provenance, best-effort markers).
    """

    value: dict[str, Any] = Field(default_factory=dict)
    messages: list[str] = Field(default_factory=list)

    def to_strict_json(self, *, indent: int | None = 2) -> str:
        """The result as strict JSON (:func:`strict_json_value`): no NaN or Infinity, floats to their precision."""
        return strict_dumps(self.model_dump(), significant=SIGNIFICANT_DIGITS, indent=indent)


class Tool(ABC):
    """Base class of every tool.

    Subclasses set ``name``, ``description``, ``Args`` (a :class:`ToolArgs` subclass) and
    ``example`` (arguments that run quickly; the conformance suite runs them), and
    implement :meth:`run`. ``long_running`` marks tools that take more than a few seconds
    and ``confirm`` tools that change stored data or start work: chat asks the user before
    calling either. Expensive set-up belongs in ``run`` (or a cache it
    fills), never in ``__init__``: the registry builds every tool at start-up.

    What a tool touches is declared, not checked inside ``run``: ``writes`` maps each
    argument naming something the tool writes to its :data:`Target` kind, ``reads`` each
    argument naming a storage it only reads (it creates nothing there), and ``loads_code``
    names the arguments that may name the user's Python code (``path/to/file.py:function``,
    ``module:object``); :meth:`stored_code` names code the call would load that its arguments
    do not (a study's own problem file). :class:`tools.CallPolicy` checks these for every call
    a model makes (see :mod:`tools._policy`).

    What the conformance suite (:mod:`coevo.testing.tools`) needs to know is declared too:
    ``measured_fields`` it leaves out when it compares two calls, ``slow_example`` makes
    the checks that run the example slow, and ``programs`` names the external programs the
    example needs (a test run without one skips those checks, or fails them under CI).
    """

    name: ClassVar[str]
    description: ClassVar[str]
    Args: ClassVar[type[ToolArgs]]
    example: ClassVar[dict[str, Any]]
    long_running: ClassVar[bool] = False
    confirm: ClassVar[bool] = False
    writes: ClassVar[dict[str, Target]] = {}
    reads: ClassVar[dict[str, Literal["storage"]]] = {}
    loads_code: ClassVar[tuple[str, ...]] = ()
    measured_fields: ClassVar[frozenset[str]] = frozenset()
    """Result fields, at any depth, that measure the machine (time, memory, timing noise): two identical calls differ in them."""
    slow_example: ClassVar[bool] = False
    """True when ``example`` takes minutes: test suites mark the checks that run it slow."""
    programs: ClassVar[tuple[str, ...]] = ()
    """External programs (looked up on PATH) that a call runs, e.g. ``("yosys",)``."""

    @abstractmethod
    def run(self, args: Any) -> ToolResult:
        """Run with validated arguments (an instance of ``Args``); raise when the value cannot be produced (:class:`ToolResult`)."""

    def user_code(self, args: Any) -> list[str]:
        """The user-code references (``file.py:function``, ``module:object``) these validated arguments would load.

        Reads the ``loads_code`` arguments; a tool that finds code elsewhere too (inside a
        handle it was given) extends this.
        """
        return [v for name in self.loads_code if names_code(v := getattr(args, name))]

    def stored_code(self, args: Any) -> list[str]:
        """User code the call would load that its arguments do not name (a study's problem file, read from the study); default none.

        It asks first for every caller that can be asked: the caller named the study, not the code.
        """
        return []

    @property
    def may_load_code(self) -> bool:
        """Whether some call of this tool may load the user's code (so it may ask first for that)."""
        return bool(self.loads_code) or type(self).stored_code is not Tool.stored_code

    def storage_args(self) -> list[str]:
        """The arguments naming a study storage, written (``writes``) or read (``reads``)."""
        return [name for name, kind in {**self.writes, **self.reads}.items() if kind == "storage"]

    def schema(self) -> dict[str, Any]:
        """JSON schema of the arguments."""
        return self.Args.model_json_schema()


def names_code(value: Any) -> bool:
    """Whether an argument value names Python code to import: ``path/to/file.py:function``, ``module:object``, or an existing file.

    The loader's own reading (:func:`search.plugins.parse_reference`), so a value is code here
    exactly when loading it would import something (``x://evil.py:make`` is the file ``x:/evil.py``).
    A value whose part before the last ``:`` is an existing file is code too, whatever its
    attribute or suffix: the pipeline family's model loader (``sim.pipeline.profile``) imports
    such a file before it looks the attribute up (``evil.py:1`` runs ``evil.py``).
    """
    if parse_reference(value) is not None:
        return True
    if not isinstance(value, str) or ":" not in value:
        return False
    try:
        return Path(value.rpartition(":")[0]).is_file()
    except (OSError, ValueError):  # a name no file can have
        return False


def problem_code(args: Any) -> list[str]:
    """The user code an argument pair ``problem`` + ``options`` names: a problem file, or a model file among the options (at any depth)."""
    return [v for v in [args.problem, *_leaves(args.options)] if names_code(v)]


def _leaves(value: Any) -> Iterator[Any]:
    """The values inside nested dicts and lists (``options`` as JSON gives them)."""
    if isinstance(value, dict):
        for inner in value.values():
            yield from _leaves(inner)
    elif isinstance(value, list):
        for inner in value:
            yield from _leaves(inner)
    else:
        yield value


def check_tool(tool: Tool) -> None:
    """Raise ``TypeError`` unless ``tool`` satisfies the contract (used at registration)."""
    where = type(tool).__name__
    name = getattr(tool, "name", None)
    if not isinstance(name, str) or not NAME_PATTERN.match(name):
        raise TypeError(f"{where}.name must match {NAME_PATTERN.pattern}, got {name!r}")
    if not getattr(tool, "description", "").strip():
        raise TypeError(f"tool {name}: description is empty")
    args = getattr(tool, "Args", None)
    if not (isinstance(args, type) and issubclass(args, ToolArgs)):
        raise TypeError(f"tool {name}: Args must be a ToolArgs subclass")
    if not isinstance(getattr(tool, "example", None), dict):
        raise TypeError(f"tool {name}: example must be a dict of arguments")
    for declared in (*tool.writes, *tool.reads, *tool.loads_code):
        if declared not in args.model_fields:
            raise TypeError(f"tool {name}: writes/reads/loads_code names {declared!r}, which is not an argument")
    for arg, kind in tool.writes.items():
        if kind not in ("file", "storage"):
            raise TypeError(f"tool {name}: writes[{arg!r}] must be 'file' or 'storage', got {kind!r}")
    for arg, kind in tool.reads.items():
        if kind != "storage" or arg in tool.writes:
            raise TypeError(f"tool {name}: reads[{arg!r}] must be 'storage' and not also in writes, got {kind!r}")
    json.dumps(args.model_json_schema())


def describe_validation(tool: Tool, exc: ValidationError) -> str:
    """One-line explanation of a validation error: what is wrong, the fields, an example."""
    problems = []
    for err in exc.errors():
        loc = ".".join(str(p) for p in err["loc"]) or "(arguments)"
        given = err.get("input")
        # the value given, where it is a scalar (a missing field has none; a whole object would bury the message)
        shown = f" (got {given!r})" if isinstance(given, str | int | float | bool) and err["type"] != "missing" else ""
        problems.append(f"{loc}: {err['msg']}{shown}{_bounds_hint(tool, err)}")
    fields = ", ".join(f"{k}{'' if v.is_required() else '?'}" for k, v in tool.Args.model_fields.items())
    return f"bad arguments for {tool.name}: {'; '.join(problems)}. It takes: {fields}. Example: {json.dumps(tool.example)}"


_BOUND_ERRORS = frozenset({"greater_than", "greater_than_equal", "less_than", "less_than_equal"})


def _bounds_hint(tool: Tool, err: Any) -> str:
    """``; bounds: >= 1, <= 8`` for an error on a bounded field whose message does not say them (a 0.5 for an int)."""
    loc = err["loc"]
    if len(loc) != 1 or err["type"] in _BOUND_ERRORS or loc[0] not in tool.Args.model_fields:
        return ""
    signs = {"ge": ">=", "gt": ">", "le": "<=", "lt": "<"}
    bounds = [
        f"{sign} {getattr(m, attr)}"
        for m in tool.Args.model_fields[str(loc[0])].metadata
        for attr, sign in signs.items()
        if getattr(m, attr, None) is not None
    ]
    return f"; bounds: {', '.join(bounds)}" if bounds else ""
