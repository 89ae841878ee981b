"""Error types shared by every coevo package.

Two families, so that callers (a person at the CLI, an LLM in chat) can tell what to do:

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


class StorageError(CoevoError):
    """A storage URL could not be opened or used; the message names the URL and a fix."""


class StorageMissingError(StorageError, UserInputError):
    """A read-only caller found nothing stored at a storage URL (no file, no tables); nothing was created.

    Also a :class:`UserInputError`: the URL names nothing yet, which the caller can fix.
    """


def unknown_name(kind: str, name: str, valid: Iterable[str]) -> UserInputError:
    """Build the standard "unknown X" error that lists the valid choices."""
    choices = ", ".join(sorted(valid))
    return UserInputError(f"unknown {kind} {name!r}; valid {kind}s: {choices}")
