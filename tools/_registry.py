"""A registry of tools: explicit, validated at registration, with LLM-safe names."""

from __future__ import annotations

import re
from collections.abc import Iterator, Sequence

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
