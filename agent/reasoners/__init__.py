"""Reasoners: ``offline`` (statistics, no LLM; the embedded default) and ``llm`` (any
OpenAI-compatible endpoint). :func:`make_reasoner` picks one from flags and environment."""

from __future__ import annotations

import os

from agent.reasoners._base import KnowledgeContext, ProposeRequest, Reasoner, Usage
from agent.reasoners.offline import OfflineReasoner
from search.errors import UserInputError

ENV_BASE_URL = "COEVO_LLM_BASE_URL"
ENV_MODEL = "COEVO_LLM_MODEL"
ENV_API_KEY = "OPENAI_API_KEY"
OFFLINE_NOTE = f"reasoner: offline (no LLM). Set {ENV_BASE_URL} and {ENV_MODEL} (and {ENV_API_KEY} for hosted APIs) to use an LLM."


def llm_settings(
    base_url: str | None = None, model: str | None = None, api_key: str | None = None
) -> tuple[str | None, str | None, str | None]:
    """Flags first, environment second."""
    return (
        base_url or os.environ.get(ENV_BASE_URL) or None,
        model or os.environ.get(ENV_MODEL) or None,
        api_key or os.environ.get(ENV_API_KEY) or None,
    )


def make_reasoner(
    kind: str = "auto",
    *,
    base_url: str | None = None,
    model: str | None = None,
    api_key: str | None = None,
    storage: str | None = None,
    price_per_mtok: tuple[float, float] | None = None,
    timeout_s: float = 60.0,
) -> Reasoner:
    """Build a reasoner.

    Args:
        kind: ``auto`` (LLM when an endpoint and model are configured, else offline),
            ``offline`` or ``llm``.
        storage: the study's storage URL; the LLM response cache lives there.

    Raises:
        UserInputError: unknown kind, or ``llm`` without an endpoint or model.
    """
    base_url, model, api_key = llm_settings(base_url, model, api_key)
    if kind == "auto":
        kind = "llm" if base_url and model else "offline"
    if kind == "offline":
        return OfflineReasoner()
    if kind != "llm":
        raise UserInputError(f"unknown reasoner {kind!r}; valid reasoners: auto, llm, offline")
    if not base_url or not model:
        raise UserInputError(
            f"--reasoner llm needs an endpoint and a model: set {ENV_BASE_URL} and {ENV_MODEL} (or --llm-base-url / --llm-model)"
        )
    from agent.reasoners.cache import ResponseCache
    from agent.reasoners.llm import LLMReasoner

    return LLMReasoner(
        model=model, base_url=base_url, api_key=api_key, cache=ResponseCache(storage), price_per_mtok=price_per_mtok, timeout_s=timeout_s
    )


__all__ = ["OFFLINE_NOTE", "KnowledgeContext", "OfflineReasoner", "ProposeRequest", "Reasoner", "Usage", "llm_settings", "make_reasoner"]
