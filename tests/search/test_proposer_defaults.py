"""The fairness rule's "same settings": every proposer that proposes in rounds asks for the same round by default."""

from __future__ import annotations

import inspect

from coevo.agent.coevolution import CoevolutionProposer
from coevo.search.proposers import ROUND_SIZE, get_proposer, proposer_factory, proposer_names


def test_every_proposer_that_proposes_in_rounds_built_with_defaults_asks_for_the_same_round() -> None:
    built = {name: get_proposer(name).options() for name in proposer_names() if not name.startswith("pelnas")}
    rounds = {name: options["round_size"] for name, options in built.items() if "round_size" in options}
    assert set(rounds) == {"mobo", "qnehvi", "nsga2-screened", "smsemoa-screened"}
    engine = inspect.signature(CoevolutionProposer).parameters["round_size"].default
    assert set(rounds.values()) == {engine} == {ROUND_SIZE}


def test_a_baseline_s_options_are_its_constructor_s_keywords() -> None:
    for name in ("mobo", "qnehvi", "nsga2-screened", "smsemoa-screened"):
        named = set(inspect.signature(proposer_factory(name)).parameters)
        assert named == set(get_proposer(name).options()), name
