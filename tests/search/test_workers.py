"""Many workers on one study: exactly-once evaluation, the exact budget, crashes and storage faults.

The PostgreSQL tests run against the local server (127.0.0.1:5432, database ``test``);
outside CI they skip with the reason when none answers. One test runs on SQLite everywhere.
Tests that run several worker processes or a kill loop are marked ``slow``; the ones left
for ``make test-fast`` check take-over, SIGTERM and a joining worker in one process each.
"""

from __future__ import annotations

import json
import math
import random
import re
import signal
import subprocess
import sys
import threading
import time
import uuid
from collections import Counter
from pathlib import Path
from typing import Any

import numpy as np
import optuna
import pytest

from coevo.agent.cli import main
from coevo.search.coordination_tables import workers as workers_table
from coevo.search.errors import UserInputError
from coevo.search.metrics import pareto_mask
from coevo.search.nb201 import NB201Problem
from coevo.search.progress import progress
from coevo.search.proposers import get_proposer
from coevo.search.runner import summarize
from coevo.search.storage import DatabaseTimeouts, StorageError
from coevo.search.study import open_study
from coevo.search.workers import Coordination, Worker, WorkerSettings
from tests.faults.tcp_proxy import FaultyProxy
from tests.helpers import coevo_env, study_trials, wait_until

FAST = ["--heartbeat", "1", "--grace", "3"]


def _create(storage: str, proposer: str, budget: int) -> str:
    name = f"w-{uuid.uuid4().hex[:10]}"
    problem = NB201Problem(dataset="cifar10", device="fpga")
    open_study(problem, get_proposer(proposer), storage=storage, study_name=name, seed=0, budget=budget)
    return name


