"""Prompt templates shipped as package data: YAML files with Jinja placeholders.

Each file has ``description``, ``variables`` (every placeholder the templates use) and
``messages`` (a list of ``{role, content}``). :func:`load_prompt` checks at load time that
the declared variables are exactly the placeholders used, so a typo fails at start-up, not
mid-run; rendering with a variable missing raises too (StrictUndefined).
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from importlib import resources
from typing import Any

import jinja2
import jinja2.meta
import yaml

_ENV = jinja2.Environment(undefined=jinja2.StrictUndefined, trim_blocks=True, lstrip_blocks=True, autoescape=False)


@dataclass(frozen=True)
class PromptTemplate:
    """A loaded, checked template."""

    name: str
    description: str
    variables: frozenset[str]
    messages: tuple[tuple[str, jinja2.Template], ...]

    def render(self, **values: Any) -> list[dict[str, str]]:
        """Chat messages with every placeholder filled.

        Raises:
            ValueError: a declared variable is missing or an unknown one is given.
        """
        missing = self.variables - values.keys()
        extra = values.keys() - self.variables
        if missing or extra:
            raise ValueError(f"prompt {self.name}: missing {sorted(missing)}, unexpected {sorted(extra)}")
        return [{"role": role, "content": template.render(**values).strip()} for role, template in self.messages]


@functools.cache
def load_prompt(name: str) -> PromptTemplate:
    """Load ``prompts/<name>.yaml`` and check its placeholders."""
    text = resources.files("prompts").joinpath(f"{name}.yaml").read_text()
    data = yaml.safe_load(text)
    declared = frozenset(data["variables"])
    used: set[str] = set()
    messages = []
    for message in data["messages"]:
        used |= jinja2.meta.find_undeclared_variables(_ENV.parse(message["content"]))
        messages.append((message["role"], _ENV.from_string(message["content"])))
    if used != declared:
        raise ValueError(f"prompt {name}: placeholders {sorted(used)} differ from declared variables {sorted(declared)}")
    return PromptTemplate(name, data.get("description", ""), declared, tuple(messages))


PROMPTS = ("propose", "kb_update", "chat_system")
"""The templates coevo ships; all are loaded and checked by the test suite and at reasoner start-up."""
