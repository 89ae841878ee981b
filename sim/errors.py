"""The error types every coevo layer raises, defined here at the bottom so the simulators need nothing above them.

sim/ imports nothing else of coevo's (a layering contract checked by ``make test``); the
layers above re-export these from :mod:`search.errors`. Two families, so that callers (a
person at the CLI, an LLM in chat) can tell what to do:

* :class:`UserInputError`: the request was wrong (bad arch string, unknown device, budget
  <= 0, ...). The message says what to change. The CLI prints it on one line, no traceback.
* :class:`CoevoError` (other subclasses): something failed while doing a valid request.
"""

from __future__ import annotations

from collections.abc import Iterable


class CoevoError(Exception):
    """Base class of all errors raised on purpose by coevo."""


class UserInputError(CoevoError, ValueError):
    """The caller's input is invalid; the message says how to fix it."""


def unknown_name(kind: str, name: str, valid: Iterable[str]) -> UserInputError:
    """Build the standard "unknown X" error that lists the valid choices."""
    choices = ", ".join(sorted(valid))
    return UserInputError(f"unknown {kind} {name!r}; valid {kind}s: {choices}")
