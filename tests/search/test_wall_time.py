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


class _DyingWorker:
    """A worker whose run raises what the runner does not catch (a bug in a plug-in, a Ctrl-C outside the worker's handler)."""

    clock: FakeClock
    error: type[BaseException]

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        pass

    def run(self) -> Any:
        self.clock.now += 42.0  # it searched this long before it died
        raise self.error("the worker died")


@pytest.mark.parametrize("error", [RuntimeError, KeyboardInterrupt])
def test_an_invocation_that_raises_still_records_its_search_time(
    storage: str, monkeypatch: pytest.MonkeyPatch, error: type[BaseException]
) -> None:
    import optuna

    from coevo.search.study import search_seconds

    clock = FakeClock()
    _DyingWorker.clock, _DyingWorker.error = clock, error
    monkeypatch.setattr(runner, "Worker", _DyingWorker)
    problem = NB201Problem(dataset="cifar10", device="fpga")
    with pytest.raises(error, match="the worker died"):
        run_search(problem, "random", budget=3, storage=storage, study_name="s", clock=clock)
    assert search_seconds(optuna.load_study(study_name="s", storage=storage)) == pytest.approx(42.0)


def test_a_dead_storage_while_recording_leaves_the_original_error(storage: str, monkeypatch: pytest.MonkeyPatch) -> None:
    clock = FakeClock()
    _DyingWorker.clock, _DyingWorker.error = clock, RuntimeError
    monkeypatch.setattr(runner, "Worker", _DyingWorker)

    def dead(*args: Any, **kwargs: Any) -> None:
        raise OSError("the database is gone")

    monkeypatch.setattr(runner, "_record_search_time", dead)
    with pytest.raises(RuntimeError, match="the worker died"):
        run_search(NB201Problem(dataset="cifar10", device="fpga"), "random", budget=3, storage=storage, clock=clock)
