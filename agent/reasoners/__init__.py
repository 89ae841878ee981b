"""Reasoners: ``offline`` (statistics, no LLM; the embedded default) and ``llm`` (any
OpenAI-compatible endpoint). :func:`make_reasoner` picks one from flags and environment."""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

from coevo.agent.reasoners import cache as _cache  # noqa: F401  (registers the purge of a study's cached replies)
from coevo.agent.reasoners._base import KnowledgeContext, ProposeRequest, Reasoner, Usage
from coevo.agent.reasoners.offline import OfflineReasoner
from coevo.search.errors import UserInputError

ENV_BASE_URL = "COEVO_LLM_BASE_URL"
ENV_MODEL = "COEVO_LLM_MODEL"
ENV_API_KEY = "OPENAI_API_KEY"
SIMULATED = "simulated"
"""The endpoint name that starts simulated reasoners (:mod:`agent.reasoners.simulated`)."""
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
    tools: bool = True,
) -> Reasoner:
    """Build a reasoner.

    Args:
        kind: ``auto`` (LLM when an endpoint and model are configured, else offline),
            ``offline`` or ``llm``.
        base_url: the endpoint; ``simulated`` starts a loopback endpoint of simulated
            reasoners in this process (:mod:`agent.reasoners.simulated`; models ``sim-...``).
        model: a model name, or several with weights (``a:3,b:1``: an :class:`LLMEnsemble`).
        storage: the study's storage URL, where the LLM response cache lives; None: the storage
            each request names (the study's).
        tools: let the LLM call the round's cheap read-only tools while it proposes.

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
    from coevo.agent.reasoners.cache import ResponseCache
    from coevo.agent.reasoners.ensemble import LLMEnsemble, parse_models
    from coevo.agent.reasoners.llm import LLMReasoner

    simulated = base_url == SIMULATED
    if simulated:
        from coevo.agent.reasoners.simulated import Quality, shared_endpoint

    def one(name: str) -> LLMReasoner:
        if simulated:
            Quality.parse(name)  # a wrong name fails here, before the search starts
        reasoner = LLMReasoner(
            model=name,
            base_url=shared_endpoint().url if simulated else str(base_url),
            api_key=api_key,
            cache=ResponseCache(storage) if storage is not None else None,
            price_per_mtok=price_per_mtok,
            timeout_s=timeout_s,
            tools=tools,
            public_url=base_url,
        )
        if simulated:
            reasoner.label = f"simulated:{name} (no LLM)"
        return reasoner

    models = parse_models(model)
    if len(models) == 1:
        return one(models[0][0])
    return LLMEnsemble([(one(name), weight) for name, weight in models])


def reasoner_from_config(
    config: Mapping[str, Any],
    *,
    storage: str | None = None,
    base_url: str | None = None,
    model: str | None = None,
    api_key: str | None = None,
    timeout_s: float | None = None,
    price_per_mtok: tuple[float, float] | None = None,
) -> Reasoner:
    """Rebuild the reasoner a study was made with (:meth:`Reasoner.config`), for a worker that joins it.

    The model is the study's: it shapes the search. Where this machine reaches the endpoint
    differently, ``base_url`` (flag, then ``COEVO_LLM_BASE_URL``) wins over the stored URL; the
    key comes from ``api_key`` (or ``config["api_key"]``, which only in-process callers such as
    ``coevo bench`` set), then ``OPENAI_API_KEY`` (keys are never stored).

    Raises:
        UserInputError: ``model`` names another model than the study's.
    """
    if config.get("kind", "offline") == "offline":
        return OfflineReasoner(guided=bool(config.get("guided", True)))
    stored = str(config.get("model") or "")
    if model and model != stored:
        raise UserInputError(f"this study's reasoner is llm:{stored}; a worker cannot join it with --llm-model {model}")
    price = price_per_mtok or (tuple(config["price_per_mtok"]) if config.get("price_per_mtok") else None)
    env_url, _, _ = llm_settings()
    return make_reasoner(
        "llm",
        base_url=base_url or env_url or config.get("base_url"),
        model=stored,
        api_key=api_key or config.get("api_key"),
        storage=storage,
        price_per_mtok=price,
        timeout_s=float(timeout_s if timeout_s is not None else config.get("timeout_s", 60.0)),
        tools=bool(config.get("tools", True)),
    )


__all__ = [
    "OFFLINE_NOTE",
    "SIMULATED",
    "KnowledgeContext",
    "OfflineReasoner",
    "ProposeRequest",
    "Reasoner",
    "Usage",
    "llm_settings",
    "make_reasoner",
    "reasoner_from_config",
]
