"""A search result's ``wall_s`` is the whole wait: from the command's start through the final scoring."""

from __future__ import annotations

from typing import Any

import pytest

from coevo.search import runner
from coevo.search.nb201.problem import NB201Problem
from coevo.search.runner import run_search


class FakeClock:
    """A clock that moves only when the test moves it."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_wall_s_counts_from_the_given_start_through_the_final_scoring(storage: str, monkeypatch: pytest.MonkeyPatch) -> None:
    clock = FakeClock()
    command_start = clock()
    clock.now += 7.0  # building the problem and the proposer before the search starts
    original = runner.summarize

    def slow_summarize(*args: Any, **kwargs: Any) -> runner.SearchResult:
        clock.now += 100.0  # the final scoring (few-shot's prediction stage) takes long
        return original(*args, **kwargs)

    monkeypatch.setattr(runner, "summarize", slow_summarize)
    problem = NB201Problem(dataset="cifar10", device="fpga")
    result = run_search(problem, "random", budget=3, storage=storage, started=command_start, clock=clock)
    assert result.wall_s == pytest.approx(107.0)
    again = run_search(problem, "random", budget=4, storage=storage, clock=clock)  # no start given: from the call
    assert again.wall_s == pytest.approx(100.0)
