"""A registry of tools: explicit, validated at registration, with LLM-safe names."""

from __future__ import annotations

import importlib
import re
from collections.abc import Iterator, Mapping, Sequence

from coevo.search.errors import unknown_name
from coevo.tools._base import Tool, check_tool

_LLM_NAME = re.compile(r"^[A-Za-z0-9_-]{1,64}$")


def llm_name(name: str) -> str:
    """Function-calling name of a tool: dots become underscores (``nb201.query`` -> ``nb201_query``).

    OpenAI-style function names allow only letters, digits, ``_`` and ``-``.
    """
    return name.replace(".", "_")


class Registry:
    """An ordered set of tools addressed by name or by function-calling name.

    Raises ``ValueError`` on duplicate names (also after mapping to LLM names) and
    ``TypeError`` on a tool that breaks the contract.
    """

    def __init__(self, tools: Sequence[Tool]) -> None:
        self._tools: dict[str, Tool] = {}
        self._by_llm: dict[str, Tool] = {}
        for tool in tools:
            check_tool(tool)
            alias = llm_name(tool.name)
            if not _LLM_NAME.match(alias):
                raise TypeError(f"tool {tool.name}: function-calling name {alias!r} is not allowed")
            if tool.name in self._tools or alias in self._by_llm:
                raise ValueError(f"duplicate tool name {tool.name!r}")
            self._tools[tool.name] = tool
            self._by_llm[alias] = tool

    def __iter__(self) -> Iterator[Tool]:
        return iter(self._tools.values())

    def __len__(self) -> int:
        return len(self._tools)

    def names(self) -> list[str]:
        """Tool names in registration order."""
        return list(self._tools)

    def get(self, name: str) -> Tool:
        """The tool called ``name`` (its dotted or its function-calling name)."""
        tool = self._tools.get(name) or self._by_llm.get(name)
        if tool is None:
            raise unknown_name("tool", name, self._tools)
        return tool


class LazyRegistry(Registry):
    """A :class:`Registry` whose tools are imported on first use: ``name -> "module:Class"``.

    Start-up time: a tool module imports its simulator (torch, numba, OR-Tools, ...), so
    ``coevo tools run nb201.query`` would pay for every family before one table lookup.
    :meth:`names` and :meth:`get` import only what they need; iterating or ``len`` imports
    every tool. Names are checked when the registry is built (duplicates, function-calling
    form); each tool's contract, and that its class declares the name it is listed under,
    when it is imported.
    """

    def __init__(self, classes: Mapping[str, str]) -> None:
        super().__init__([])
        self._classes = dict(classes)
        self._llm_names: dict[str, str] = {}
        for name in self._classes:
            alias = llm_name(name)
            if not _LLM_NAME.match(alias):
                raise TypeError(f"tool {name}: function-calling name {alias!r} is not allowed")
            if alias in self._llm_names:
                raise ValueError(f"duplicate tool name {name!r}")
            self._llm_names[alias] = name

    def _load(self, name: str) -> Tool:
        tool = self._tools.get(name)
        if tool is not None:
            return tool
        module, _, attr = self._classes[name].partition(":")
        tool = getattr(importlib.import_module(module), attr)()
        check_tool(tool)
        if tool.name != name:
            raise TypeError(f"{self._classes[name]} declares the name {tool.name!r}, but is registered as {name!r}")
        self._tools[name] = tool
        self._by_llm[llm_name(name)] = tool
        return tool

    def _load_all(self) -> None:
        if len(self._tools) < len(self._classes):
            for name in self._classes:
                self._load(name)
            self._tools = {name: self._tools[name] for name in self._classes}  # registration order, whatever loaded first

    def __iter__(self) -> Iterator[Tool]:
        self._load_all()
        return super().__iter__()

    def __len__(self) -> int:
        return len(self._classes)

    def names(self) -> list[str]:
        """Tool names in registration order (nothing is imported)."""
        return list(self._classes)

    def get(self, name: str) -> Tool:
        """The tool called ``name`` (its dotted or its function-calling name), imported on first use."""
        dotted = name if name in self._classes else self._llm_names.get(name)
        if dotted is None:
            raise unknown_name("tool", name, self._classes)
        return self._load(dotted)
