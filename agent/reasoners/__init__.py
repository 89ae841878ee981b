"""Reasoners: ``offline`` (statistics, no LLM; the embedded default) and ``llm`` (any
OpenAI-compatible endpoint). :func:`build_reasoner` builds one from its :class:`ReasonerConfig`
(flags first, environment second); :func:`joined_reasoner` rebuilds a study's for a worker."""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any, Literal

from coevo.agent.reasoners import cache as _cache  # noqa: F401  (registers the purge of a study's cached replies)
from coevo.agent.reasoners._base import KnowledgeContext, ProposeRequest, Reasoner, Usage
from coevo.agent.reasoners.offline import OfflineReasoner
from coevo.search.config import ReasonerConfig
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


def resolve_kind(config: ReasonerConfig) -> Literal["offline", "llm"]:
    """The reasoner ``config`` asks for: ``auto`` is the LLM when an endpoint and a model are configured (flags, then
    environment: :func:`llm_settings`), else offline."""
    if config.kind != "auto":
        return config.kind
    base_url, model, _ = llm_settings(config.base_url, config.model, config.api_key)
    return "llm" if base_url and model else "offline"


def offline_note(config: ReasonerConfig | None = None) -> str:
    """The line that says the offline reasoner runs, and why: asked for, or what is missing to use an LLM.

    ``auto`` with only half of an LLM's settings (an endpoint without a model, or the reverse) runs offline too; the
    line names the half that is set and the one that is missing, instead of asking for both.
    """
    config = config or ReasonerConfig()
    if config.kind == "offline":
        return "reasoner: offline (no LLM), as asked (--reasoner offline)."
    base_url, model, _ = llm_settings(config.base_url, config.model, config.api_key)
    if base_url and not model:
        return f"reasoner: offline (no LLM): an endpoint is set ({base_url}) but no model; set {ENV_MODEL} (or --llm-model) to use it."
    if model and not base_url:
        return f"reasoner: offline (no LLM): a model is set ({model}) but no endpoint; set {ENV_BASE_URL} (or --llm-base-url) to use it."
    return OFFLINE_NOTE


def reasoner_config(values: Mapping[str, Any] | ReasonerConfig | None = None) -> ReasonerConfig:
    """Validate reasoner settings (None values left at their defaults); a config passes as it is.

    Raises:
        UserInputError: a bad field, named, with what it may be.
    """
    if isinstance(values, ReasonerConfig):
        return values
    return ReasonerConfig.create(**(values or {}))


def build_reasoner(config: ReasonerConfig | None = None, *, storage: str | None = None) -> Reasoner:
    """Build the reasoner of ``config`` (None: the defaults): flags first, environment second.

    Args:
        config: the settings; what is None there is read from ``COEVO_LLM_BASE_URL``,
            ``COEVO_LLM_MODEL`` and ``OPENAI_API_KEY``. ``kind="auto"`` is the LLM when an
            endpoint and a model are configured, else offline. A ``base_url`` of ``simulated``
            starts a loopback endpoint of simulated reasoners in this process
            (:mod:`agent.reasoners.simulated`; models ``sim-...``); a model of several names with
            weights (``a:3,b:1``) is an :class:`LLMEnsemble`.
        storage: the study's storage URL, where the LLM response cache lives; None: the storage
            each request names (the study's).

    Raises:
        UserInputError: ``llm`` without an endpoint or model, or an unknown simulated model.
    """
    config = config or ReasonerConfig()
    base_url, model, api_key = llm_settings(config.base_url, config.model, config.api_key)
    if resolve_kind(config) == "offline":
        offline = OfflineReasoner(guided=config.guided)
        offline.note = offline_note(config)
        return offline
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
            price_per_mtok=config.price_per_mtok,
            timeout_s=config.timeout_s,
            tools=config.tools,
            public_url=base_url,
        )
        if simulated:
            reasoner.label = f"simulated:{name} (no LLM)"
        return reasoner

    models = parse_models(model)
    if len(models) == 1:
        return one(models[0][0])
    return LLMEnsemble([(one(name), weight) for name, weight in models])


