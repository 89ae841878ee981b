"""From a :class:`~coevo.search.config.SearchConfig` to the objects a search runs: the agent's half.

search/ builds problems and proposers from a configuration on its own, but the reasoner of
the co-evolution engine is built here, in agent/: with the study's storage for its response
cache, the environment read for what the configuration leaves out, a knowledge-base source
checked before anything is created, and (for a worker) the study's stored settings
completed by this machine's endpoint and key. The CLI, ``coevo.optimize`` and ``coevo worker``
all come through these two functions.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from coevo.agent.reasoners import Reasoner, build_reasoner, joined_reasoner
from coevo.knowledge.kb_from import check_kb_from, with_kb_from_checked
from coevo.search.config import FLAGS, EngineOptions, ReasonerConfig, SearchConfig
from coevo.search.proposers import Proposer, takes_reasoner


def make_proposer(
    config: SearchConfig, *, reasoner: Reasoner | None = None, on_reasoner: Callable[[Reasoner], None] | None = None
) -> Proposer:
    """The proposer of ``config``, its reasoner built from ``config.reasoner`` (or ``reasoner``, built already).

    Args:
        config: the search.
        reasoner: a reasoner instance to use instead of building one.
        on_reasoner: called with the reasoner before the proposer is built (the CLI says which
            one runs and checks its endpoint there).

    Raises:
        UserInputError: a reasoner that cannot be built, or a ``kb_from`` source that does not
            exist or does not fit the search (:func:`knowledge.kb_from.check_kb_from`).
    """
    if not config.takes_reasoner():
        return config.make_proposer()
    if reasoner is None and config.reasoner is not None:
        reasoner = build_reasoner(config.reasoner, storage=config.storage)
    config = with_kb_from_checked(config)
    if reasoner is not None and on_reasoner is not None:
        on_reasoner(reasoner)
    return config.make_proposer(reasoner)


def joined_search(
    stored: Any,
    local: ReasonerConfig,
    *,
    storage: str | None,
    study: str,
    engine: EngineOptions | None = None,
    on_reasoner: Callable[[Reasoner], None] | None = None,
    eval_timeout_s: float | None = None,
) -> tuple[SearchConfig, Proposer]:
    """A worker's configuration and proposer for the study it joins, rebuilt from what the study stores.

    Args:
        stored: the study read back (:func:`search.study.load_search`).
        local: the reasoner settings this worker was given: its endpoint URL and key reach the
            study's LLM from here; it may not ask for another reasoner (:func:`joined_reasoner`).
        storage: the storage URL.
        study: the study name.
        engine: the engine flags, for a study made before proposers stored their options
            (then the worker's own flags describe the proposer).
        on_reasoner: called with the reasoner before the proposer is built.
        eval_timeout_s: this worker's ``--eval-timeout`` (None: the problem's own limit).

    Raises:
        UserInputError: a stored setting that is no longer valid, a bad ``--eval-timeout``, or a
            worker asking for another reasoner.
    """
    own: dict[str, Any] = {"storage": storage, "study": study, "eval_timeout_s": eval_timeout_s, "names": FLAGS}
    if not stored.proposer_options:
        flags: dict[str, Any] = {"reasoner": local if takes_reasoner(stored.proposer) else None, "engine": engine}
        config = SearchConfig.from_stored(stored, **own, **flags)
        return config, make_proposer(config, on_reasoner=on_reasoner)
    config = SearchConfig.from_stored(stored, **own)
    if not config.takes_reasoner():
        return config, config.make_proposer()
    reasoner = joined_reasoner(config.reasoner, local, study_name=study, storage=storage)
    if on_reasoner is not None:
        on_reasoner(reasoner)
    return config, config.make_proposer(reasoner)


__all__ = ["check_kb_from", "joined_search", "make_proposer"]
