"""``coevo chat``: an interactive session with the agent over the tools, or slash commands without an LLM."""

from __future__ import annotations

import argparse

from coevo.agent.chat.options import add_arguments as add_chat_arguments
from coevo.search.problem import Problem

HELP = "interactive session: questions to an LLM agent over the tools, or slash commands"


def add_arguments(p: argparse.ArgumentParser, problem: type[Problem] | None) -> None:
    """Options of ``coevo chat`` (kept in agent.chat.options)."""
    add_chat_arguments(p)


def run(args: argparse.Namespace) -> int:
    """Run ``coevo chat``."""
    from coevo.agent.chat.repl import run as run_chat

    return run_chat(args)
