"""What every conformance suite is made of: named checks that raise :class:`ConformanceError`.

The checks are plain functions, so a suite runs under any test runner (or none) and importing
it never imports pytest.
"""

from __future__ import annotations

import re
import unittest
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Generic, TypeVar

S = TypeVar("S")


class ConformanceError(AssertionError):
    """A tool, problem or proposer breaks the contract; the message names the check and what was wrong."""


class CheckSkipped(unittest.SkipTest):
    """The check does not apply to this subject (a problem the co-evolution engine does not search); pytest reports a skip."""


@dataclass(frozen=True)
class Check(Generic[S]):
    """One named check of a suite: call it with the subject; it returns nothing or raises.

    Attributes:
        name: short id (``example_runs``); ``str(check)`` is the name, so it serves as a pytest id.
        func: the check; raises :class:`ConformanceError` when the subject breaks the contract,
            :class:`CheckSkipped` when it does not apply (any other exception is the subject
            failing while it was checked).
        runs_example: True when the check runs the subject's example (tools with a slow
            example mark these checks slow).
    """

    name: str
    func: Callable[[S], None]
    runs_example: bool = False

    def __call__(self, subject: S) -> None:
        self.func(subject)

    def __str__(self) -> str:
        return self.name

    @property
    def description(self) -> str:
        """The first line of the check's docstring: what it demands."""
        return (self.func.__doc__ or self.name).strip().splitlines()[0]


def expect(condition: object, message: str) -> None:
    """Raise :class:`ConformanceError` with ``message`` unless ``condition`` holds (``assert`` disappears under ``python -O``)."""
    if not condition:
        raise ConformanceError(message)


def raised(kind: type[BaseException], call: Callable[[], object], *, what: str, pattern: str = "") -> BaseException:
    """Call ``call`` and demand that it raises ``kind`` with a message matching ``pattern`` (``re.search``), as ``pytest.raises`` does.

    Args:
        kind: the exception class the call must raise.
        call: what to call.
        what: what the call does, for the failure message (``"an unknown argument"``).
        pattern: a regular expression the message must match.

    Returns:
        The exception, for checks that read more of it.

    Raises:
        ConformanceError: the call returned, or raised something else.
    """
    try:
        call()
    except kind as exc:
        if not re.search(pattern, str(exc)):
            raise ConformanceError(f"{what} raised {type(exc).__name__} without {pattern!r} in its message: {exc}") from exc
        return exc
    except Exception as exc:
        raise ConformanceError(f"{what} raised {type(exc).__name__} ({exc}), not {kind.__name__}") from exc
    raise ConformanceError(f"{what} raised nothing; expected {kind.__name__} matching {pattern!r}")


def run_checks(checks: Iterable[Check[S]], subject: S, *, label: str) -> None:
    """Run every check on ``subject`` (passing over those that do not apply); the first failure raises, named.

    Args:
        checks: the suite.
        subject: what the checks run on.
        label: names the subject in the message (``tool nb201.query``).

    Raises:
        ConformanceError: a check failed.
    """
    for check in checks:
        try:
            check(subject)
        except CheckSkipped:
            continue
        except ConformanceError as exc:
            raise ConformanceError(f"{label}: check {check.name} ({check.description}): {exc}") from exc
