"""One JSON object on stdout for a ``--json`` caller, errors included.

Shared by the command line (``coevo search --json`` and the other commands with ``--json``)
and ``coevo chat --once ... --json``, so a script reads an error the same way from both: the
object it gets has ``error`` (the one-line message) and ``exit_code`` (the process's status).
"""

from __future__ import annotations

import sys
from collections.abc import Mapping
from typing import Any, TextIO

from coevo.search.strict_json import strict_dumps


def error_fields(message: str, exit_code: int) -> dict[str, Any]:
    """What a ``--json`` caller reads an error from: ``{"error": message, "exit_code": exit_code}``.

    >>> error_fields("--budget must be 0 or more", 2)
    {'error': '--budget must be 0 or more', 'exit_code': 2}
    """
    return {"error": message, "exit_code": exit_code}


def print_object(record: Mapping[str, Any], stream: TextIO | None = None) -> None:
    """``record`` as one line of JSON on ``stream`` (default: stdout), flushed: the call's result for a script.

    Values JSON has no form for (a path, a datetime) are written as their text; a NaN or infinite float as null
    with a note (:func:`search.strict_json.strict_dumps`).
    """
    target = sys.stdout if stream is None else stream
    target.write(strict_dumps(record) + "\n")
    target.flush()
