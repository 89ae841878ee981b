"""Options of ``coevo chat`` (kept apart from the chat machinery, so building the CLI parser stays light)."""

from __future__ import annotations

import argparse

from coevo.agent.reasoners import ENV_API_KEY, ENV_BASE_URL, ENV_MODEL
from coevo.search.config import DEFAULT_LLM_TIMEOUT_S, LLM_TIMEOUT_HELP
from coevo.search.storage import DEFAULT_STORAGE

ENV_WORKSPACE = "COEVO_WORKSPACE"  # tools.ENV_WORKSPACE; not imported, so building the parser stays light (a test ties them)
MAX_STEPS = 8
"""Model calls per chat turn at most (``--max-steps``): a turn that keeps calling tools stops there and says so."""


def add_arguments(p: argparse.ArgumentParser) -> None:
    """Options of ``coevo chat``."""
    p.add_argument("--session", default=None, help="resume this session (e.g. S3) instead of starting a new one")
    p.add_argument("--once", default=None, metavar="TEXT", help="one turn (a question, or a /command) and exit")
    p.add_argument("--json", action="store_true", help="with --once: print exactly one JSON object on stdout (no tables; errors on stderr)")
    p.add_argument(
        "--yes",
        action="store_true",
        help="with --once: allow tools that ask first (long runs, knowledge-base edits, loading your code), called by /run or the "
        "model; /search and /kb run as `coevo search` and `coevo kb` do, without asking",
    )
    p.add_argument(
        "--storage",
        default=None,
        help=f"storage URL for studies and sessions (default: {DEFAULT_STORAGE}); the tools use it when no storage is named",
    )
    p.add_argument(
        "--allow-storage",
        action="append",
        default=[],
        metavar="URL",
        help="another storage the model's tool calls may use (repeat for more); without it they reach only --storage, "
        "in-memory SQLite and SQLite files under the workspace",
    )
    p.add_argument(
        "--workspace",
        default=None,
        help=f"the only folder the model's tool calls may write under (env {ENV_WORKSPACE}; default: the storage's folder, ./runs)",
    )
    p.add_argument("--llm-base-url", default=None, help=f"OpenAI-compatible endpoint (env {ENV_BASE_URL})")
    p.add_argument("--llm-model", default=None, help=f"model name (env {ENV_MODEL})")
    p.add_argument("--llm-api-key", default=None, help=f"API key (env {ENV_API_KEY}); local servers need none")
    p.add_argument(
        "--llm-timeout", type=float, default=DEFAULT_LLM_TIMEOUT_S, help=f"{LLM_TIMEOUT_HELP} (default: {DEFAULT_LLM_TIMEOUT_S:g})"
    )
    p.add_argument("--llm-price", default=None, help="input,output USD per million tokens, for the cost footer")
    p.add_argument("--max-steps", type=int, default=MAX_STEPS, help=f"model calls per turn at most (default: {MAX_STEPS})")
    p.add_argument("--no-stream", action="store_true", help="wait for whole replies instead of streaming them")
