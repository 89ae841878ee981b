from __future__ import annotations

import sqlite3
from pathlib import Path

import optuna
import pytest

from coevo.search.errors import StorageError, UserInputError
from coevo.search.nb201 import NB201Problem, mutations, parse_arch
from coevo.search.proposers import Evaluation, Proposal, Proposer, RoundContext
from coevo.search.runner import run_search
from tests.helpers import kill_after_trials


@pytest.fixture(scope="module")
def problem() -> NB201Problem:
    return NB201Problem(dataset="cifar10", device="fpga")


def _queried(storage: str, study: str) -> list[str]:
    s = optuna.load_study(study_name=study, storage=storage)
    return [t.user_attrs["point_id"] for t in s.get_trials(states=(optuna.trial.TrialState.COMPLETE,)) if t.user_attrs["query"]]


def test_same_seed_same_result(problem: NB201Problem, tmp_path: Path) -> None:
    a = run_search(problem, "tpe", budget=30, seed=3, storage=f"sqlite:///{tmp_path / 'a.db'}")
    b = run_search(problem, "tpe", budget=30, seed=3, storage=f"sqlite:///{tmp_path / 'b.db'}")
    assert a.hv_history == b.hv_history and a.front == b.front


def test_resume_extends_without_repeating(problem: NB201Problem, storage: str) -> None:
    first = run_search(problem, "random", budget=20, seed=0, storage=storage, study_name="s")
    second = run_search(problem, "random", budget=35, seed=0, storage=storage, study_name="s")
    ids = _queried(storage, "s")
    assert first.evaluations == 20 and second.evaluations == 35
    assert len(ids) == len(set(ids)) == 35
    again = run_search(problem, "random", budget=35, seed=0, storage=storage, study_name="s")
    assert again.trials == second.trials  # nothing left to do
    # the study's search time is the sum of the invocations that evaluated; the rerun that did nothing adds nothing
    assert first.search_wall_s == first.wall_s and second.search_wall_s == pytest.approx(first.wall_s + second.wall_s)
    assert again.search_wall_s == second.search_wall_s
    assert not any("seed" in n for n in second.notes)
    # another --seed on resume goes on, and says the study keeps its own (the summary showed only the new one)
    other = run_search(problem, "random", budget=40, seed=3, storage=storage, study_name="s")
    assert other.evaluations == 40 and any("created with seed 0" in n and "seeded from 3" in n for n in other.notes)


def test_stale_running_trial_is_failed_on_resume(problem: NB201Problem, storage: str) -> None:
    run_search(problem, "random", budget=5, seed=0, storage=storage, study_name="s")
    study = optuna.load_study(study_name="s", storage=storage)
    study.ask()  # a trial a killed process left RUNNING
    result = run_search(problem, "random", budget=8, seed=0, storage=storage, study_name="s")
    states = [t.state for t in optuna.load_study(study_name="s", storage=storage).trials]
    assert optuna.trial.TrialState.RUNNING not in states
    assert states.count(optuna.trial.TrialState.FAIL) == 1
    assert result.evaluations == 8


def test_study_of_another_problem_is_refused_before_writing(problem: NB201Problem, storage: str) -> None:
    run_search(problem, "random", budget=3, seed=0, storage=storage, study_name="s")
    other = NB201Problem(dataset="cifar10", device="raspi4")
    with pytest.raises(UserInputError, match="already exists"):
        run_search(other, "random", budget=3, seed=0, storage=storage, study_name="s")
    with pytest.raises(UserInputError, match="already exists"):
        run_search(problem, "tpe", budget=3, seed=0, storage=storage, study_name="s")
    assert len(optuna.load_study(study_name="s", storage=storage).trials) == 3


@pytest.mark.parametrize("budget", [-1, -5])
def test_bad_budget(problem: NB201Problem, storage: str, budget: int) -> None:
    with pytest.raises(UserInputError, match="budget"):
        run_search(problem, "random", budget=budget, storage=storage)
    assert not Path(storage.removeprefix("sqlite:///")).exists()


def test_unknown_proposer_writes_nothing(problem: NB201Problem, storage: str) -> None:
    with pytest.raises(UserInputError, match="valid proposers"):
        run_search(problem, "simulated-annealing", budget=3, storage=storage)
    assert not Path(storage.removeprefix("sqlite:///")).exists()


def test_storage_errors_are_actionable(problem: NB201Problem) -> None:
    with pytest.raises(StorageError, match="does not exist"):
        run_search(problem, "random", budget=3, storage="sqlite:///no/such/dir/x.db")
    with pytest.raises(StorageError, match="cannot open storage"):
        run_search(problem, "random", budget=3, storage="postgresql://nobody@127.0.0.1:9/none")
    with pytest.raises(StorageError, match="cannot open storage"):
        run_search(problem, "random", budget=3, storage="notadb://x")


def test_default_storage_is_under_runs(problem: NB201Problem) -> None:
    result = run_search(problem, "random", budget=3)
    assert result.storage == "sqlite:///runs/coevo.sqlite3"
    assert Path("runs/coevo.sqlite3").exists()
    with sqlite3.connect("runs/coevo.sqlite3") as con:
        assert con.execute("pragma journal_mode").fetchone()[0] == "wal"


