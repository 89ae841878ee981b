"""``--kb-from`` checked before a search starts, and the study name a search of a configuration gets.

Below agent/ so that the ``search.start`` tool and the CLI name a study alike: the name carries the
proposer's variant (:attr:`Proposer.variant`: ``-kbfrom-<source>`` with what it seeds, the LLM's model,
``-noscreen``...), and what ``--kb-from`` seeds is settled here, from the source, when it is not given.
"""

from __future__ import annotations

from coevo.knowledge.exchange import source_records
from coevo.search.config import DEFAULT_KB_FROM_USE, KbFromUse, SearchConfig
from coevo.search.errors import UserInputError
from coevo.search.problem import Problem
from coevo.search.runner import study_name_of
from coevo.search.transfer import heuristics_only, nothing_paid, prior_evidence


def check_kb_from(config: SearchConfig, problem: Problem | None = None) -> KbFromUse | None:
    """Check ``config``'s ``--kb-from`` source before the study exists: one line, nothing created.

    The source must exist (an export file, or a study or knowledge base in the storage), be of
    the search's problem (or of the predicted part of a composed one, whose objective must carry
    over: :func:`search.transfer.part_compatibility`; or of another part with the same parameters,
    which seeds heuristics only: :func:`search.transfer.heuristic_compatibility`), and have the
    same objectives with the same directions and units (:func:`search.transfer.prior_evidence`
    for a study's evaluations,
    :func:`knowledge.exchange.source_records` for its heuristics). Other option values (another
    device, another dataset) are what transfer is for, and pass.

    Args:
        config: the search.
        problem: its problem, built already (else built from ``config``).

    Returns:
        What the source seeds (``--kb-from-use``): the value given, else :data:`DEFAULT_KB_FROM_USE`,
        except that a source with no paid evaluations (an export file, a knowledge base whose study
        is elsewhere) or none that label the joint design (a study of a part that is not predicted)
        seeds its heuristics when no value was given; None without a source.

    Raises:
        UserInputError: a source that does not exist or does not fit the search, or a study that
            seeds heuristics only with ``--kb-from-use`` evaluations or both.
    """
    source = config.engine.kb_from
    if not source:
        return None
    use = config.engine.kb_from_use or DEFAULT_KB_FROM_USE
    problem = problem if problem is not None else config.make_problem()
    evidence = prior_evidence(problem, config.storage, source)  # first: a study of another problem says so, even with no knowledge base
    if evidence.heuristics_only and config.engine.kb_from_use not in (None, "heuristics"):
        raise heuristics_only(evidence, problem, use)
    if (evidence.study is None or evidence.heuristics_only) and config.engine.kb_from_use is None:
        use = "heuristics"  # nothing was paid there, or nothing that labels a joint design: its heuristics are all it has to give
    if use == "evaluations":
        if evidence.study is None:
            raise nothing_paid(source)
        return use
    try:
        source_records(config.storage, source, problem)
    except UserInputError:
        if evidence.study is None or use == "heuristics":
            raise
        # a study without a knowledge base (a tpe run, a short pelnas run) still seeds the predictor with its evaluations
    return use


def with_kb_from_checked(config: SearchConfig, problem: Problem | None = None) -> SearchConfig:
    """``config`` with its ``--kb-from`` source checked and what it seeds settled (:func:`check_kb_from`); as it is without one.

    Raises:
        UserInputError: as :func:`check_kb_from`.
    """
    if not config.engine.kb_from:
        return config
    use = check_kb_from(config, problem)
    return config.model_copy(update={"engine": config.engine.model_copy(update={"kb_from_use": use})})


def search_study_name(config: SearchConfig, problem: Problem | None = None) -> str:
    """The study a search of ``config`` runs on: its ``study``, else the runner's default name of the proposer it builds.

    The one way every caller names a search from its configuration (``coevo kb``, the ``search.start``
    tool), so the name is the one ``coevo search`` with the same flags gives (:func:`search.runner.study_name_of`,
    variant included). ``problem``: built already (else built here).

    Raises:
        UserInputError: a bad ``--kb-from`` source (:func:`check_kb_from`), or a proposer that cannot be built.
    """
    if config.study:
        return config.study
    problem = problem if problem is not None else config.make_problem()
    return study_name_of(problem, with_kb_from_checked(config, problem).make_proposer(), config.seed)


__all__ = ["check_kb_from", "search_study_name", "with_kb_from_checked"]
