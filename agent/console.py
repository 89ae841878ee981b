"""The rich console coevo prints through: one that lets a closed pipe end the command quietly."""

from __future__ import annotations

import os
import sys

from rich.console import Console


class PipeConsole(Console):
    """A rich console that lets a closed pipe (``coevo ... | head``) reach :func:`agent.cli.main`.

    rich's own handling exits with status 1, which reads as a failure; ``main`` answers
    ``BrokenPipeError`` with 141 (128 + SIGPIPE), as a Unix tool killed by SIGPIPE.
    """

    def on_broken_pipe(self) -> None:
        self.quiet = True
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())  # the interpreter's last flush at exit finds no pipe
        raise BrokenPipeError