class ScriptedProposer(Proposer):
    """Proposes the 24 neighbours of a seed cell, then repeats one already seen."""

    name = "scripted"

    def __init__(self) -> None:
        self.observed: list[tuple[list[Evaluation], list[tuple[Proposal, str]]]] = []

    def sampler(self, problem: object, seed: int) -> optuna.samplers.BaseSampler:
        return optuna.samplers.RandomSampler(seed=seed)

    def propose(self, ctx: RoundContext) -> list[Proposal]:
        base = parse_arch("|nor_conv_3x3~0|+|nor_conv_3x3~0|nor_conv_3x3~1|+|skip_connect~0|nor_conv_3x3~1|nor_conv_3x3~2|")
        cands = [base, *mutations(base)][ctx.round * 4 : ctx.round * 4 + 4]
        props = [Proposal(c, rationale=f"neighbour {k}", heuristics=("H1",)) for k, c in enumerate(cands)]
        return [*props, props[0]]  # a duplicate inside the round

    def observe(self, ctx: RoundContext, results: list[Evaluation], rejected: list[tuple[Proposal, str]]) -> None:
        self.observed.append((results, rejected))


def test_explicit_proposals_are_enqueued_with_rationale(problem: NB201Problem, storage: str) -> None:
    proposer = ScriptedProposer()
    result = run_search(problem, proposer, budget=8, seed=0, storage=storage, study_name="p")
    assert result.evaluations == 8 and result.trials == 8
    trials = optuna.load_study(study_name="p", storage=storage).trials
    assert trials[0].user_attrs["rationale"] == "neighbour 0"
    assert trials[0].user_attrs["heuristics"] == ["H1"]
    assert [t.user_attrs["round"] for t in trials] == [0] * 4 + [1] * 4
    results, rejected = proposer.observed[0]
    assert len(results) == 4 and [why for _, why in rejected] == ["duplicate in this round"]


def test_sigkill_mid_search_then_resume(tmp_path: Path) -> None:
    """A real process killed with SIGKILL mid-run; rerunning the command finishes the budget exactly."""
    db = tmp_path / "k.sqlite3"
    cmd = [
        "search",
        "--device",
        "raspi4",
        "--proposer",
        "random",
        "--budget",
        "150",
        "--storage",
        f"sqlite:///{db}",
        "--study",
        "k",
        "--json",
    ]
    kill_after_trials(cmd, db, 30, tmp_path)
    result = run_search(
        NB201Problem(dataset="cifar10", device="raspi4"), "random", budget=150, seed=0, storage=f"sqlite:///{db}", study_name="k"
    )
    ids = _queried(f"sqlite:///{db}", "k")
    assert result.evaluations == 150 == len(ids) == len(set(ids))


class GreedyProposer(ScriptedProposer):
    """Proposes six neighbours a round, whatever budget is left."""

    name = "greedy"

    def propose(self, ctx: RoundContext) -> list[Proposal]:
        base = parse_arch("|nor_conv_3x3~0|+|nor_conv_3x3~0|nor_conv_3x3~1|+|skip_connect~0|nor_conv_3x3~1|nor_conv_3x3~2|")
        return [Proposal(c) for c in mutations(base)[ctx.round * 6 : ctx.round * 6 + 6]]


def test_a_search_that_ends_leaves_no_waiting_proposal(problem: NB201Problem, storage: str) -> None:
    result = run_search(problem, GreedyProposer(), budget=8, seed=0, storage=storage, study_name="g")
    states = [t.state.name for t in optuna.load_study(study_name="g", storage=storage).trials]
    assert result.evaluations == 8 and "WAITING" not in states and "RUNNING" not in states
    assert states.count("PRUNED") == 4  # round 1's proposals beyond the budget were set aside, not left queued


def test_a_smaller_budget_changes_nothing_and_says_so(problem: NB201Problem, storage: str) -> None:
    run_search(problem, "random", budget=20, seed=0, storage=storage, study_name="b")
    again = run_search(problem, "random", budget=10, seed=0, storage=storage, study_name="b")
    study = optuna.load_study(study_name="b", storage=storage)
    assert study.user_attrs["coevo.budget"] == 20 and again.budget == 20 and len(study.trials) == 20
    assert any("already has 20 evaluations" in n and "stays 20" in n for n in again.notes)
    same = run_search(problem, "random", budget=20, seed=0, storage=storage, study_name="b")
    assert same.evaluations == 20 and any("already has the 20 evaluations of its budget: nothing new" in n for n in same.notes)
    more = run_search(problem, "random", budget=22, seed=0, storage=storage, study_name="b")
    assert more.evaluations == 22 and not any("nothing new" in n for n in more.notes)
    lower = run_search(problem, "random", budget=25, seed=0, storage=storage, study_name="b")
    assert lower.evaluations == 25 and optuna.load_study(study_name="b", storage=storage).user_attrs["coevo.budget"] == 25