def _worker(storage: str, study: str, *extra: str, cwd: Path, app: str = "") -> subprocess.Popen[str]:
    """A ``coevo worker`` process; ``app`` names its PostgreSQL connections (libpq's PGAPPNAME), so a test can find them."""
    cmd = [sys.executable, "-m", "coevo.agent.cli", "worker", "--storage", storage, "--study", study, "--json", *FAST, *extra]
    env = {**coevo_env(), **({"PGAPPNAME": app} if app else {})}
    return subprocess.Popen(cmd, cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def _finish(procs: list[subprocess.Popen[str]], timeout: float = 120) -> list[tuple[int, str, str]]:
    out = []
    for p in procs:
        stdout, stderr = p.communicate(timeout=timeout)
        out.append((p.returncode, stdout, stderr))
    return out


def _wait_for_completed(storage: str, study: str, proc: subprocess.Popen[str], at_least: int, timeout: float) -> None:
    """Block until the study holds ``at_least`` COMPLETE trials (the process must still be alive)."""

    def completed() -> bool:
        assert proc.poll() is None, f"the worker exited early with {proc.returncode}"
        return _completed(storage, study) >= at_least

    wait_until(completed, timeout, f"{at_least} completed evaluations")


def _completed(storage: str, study: str) -> int:
    """How many trials of ``study`` are COMPLETE."""
    trials = study_trials(storage, study)
    return sum(t.state == optuna.trial.TrialState.COMPLETE for t in trials)


def _print_failed(results: list[tuple[int, str, str]]) -> None:
    """Print a failed worker's whole stderr into the captured output (an assertion's repr cuts it short)."""
    for code, _, stderr in results:
        if code != 0:
            print(f"worker exited {code}; its stderr:\n{stderr}")


def _check_exactly_once(storage: str, study_name: str, budget: int) -> dict[str, int]:
    """Every paid evaluation once, exactly the budget, values as the table says, front as a single run's."""
    problem = NB201Problem(dataset="cifar10", device="fpga")
    study = optuna.load_study(study_name=study_name, storage=storage)
    trials = study.get_trials(deepcopy=False)
    paid = [t for t in trials if t.state == optuna.trial.TrialState.COMPLETE and t.user_attrs.get("query", True)]
    points = Counter(t.user_attrs["point_id"] for t in paid)
    assert len(paid) == budget, f"{len(paid)} paid evaluations for a budget of {budget}"
    assert max(points.values()) == 1, f"evaluated twice: {[p for p, n in points.items() if n > 1]}"
    for t in paid:  # nothing recorded wrong: each value is the table's
        point = problem.from_params(t.params)
        assert list(problem.evaluate(point).values()) == pytest.approx(list(t.values))
    failed = [t for t in trials if t.state == optuna.trial.TrialState.FAIL]
    lost = [t for t in failed if t.user_attrs.get("point_id") and t.user_attrs["point_id"] not in points and "skipped" not in t.user_attrs]
    # the front of the distributed run is the front of the same evaluations in one process
    result = summarize(problem, study, proposer="x", seed=0, budget=budget, storage=storage, wall_s=0.0)
    acc = np.array([t.values[0] for t in paid])
    lat = np.array([t.values[1] for t in paid])
    expected = sorted({paid[i].user_attrs["point_id"] for i in np.flatnonzero(pareto_mask(acc, lat))})
    assert sorted(row["point_id"] for row in result.front) == expected
    coordination = Coordination(storage, study_name)
    total, done = coordination.counts()
    coordination.engine.dispose()
    assert total == done == budget
    return {"failed": len(failed), "lost": len(lost), "duplicates": sum(n - 1 for n in points.values())}


@pytest.mark.slow  # two worker processes
def test_two_workers_on_sqlite(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    storage = f"sqlite:///{tmp_path / 'shared.sqlite3'}"
    study = _create(storage, "pelnas", 80)
    runs = _finish([_worker(storage, study, cwd=tmp_path) for _ in range(2)])
    assert [r[0] for r in runs] == [0, 0], runs
    summaries = [json.loads(r[1]) for r in runs]
    assert sum(s["evaluated"] for s in summaries) == 80 and sum(s["rounds_led"] for s in summaries) >= 3
    assert _check_exactly_once(storage, study, 80)["duplicates"] == 0
    assert main(["runs", "show", study, "--storage", storage, "--json"]) == 0
    shown = json.loads(capsys.readouterr().out)
    assert shown["evaluations"] == shown["budget"] == 80 and [w["state"] for w in shown["workers"]] == ["finished", "finished"]
    assert shown["workers_alive"] == 0 and 0 < shown["hv_ratio"] <= 1
    assert main(["runs", "list", "--storage", storage, "--json"]) == 0
    assert [json.loads(line)["study"] for line in capsys.readouterr().out.splitlines()] == [study]


@pytest.mark.parametrize("backend", ["sqlite", pytest.param("postgresql", marks=pytest.mark.postgres)])
def test_workers_started_together_sample_with_different_seeds(backend: str, tmp_path: Path, request: pytest.FixtureRequest) -> None:
    # Workers started at the same moment once all read "no worker registered yet", took the study's
    # seed and proposed the same points in the same order: each then waited on or answered the other's
    # claims, and two workers did the work of one. The number behind the seed is now taken atomically.
    storage = request.getfixturevalue("postgres_url") if backend == "postgresql" else f"sqlite:///{tmp_path / 'seeds.sqlite3'}"
    study = _create(storage, "random", 60)
    start = threading.Barrier(4)
    built: list[Worker] = []

    def build() -> None:
        start.wait()
        problem = NB201Problem(dataset="cifar10", device="fpga")
        built.append(Worker(problem, get_proposer("random"), storage=storage, study_name=study, seed=0))

    threads = [threading.Thread(target=build) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    seeds = sorted(w.sampler_seed for w in built)
    assert len(built) == 4 and seeds == [0, 2, 3, 4], seeds  # the first keeps the study's seed: a lone search is reproducible
    problem = NB201Problem(dataset="cifar10", device="fpga")
    points = [[problem.suggest(optuna.create_study(sampler=w.study.sampler).ask()) for _ in range(5)] for w in built[:2]]
    assert points[0] != points[1]


def test_a_worker_that_fails_to_start_leaves_no_row_that_says_it_runs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    storage = f"sqlite:///{tmp_path / 'start.sqlite3'}"
    problem = NB201Problem(dataset="cifar10", device="fpga")
    with pytest.raises(UserInputError, match="no study 'typo' to join"):
        Worker(problem, get_proposer("random"), storage=storage, study_name="typo", seed=0)
    assert Coordination(storage, "typo").workers() == []  # nothing written for a study that is not there
    study = _create(storage, "random", 5)

    def broken() -> None:
        raise RuntimeError("reference failed")

    monkeypatch.setattr(problem, "reference", broken)  # fails after the worker registered
    with pytest.raises(RuntimeError, match="reference failed"):
        Worker(problem, get_proposer("random"), storage=storage, study_name=study, seed=0, on_progress=lambda p: None)
    assert Coordination(storage, study).workers() == []


@pytest.mark.slow  # four worker processes
def test_four_workers_on_postgresql(postgres_url: str, tmp_path: Path) -> None:
    study = _create(postgres_url, "pelnas", 160)
    runs = _finish([_worker(postgres_url, study, cwd=tmp_path) for _ in range(4)])
    assert [r[0] for r in runs] == [0, 0, 0, 0], runs
    summaries = [json.loads(r[1]) for r in runs]
    assert sum(s["evaluated"] for s in summaries) == 160
    assert sum(1 for s in summaries if s["evaluated"] > 0) >= 2  # the work was shared
    counts = _check_exactly_once(postgres_url, study, 160)
    assert counts == {"failed": 0, "lost": 0, "duplicates": 0}


@pytest.mark.slow  # a kill loop over three worker processes
@pytest.mark.parametrize(("proposer", "budget"), [("random", 300), ("pelnas", 160)])
def test_workers_killed_at_random_points_lose_nothing(postgres_url: str, tmp_path: Path, proposer: str, budget: int) -> None:
    # random: no rounds, most of a worker's time is inside a trial; pelnas: kills also hit round leaders
    study = _create(postgres_url, proposer, budget)
    rng = random.Random(7)
    live: list[subprocess.Popen[str]] = []
    coordination = Coordination(postgres_url, study)

    def spawn() -> None:
        live.append(_worker(postgres_url, study, cwd=tmp_path))

    for _ in range(3):
        spawn()
    kills = paid = 0
    while kills < 6:  # at most 6 kills, then let it finish

        def progressed(since: int = paid) -> int:
            """The paid count once the workers paid for more since the last kill; -1 once every worker has exited."""
            if not any(p.poll() is None for p in live):
                return -1
            n = _completed(postgres_url, study)
            return n if n > since else 0

        # each kill waits for the workers to have paid for more since the last one (start-up takes most of a minute
        # on a loaded 2-core machine), then a random pause puts it at a random point of their loop
        paid = wait_until(progressed, 240, "the workers to pay for more trials")
        if paid < 0:
            break
        time.sleep(rng.uniform(0.0, 0.5))
        registered = {w["pid"] for w in coordination.workers()}
        working = [p for p in live if p.poll() is None and p.pid in registered]  # past start-up: inside the loop
        if not working:
            continue
        victim = rng.choice(working)
        victim.send_signal(signal.SIGKILL)
        victim.wait()
        kills += 1
        spawn()  # a replacement joins
    coordination.engine.dispose()
    results = _finish([p for p in list(live) if p.returncode is None])
    _print_failed(results)
    assert all(code == 0 for code, _, _ in results), results
    counts = _check_exactly_once(postgres_url, study, budget)
    states = Counter(t.state.name for t in study_trials(postgres_url, study))
    assert "RUNNING" not in states and "WAITING" not in states  # every trial a dead worker left was resolved
    assert kills >= 1 and counts["duplicates"] == 0 and counts["lost"] == 0
    failed = counts["failed"]
    print(f"\nfault test ({proposer}): {kills} kills, {failed} trials failed and re-queued, 0 duplicates, 0 lost; states {dict(states)}")


@pytest.mark.slow  # three worker processes
def test_dropped_connections_are_survived(postgres_url: str, tmp_path: Path) -> None:
    import sqlalchemy as sa

    from coevo.search.storage import resolve_storage_url

    budget = 160
    study = _create(postgres_url, "random", budget)
    app = f"coevo-dropped-{study}"  # only these workers' connections are dropped, not those of tests running beside it
    procs = [_worker(postgres_url, study, cwd=tmp_path, app=app) for _ in range(3)]
    admin = sa.create_engine(resolve_storage_url(postgres_url))
    dropped = paid = 0
    for _ in range(3):  # the server drops every other connection, three times, each once the workers paid for more

        def more(seen: int = paid) -> int:
            n = _completed(postgres_url, study)
            return n if n > seen else 0

        paid = wait_until(more, 240, "the workers to pay for another trial")  # the first waits for their start-up
        with admin.connect() as conn:
            dropped += len(
                conn.execute(
                    sa.text(
                        "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                        "WHERE datname = current_database() AND pid <> pg_backend_pid() AND application_name = :app"
                    ),
                    {"app": app},
                ).all()
            )
    admin.dispose()
    results = _finish(procs)
    _print_failed(results)
    assert all(code == 0 for code, _, _ in results), results
    assert dropped > 0
    assert _check_exactly_once(postgres_url, study, budget)["duplicates"] == 0


@pytest.mark.slow  # 15 s on an idle 2-core machine: out of the fast loop (make test-fast), still in CI
def test_a_database_that_stays_away_stops_the_worker_and_it_resumes(postgres_url: str, tmp_path: Path) -> None:
    proxy = FaultyProxy(("127.0.0.1", 5432))
    via_proxy = postgres_url.replace("127.0.0.1:5432", proxy.address)
    budget = 120  # enough that the worker is still paying when the proxy is cut after 20
    study = _create(postgres_url, "random", budget)
    try:
        worker = _worker(via_proxy, study, "--db-patience", "3", "--db-timeout", "2", cwd=tmp_path)
        _wait_for_completed(postgres_url, study, worker, at_least=20, timeout=120)  # let it evaluate a while
        proxy.set("refuse")  # the server goes down: open connections drop, new ones are refused
        # bounded: patience (3 s) plus one request's bounds (--db-timeout 2: at most a 4 s wait for a reply), plus exit
        code, _, stderr = _finish([worker], timeout=60)[0]
        assert code == 2 and "refused" in stderr and "Nothing is lost" in stderr, stderr
        proxy.set("pass")
        # the database is back: the same worker command through the same proxy finishes the run (a bound for a hang:
        # the rest of the budget through the Python proxy can take a minute on a loaded 2-core machine)
        done = _finish([_worker(via_proxy, study, cwd=tmp_path)], timeout=300)[0]
        assert done[0] == 0, done
    finally:
        proxy.close()
    assert _check_exactly_once(postgres_url, study, budget)["duplicates"] == 0


def _claimed_by_a_dead_worker(tmp_path: Path, budget: int, settings: WorkerSettings) -> tuple[str, str, optuna.Trial, str]:
    """A random-search study on SQLite and what a worker killed mid-trial leaves: a RUNNING trial with a heartbeat, and its claim."""
    storage = f"sqlite:///{tmp_path / 'shared.sqlite3'}"
    study = _create(storage, "random", budget)
    problem = NB201Problem(dataset="cifar10", device="fpga")
    dead = Worker(problem, get_proposer("random"), storage=storage, study_name=study, seed=0, settings=settings)
    trial = dead.study.ask()
    dead.heart.record_heartbeat(dead.heart.get_trial_id_from_study_id_trial_number(dead.study_id, trial.number))
    point_id = problem.point_id(problem.suggest(trial))
    trial.set_user_attr("point_id", point_id)
    assert dead.coord.claim(point_id, trial.number, budget, dead._holder_state) == ("new", None)
    return storage, study, trial, point_id


def _assert_taken_over_once(storage: str, study: str, trial: optuna.Trial, point_id: str, budget: int) -> None:
    finished = study_trials(storage, study)
    assert finished[trial.number].state == optuna.trial.TrialState.FAIL
    retry = [t for t in finished if t.user_attrs.get("retry_of") == trial.number]
    assert len(retry) == 1 and retry[0].user_attrs["point_id"] == point_id
    assert _check_exactly_once(storage, study, budget) == {"failed": 1, "lost": 0, "duplicates": 0}


def test_a_trial_left_running_by_a_dead_worker_is_requeued_and_taken_over(tmp_path: Path) -> None:
    settings = WorkerSettings(heartbeat_s=1, grace_s=2, patience_s=10)
    storage, study, trial, point_id = _claimed_by_a_dead_worker(tmp_path, 12, settings)
    problem = NB201Problem(dataset="cifar10", device="fpga")
    result = Worker(problem, get_proposer("random"), storage=storage, study_name=study, seed=1, settings=settings).run()
    assert result.requeued_seen == 1 and result.evaluated == 12
    _assert_taken_over_once(storage, study, trial, point_id, 12)


def test_a_gone_workers_row_says_lost_to_readers_and_is_marked_by_the_next_worker(tmp_path: Path) -> None:
    settings = WorkerSettings(heartbeat_s=1, grace_s=2, patience_s=10)
    storage, study, _, _ = _claimed_by_a_dead_worker(tmp_path, 6, settings)
    coordination = Coordination(storage, study)
    [dead] = coordination.workers()
    with coordination.engine.begin() as conn:  # its last heartbeat two minutes ago
        conn.execute(workers_table.update().values(last_seen=time.time() - 120))
    shown = progress(storage, study)["workers"]
    assert [(w["state"], w["alive"]) for w in shown] == [("lost", False)]
    assert coordination.workers()[0]["state"] == "running"  # a reader writes nothing
    Worker(
        NB201Problem(dataset="cifar10", device="fpga"), get_proposer("random"), storage=storage, study_name=study, seed=1, settings=settings
    ).run()
    rows = {w["worker"]: w for w in coordination.workers()}
    coordination.engine.dispose()
    assert rows[dead["worker"]]["state"] == "lost" and "found gone" in rows[dead["worker"]]["note"]
    assert [w["state"] for name, w in rows.items() if name != dead["worker"]] == ["finished"]


def test_a_worker_that_beat_after_it_was_judged_gone_is_not_marked_lost(tmp_path: Path) -> None:
    storage = f"sqlite:///{tmp_path / 'c.sqlite3'}"
    study = _create(storage, "random", 4)
    coordination = Coordination(storage, study)
    coordination.register("w1")
    [judged] = coordination.workers()
    time.sleep(0.01)
    coordination.beat("w1", 1)  # alive after all: it beat after the reader looked
    coordination.mark_lost("w1", float(judged["last_seen"]))
    assert coordination.workers()[0]["state"] == "running"
    coordination.mark_lost("w1", float(coordination.workers()[0]["last_seen"]))  # judged on its latest beat: gone
    assert coordination.workers()[0]["state"] == "lost"
    coordination.engine.dispose()


def test_a_trial_failed_as_stale_while_its_worker_claims_is_dropped_not_a_crash(tmp_path: Path) -> None:
    # on a loaded machine another worker can fail a live worker's trial as stale between its ask and its first write
    # (seen under CI load: UpdateFinishedTrialError killed the worker); the worker drops it and the copy takes over
    settings = WorkerSettings(heartbeat_s=1, grace_s=2, patience_s=10)
    storage = f"sqlite:///{tmp_path / 'shared.sqlite3'}"
    study = _create(storage, "random", 6)
    worker = Worker(NB201Problem(dataset="cifar10", device="fpga"), get_proposer("random"), storage=storage, study_name=study,
                    seed=0, settings=settings)  # fmt: skip
    real_claim = worker.coord.claim
    victims: list[int] = []

    def claim(pid: str, number: int, budget: int, holder_state: Any) -> Any:
        if not victims:
            victims.append(number)
            worker._fail_and_requeue(number)  # what another worker's sweep does to a trial it believes dead
        return real_claim(pid, number, budget, holder_state)

    worker.coord.claim = claim  # type: ignore[method-assign]
    result = worker.run()
    assert result.stopped is None and result.evaluated == 6 and result.requeued_seen == 1
    trials = study_trials(storage, study)
    assert trials[victims[0]].state == optuna.trial.TrialState.FAIL
    assert [t.user_attrs.get("retry_of") for t in trials].count(victims[0]) == 1
    assert _check_exactly_once(storage, study, 6) == {"failed": 1, "lost": 0, "duplicates": 0}


def test_a_claim_left_by_a_sweeper_killed_before_requeueing_is_requeued(tmp_path: Path) -> None:
    # a worker killed between failing a stale trial and enqueueing its copy leaves a claim held by
    # a FAILED trial and no copy; once the whole budget is claimed, nothing else would free it
    settings = WorkerSettings(heartbeat_s=0.5, grace_s=1, patience_s=10)
    storage, study, trial, point_id = _claimed_by_a_dead_worker(tmp_path, 1, settings)
    heart = optuna.storages.RDBStorage(storage)
    trial_id = heart.get_trial_id_from_study_id_trial_number(heart.get_study_id_from_name(study), trial.number)
    heart.set_trial_state_values(trial_id, state=optuna.trial.TrialState.FAIL)  # failed, never re-queued
    problem = NB201Problem(dataset="cifar10", device="fpga")
    worker = Worker(problem, get_proposer("random"), storage=storage, study_name=study, seed=1, settings=settings)
    timer = threading.Timer(60, worker.stop.set)  # without the repair the worker would wait forever
    timer.start()
    try:
        result = worker.run()
    finally:
        timer.cancel()
    assert result.stopped is None and result.evaluated == 1 and result.requeued_seen == 1
    _assert_taken_over_once(storage, study, trial, point_id, 1)


def test_sigterm_stops_the_worker_and_leaves_nothing_half_done(tmp_path: Path) -> None:
    # an evaluation under way at the signal would be failed as interrupted and re-queued (tests/faults/test_eval_faults.py);
    # NB201's are instant, so here the worker stops between evaluations
    storage = f"sqlite:///{tmp_path / 'shared.sqlite3'}"
    study = _create(storage, "random", 5000)
    worker = _worker(storage, study, cwd=tmp_path)
    # Signal only once the worker is evaluating: its handler is installed before the first
    # evaluation, and on a loaded machine the interpreter can take more than a fixed sleep to start.
    _wait_for_completed(storage, study, worker, at_least=1, timeout=120)
    worker.send_signal(signal.SIGTERM)
    code, stdout, stderr = _finish([worker], timeout=30)[0]
    assert code == 130, stderr  # as coevo search: stopped, and a rerun of the same command resumes
    summary = json.loads(stdout)
    assert summary["stopped"] and "signal" in summary["stopped"] and summary["evaluated"] > 0
    assert "rerun the same command to resume" in stderr
    states = Counter(t.state.name for t in study_trials(storage, study))
    assert "RUNNING" not in states and states["COMPLETE"] == summary["evaluated"] + summary["answered"]  # nothing left half-done
    rows = Coordination(storage, study).workers()
    assert rows[0]["state"] == "stopped"


def _search(storage: str, study: str, budget: int, *extra: str, cwd: Path) -> subprocess.Popen[str]:
    cmd = [sys.executable, "-m", "coevo.agent.cli", "search", "--storage", storage, "--study", study, "--budget", str(budget), "--json"]
    cmd += ["--device", "fpga", "--proposer", "pelnas", "--seed", "4", *FAST, *extra]
    return subprocess.Popen(cmd, cwd=cwd, env=coevo_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def _joined_by_workers(storage: str, tmp_path: Path, budget: int) -> tuple[str, list[dict[str, object]]]:
    """Issue 13's scenario: a default `coevo search` (one process), two `coevo worker`s join, one is SIGKILLed and replaced."""
    study = f"j-{uuid.uuid4().hex[:10]}"
    search = _search(storage, study, budget, cwd=tmp_path)

    def paying() -> bool:  # the study exists and has started paying
        assert search.poll() is None, f"the search exited early with {search.returncode}: {search.communicate()[1][-2000:]}"
        try:
            return len(study_trials(storage, study)) >= 30
        except (KeyError, StorageError):  # no storage or no study yet
            return False

    # the search's start-up (imports, the study) takes most of a minute on a loaded 2-core machine: a generous bound, met early when idle
    wait_until(paying, 240, f"study {study} to hold 30 trials", every_s=0.3)
    joined = [_worker(storage, study, cwd=tmp_path) for _ in range(2)]
    coordination = Coordination(storage, study)
    wait_until(lambda: {p.pid for p in joined} <= {w["pid"] for w in coordination.workers()}, 240, "both joined workers to start working")
    coordination.engine.dispose()
    joined[0].send_signal(signal.SIGKILL)
    joined[0].wait()
    joined.append(_worker(storage, study, cwd=tmp_path))
    code, stdout, stderr = _finish([search])[0]
    assert code == 0, stderr
    rest = _finish(joined[1:])
    assert all(r[0] == 0 for r in rest), rest
    return study, [json.loads(stdout), *[json.loads(r[1]) for r in rest]]


@pytest.mark.slow  # a search and three worker processes, one of them killed
@pytest.mark.parametrize("backend", ["sqlite", pytest.param("postgresql", marks=pytest.mark.postgres)])
def test_workers_joining_a_default_search_pay_exactly_the_budget(backend: str, tmp_path: Path, request: pytest.FixtureRequest) -> None:
    storage = request.getfixturevalue("postgres_url") if backend == "postgresql" else f"sqlite:///{tmp_path / 'join.sqlite3'}"
    budget = 160
    study, (summary, *workers) = _joined_by_workers(storage, tmp_path, budget)
    assert summary["evaluations"] == budget and summary["reasoner"] == "offline (no LLM)"
    assert sum(int(w["evaluated"]) for w in workers) > 0  # the workers really shared the work
    counts = _check_exactly_once(storage, study, budget)  # paid == distinct == claims == budget
    assert counts["duplicates"] == 0 and counts["lost"] == 0
    states = Counter(t.state.name for t in study_trials(storage, study))
    assert "RUNNING" not in states and "WAITING" not in states


@pytest.mark.slow  # two worker processes
def test_search_with_two_workers_runs_two_processes(tmp_path: Path) -> None:
    storage = f"sqlite:///{tmp_path / 'spawn.sqlite3'}"
    code, stdout, stderr = _finish([_search(storage, "sp", 90, "--workers", "2", cwd=tmp_path)])[0]
    assert code == 0, stderr
    summary = json.loads(stdout)
    assert summary["evaluations"] == 90 and summary["reasoner"] == "offline (no LLM)"  # the summary says who reasoned
    rows = Coordination(storage, "sp").workers()
    assert len(rows) == 2 and {r["state"] for r in rows} == {"finished"} and len({r["pid"] for r in rows}) == 2
    assert _check_exactly_once(storage, "sp", 90)["duplicates"] == 0


def test_sigterm_to_a_search_with_workers_stops_its_worker_processes_too(tmp_path: Path) -> None:
    # kill, systemd and Slurm signal the search's process alone: its worker went on and finished the study
    storage = f"sqlite:///{tmp_path / 'term.sqlite3'}"
    search = _search(storage, "term", 20000, "--workers", "2", "--proposer", "random", cwd=tmp_path)
    wait_until(lambda: len(Coordination(storage, "term").workers()) == 2, 120, "both workers to register")
    _wait_for_completed(storage, "term", search, at_least=5, timeout=120)
    search.send_signal(signal.SIGTERM)
    code, _, stderr = _finish([search], timeout=60)[0]
    assert code == 130, stderr
    assert "exited with an error" not in stderr  # a worker stopped by the signal is not a failure
    rows = Coordination(storage, "term").workers()
    assert {r["state"] for r in rows} == {"stopped"}, rows
    assert _completed(storage, "term") < 20000


@pytest.mark.slow  # 13 s on an idle 2-core machine: out of the fast loop (make test-fast), still in CI
def test_a_joining_worker_proposes_with_the_options_the_search_stored(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    storage = f"sqlite:///{tmp_path / 'opts.sqlite3'}"
    code, _, stderr = _finish([_search(storage, "o", 30, "--round-size", "7", "--kb-tokens", "150", cwd=tmp_path)])[0]
    assert code == 0, stderr
    study = optuna.load_study(study_name="o", storage=storage)
    assert study.user_attrs["coevo.proposer_options"]["round_size"] == 7
    assert study.user_attrs["coevo.proposer_options"]["kb_tokens"] == 150
    rounds_before = int(study.user_attrs["coevo.round"])
    study.set_user_attr("coevo.budget", 80)  # more budget: a worker joining now proposes the next rounds alone
    assert main(["worker", "--storage", storage, "--study", "o", "--json", *FAST]) == 0  # no proposer flags given
    assert json.loads(capsys.readouterr().out)["rounds_led"] >= 3
    trials = optuna.load_study(study_name="o", storage=storage).get_trials(deepcopy=False)
    per_round = Counter(t.user_attrs["round"] for t in trials if t.user_attrs.get("round", -1) >= rounds_before)
    assert per_round and max(per_round.values()) <= 7 and sum(per_round.values()) >= 40  # rounds of 7, not the default 20
    assert _check_exactly_once(storage, "o", 80)["duplicates"] == 0


@pytest.mark.parametrize(
    ("values", "says"),
    [
        ({"heartbeat_s": 0}, "need --heartbeat > 0 and --grace > --heartbeat (got 0 and 20)"),
        ({"heartbeat_s": 5, "grace_s": 5}, "--grace > --heartbeat"),
        ({"patience_s": -1.0}, "--db-patience must be >= 0 seconds, got -1.0"),
        ({"timeouts": DatabaseTimeouts(request_s=0.5)}, "--db-timeout must be a number of seconds >= 1, got 0.5"),
        # a NaN passed every check written as "x < bound" (a NaN grace never finds a silent worker gone)
        ({"heartbeat_s": 1, "grace_s": math.nan}, "--grace > --heartbeat (got 1 and nan)"),
        ({"patience_s": math.nan}, "--db-patience must be >= 0 seconds, got nan"),
        ({"timeouts": DatabaseTimeouts(request_s=math.nan)}, "--db-timeout must be a number of seconds >= 1, got nan"),
    ],
)
def test_worker_settings_refuse_timing_no_worker_can_keep(values: dict[str, Any], says: str) -> None:
    """The checks were the CLI's alone: a WorkerSettings built in Python (coevo.optimize, a script) took any value."""
    with pytest.raises(UserInputError, match=re.escape(says)):
        WorkerSettings(**values)
