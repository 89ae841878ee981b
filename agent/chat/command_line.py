"""The ``coevo`` command line as the chat's slash commands see it: handed in by the CLI, never imported.

``/search`` and ``/kb`` run ``coevo`` commands. The CLI sits above the chat package, so the
chat gets a :data:`CommandLine` from it (:func:`agent.cli.chat.in_process`) instead of
importing its entry point. Kept apart from :mod:`agent.chat.commands` so the CLI can name
these types without loading the chat machinery.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class CliRun:
    """How one ``coevo`` command run through a :data:`CommandLine` ended.

    Attributes:
        code: its exit status (0 done, 2 an error in what was asked).
        printed: what it printed on stdout.
        value: what it printed, as data (its JSON when it printed JSON, else the text; None when it printed nothing).
        error: its last line on stderr when it failed (what went wrong), else "".
    """

    code: int
    printed: str
    value: Any
    error: str = ""


CommandLine = Callable[[Sequence[str]], CliRun]
"""``argv -> CliRun``: runs ``coevo ARGV`` in this process (argparse's usage errors included, never exiting)."""