def test_studies_name_their_objectives(problem: NB201Problem, storage: str) -> None:
    run_search(problem, "random", budget=3, seed=0, storage=storage, study_name="m")
    study = optuna.load_study(study_name="m", storage=storage)
    assert study.metric_names == ["accuracy", "latency_ms"]
    assert {"values_accuracy", "values_latency_ms"} <= set(study.trials_dataframe().columns)  # what optuna-dashboard shows too


def test_a_new_study_does_not_inherit_what_a_deleted_one_of_its_name_left(problem: NB201Problem, storage: str) -> None:
    from coevo.knowledge.store import KnowledgeStore
    from coevo.search.round_log import RoundLogs
    from coevo.search.workers import Coordination

    run_search(problem, "pelnas", budget=60, seed=0, storage=storage, study_name="d")
    store = KnowledgeStore.for_storage(storage)
    learned = len(store.latest("d"))
    assert learned > 0 and RoundLogs(storage).count("d") >= 2
    optuna.delete_study(study_name="d", storage=storage)  # as `optuna delete-study` does: coevo's tables untouched
    again = run_search(problem, "pelnas", budget=6, seed=0, storage=storage, study_name="d")  # the start alone: learns nothing yet
    assert not store.exists("d")  # the new study starts without the old heuristics
    archived = [b for b in store.bases() if b.name.startswith("d~deleted-")]
    assert len(archived) == 1 and archived[0].heuristics == learned  # set aside, not lost
    assert RoundLogs(storage).count("d") == 1 and Coordination(storage, "d").counts() == (6, 6)
    assert any("set aside" in n for n in again.notes)


def test_two_searches_started_together_on_a_new_name_cannot_both_tag_it(tmp_path: Path) -> None:
    # both found the new study untagged (one created it, one loaded it a moment later) and both tagged
    # it: the study said one proposer while the other's trials filled it. Now one tags, the other checks.
    import threading

    from coevo.search.proposers import get_proposer
    from coevo.search.storage import open_storage
    from coevo.search.study import ATTR_PROPOSER, open_or_create

    storage = f"sqlite:///{tmp_path / 'race.sqlite3'}"
    open_storage(storage)  # the schema first: this is about tagging the study, not creating the database
    for attempt in range(4):
        name = f"race-{attempt}"
        start = threading.Barrier(2)
        outcome: dict[str, str] = {}

        def open_as(proposer: str, name: str = name, start: threading.Barrier = start, outcome: dict[str, str] = outcome) -> None:
            start.wait()
            try:
                problem = NB201Problem(dataset="cifar10", device="fpga")
                open_or_create(problem, get_proposer(proposer), storage=storage, study_name=name, seed=0, budget=5)
                outcome[proposer] = "opened"
            except Exception as exc:  # recorded whatever it is: a thread's exception would be lost
                outcome[proposer] = f"{type(exc).__name__}: {exc}"

        threads = [threading.Thread(target=open_as, args=(p,)) for p in ("random", "tpe")]
        for t in threads:
            t.start()
        for t in threads:
            t.join(timeout=120)
        opened = [p for p, said in outcome.items() if said == "opened"]
        assert len(opened) == 1, outcome  # exactly one: the other is told the study is another proposer's
        tagged = optuna.load_study(study_name=name, storage=storage).user_attrs[ATTR_PROPOSER]
        assert tagged == opened[0]
        assert len(outcome) == 2 and "UserInputError: study" in outcome[{"random": "tpe", "tpe": "random"}[opened[0]]], outcome
        assert "already exists" in " ".join(outcome.values())


def test_exploration_bands_cover_every_evaluated_design() -> None:
    # nb201-accel's reference is built on part of its space: a design at 6.6 ms was counted in a top band
    # labelled 0.893-1.1, outside which it lies; the bands now widen to what was evaluated
    from types import SimpleNamespace

    import numpy as np

    from coevo.search.runner import BANDS, band_edges, band_of

    ref = SimpleNamespace(second_min=0.0538, second_max=1.1031)
    second = np.array([0.06, 0.5, 1.1237, 6.6472])
    edges = band_edges(ref, second)  # type: ignore[arg-type]
    assert len(edges) == BANDS + 1 and edges[0] == 0.0538 and edges[-1] == 6.6472
    bands = band_of(edges, second)
    assert all(edges[b] <= v <= edges[b + 1] for b, v in zip(bands, second, strict=True))
    inside = band_edges(ref, np.array([0.2, 0.9]))  # type: ignore[arg-type]
    assert inside[0] == 0.0538 and inside[-1] == 1.1031  # the whole space's range when the designs lie in it


@pytest.mark.parametrize(("field", "value"), [("budget", -1), ("seed", -1), ("seed", 2**22)])
def test_run_search_and_search_config_refuse_alike(problem: NB201Problem, storage: str, field: str, value: int) -> None:
    from coevo.search.config import SearchConfig

    with pytest.raises(UserInputError) as direct:
        run_search(problem, "random", storage=storage, **{"budget": 5, field: value})
    with pytest.raises(UserInputError) as configured:
        SearchConfig.create(**{field: value})
    assert str(direct.value) == str(configured.value)