def make_reasoner(
    kind: str | None = None,
    *,
    base_url: str | None = None,
    model: str | None = None,
    api_key: str | None = None,
    storage: str | None = None,
    price_per_mtok: tuple[float, float] | None = None,
    timeout_s: float | None = None,
    tools: bool | None = None,
) -> Reasoner:
    """Build a reasoner from keywords: :func:`build_reasoner` of their :class:`ReasonerConfig` (None: its default).

    Args:
        kind: ``auto`` (LLM when an endpoint and a model are configured, else offline; the
            default), ``offline`` or ``llm``.
        base_url: the endpoint (``simulated``: simulated reasoners on loopback).
        model: a model name, or several with weights (``a:3,b:1``).
        storage: the study's storage URL, where the LLM response cache lives.
        tools: let the LLM call the round's cheap read-only tools while it proposes.

    Raises:
        UserInputError: a bad setting (named), or ``llm`` without an endpoint or model.
    """
    values: dict[str, Any] = {"kind": kind, "base_url": base_url, "model": model, "api_key": api_key}
    values |= {"price_per_mtok": price_per_mtok, "timeout_s": timeout_s, "tools": tools}
    return build_reasoner(reasoner_config(values), storage=storage)


def reasoner_from_config(
    config: Mapping[str, Any] | ReasonerConfig,
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
    ``coevo bench`` set), then ``OPENAI_API_KEY`` (keys are never stored). Settings that are
    not a study's (``kind`` auto) are built as given.

    Raises:
        UserInputError: ``model`` names another model than the study's, or a stored setting is invalid.
    """
    settings = reasoner_config(config)
    if settings.kind != "llm":
        rebuilt = build_reasoner(settings, storage=storage)
        if isinstance(rebuilt, OfflineReasoner) and settings.kind == "offline":
            rebuilt.note = "reasoner: offline (no LLM), the study's reasoner"  # nobody here asked for it with a flag
        return rebuilt
    if model and model != settings.model:
        raise UserInputError(f"this study's reasoner is llm:{settings.model}; a worker cannot join it with --llm-model {model}")
    env_url, _, _ = llm_settings()
    update: dict[str, Any] = {"base_url": base_url or env_url or settings.base_url, "api_key": api_key or settings.api_key}
    if timeout_s is not None:
        update["timeout_s"] = timeout_s
    if price_per_mtok:
        update["price_per_mtok"] = price_per_mtok
    return build_reasoner(reasoner_config({**settings.model_dump(), **update}), storage=storage)


def joined_reasoner(study: ReasonerConfig | None, local: ReasonerConfig, *, study_name: str, storage: str | None) -> Reasoner:
    """The reasoner of a worker joining study ``study_name``: the study's (``study``; None: offline), reached from here.

    ``local`` is what this worker was given (flags): its endpoint URL and key complete the
    study's LLM settings (:func:`reasoner_from_config`), and its price replaces the stored one;
    its kind, model and URL may not ask for another reasoner than the study's.

    Raises:
        UserInputError: ``local`` asks for another reasoner or model than the study's.
    """
    study = study or ReasonerConfig(kind="offline")
    if (local.kind != "auto" and local.kind != study.kind) or (study.kind == "offline" and (local.model or local.base_url)):
        raise UserInputError(
            f"study {study_name!r} runs the {study.kind} reasoner and a worker joins with the study's reasoner: leave --reasoner and "
            "--llm-model/--llm-base-url out"
        )
    return reasoner_from_config(
        study, storage=storage, base_url=local.base_url, model=local.model, api_key=local.api_key, price_per_mtok=local.price_per_mtok
    )


__all__ = [
    "OFFLINE_NOTE",
    "SIMULATED",
    "KnowledgeContext",
    "OfflineReasoner",
    "ProposeRequest",
    "Reasoner",
    "ReasonerConfig",
    "Usage",
    "build_reasoner",
    "joined_reasoner",
    "llm_settings",
    "make_reasoner",
    "offline_note",
    "reasoner_config",
    "reasoner_from_config",
    "resolve_kind",
]
