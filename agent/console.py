"""The rich console coevo prints through: one that lets a closed pipe end the command quietly."""

from __future__ import annotations

import os
from contextlib import suppress
from typing import IO

from rich.console import Console


def silence(stream: IO[str]) -> None:
    """Point ``stream``'s file descriptor at /dev/null, so the interpreter's last flush at exit finds no closed pipe."""
    with suppress(OSError, ValueError):  # no descriptor (a StringIO under a test), or one already gone
        devnull = os.open(os.devnull, os.O_WRONLY)
        try:
            os.dup2(devnull, stream.fileno())
        finally:
            os.close(devnull)


class PipeConsole(Console):
    """A rich console that lets a closed pipe (``coevo ... | head``) reach :func:`agent.cli.main`.

    rich's own handling exits with status 1, which reads as a failure; ``main`` answers
    ``BrokenPipeError`` with 141 (128 + SIGPIPE), as a Unix tool killed by SIGPIPE.
    """

    def on_broken_pipe(self) -> None:
        """Silence the stream whose reader went away (this console's) and let the error reach ``main``."""
        self.quiet = True
        silence(self.file)
        raise BrokenPipeError
