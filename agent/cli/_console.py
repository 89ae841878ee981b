"""The command line's two consoles: results on stdout, progress and errors on stderr.

A module of its own so that light commands (``problems``, ``models``, ``tools``) print
without importing what the search commands share (:mod:`agent.cli._common`).
"""

from __future__ import annotations

from coevo.agent.console import PipeConsole

out = PipeConsole(highlight=False)
err = PipeConsole(stderr=True, highlight=False)
