"""A worker that died: how readers tell (a zombie is gone), and what its search hands over at once when it saw the death.

Found by a new user's walk-through: after ``kill -9`` of a worker that ``coevo search --workers 3`` started, ``coevo runs
show`` said it was running (its unreaped process was a zombie), its evaluations did not add up, and the search froze for
the minute its round lease took to expire.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from types import SimpleNamespace
from typing import Any
from unittest import mock

import optuna
import pytest

from coevo.agent.cli import main
from coevo.agent.cli.search import workers_ended_line
from coevo.agent.cli.worker import WorkerProcesses
from coevo.search.coordination_tables import leases
from coevo.search.coordination_tables import workers as workers_table
from coevo.search.nb201 import NB201Problem
from coevo.search.progress import progress, reasoner_label
from coevo.search.proposers import get_proposer
from coevo.search.study import ATTR_BUDGET, open_study
from coevo.search.workers import (
    ENV_WORKER_TAG,
    LOST,
    Coordination,
    Progress,
    Settled,
    Worker,
    WorkerSettings,
    process_gone,
    settle_dead_worker,
    worker_alive,
    worker_name,
)
from tests.helpers import study_trials

SETTINGS = WorkerSettings(heartbeat_s=1, grace_s=2, patience_s=10)


def _study(tmp_path: Path, budget: int, proposer: str = "random") -> tuple[str, str]:
    storage = f"sqlite:///{tmp_path / 'dead.sqlite3'}"
    open_study(
        NB201Problem(dataset="cifar10", device="fpga"), get_proposer(proposer), storage=storage, study_name="s", seed=0, budget=budget
    )
    return storage, "s"


def _killed_child() -> subprocess.Popen[bytes]:
    """A child process killed with SIGKILL, reaped (as the search's watcher finds it)."""
    proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    return proc


TAG = "deadbeef0001"


def _dead_worker_holding_a_trial_and_the_round(storage: str, study: str, pid: int, tag: str = TAG) -> tuple[str, int]:
    """What a worker process ``pid`` (started with worker tag ``tag``) killed mid-evaluation leaves: its row (running), the
    round lease, a RUNNING trial."""
    problem = NB201Problem(dataset="cifar10", device="fpga")
    with mock.patch.dict(os.environ, {ENV_WORKER_TAG: tag}), mock.patch("coevo.search.workers.os.getpid", return_value=pid):
        dead = Worker(problem, get_proposer("random"), storage=storage, study_name=study, seed=0, settings=SETTINGS)
    assert dead.name == worker_name(pid, tag)
    trial = dead.study.ask()
    trial.set_user_attr("worker", dead.name)
    point_id = problem.point_id(problem.suggest(trial))
    assert dead.coord.claim(point_id, trial.number, dead.budget, dead._holder_state) == ("new", None)
    assert dead.coord.try_lease("round", dead.name, 600)
    with dead.coord.engine.begin() as conn:  # registered under the killed child's pid, as a started worker is
        conn.execute(workers_table.update().where(workers_table.c.worker == dead.name).values(pid=pid))
    dead.coord.engine.dispose()
    return dead.name, trial.number


def test_a_zombie_process_is_gone() -> None:
    # a worker killed while its parent (a `coevo search --workers N`) has not reaped it yet: its pid still answers kill(0)
    pid = os.fork()
    if pid == 0:
        os._exit(0)
    os.waitid(os.P_PID, pid, os.WEXITED | os.WNOWAIT)  # exited, not reaped: a zombie
    try:
        row = {"state": "running", "last_seen": time.time(), "host": socket.gethostname(), "pid": pid}
        assert "zombie" in (process_gone(pid) or "")
        assert not worker_alive(row, 30.0)
    finally:
        os.waitpid(pid, 0)
    assert "has ended" in (process_gone(pid) or "")
    assert process_gone(os.getpid()) is None


def test_a_worker_its_search_saw_die_hands_its_round_and_trial_over_at_once(tmp_path: Path) -> None:
    storage, study = _study(tmp_path, 6)
    child = _killed_child()
    name, number = _dead_worker_holding_a_trial_and_the_round(storage, study, child.pid)
    assert settle_dead_worker(storage, study, name, "was killed (SIGKILL)", SETTINGS) == Settled(leases=1, trials=1)
    coord = Coordination(storage, study)
    [row] = coord.workers()
    with coord.engine.connect() as conn:
        owner = conn.execute(leases.select().where(leases.c.study == study, leases.c.name == "round")).one().owner
    coord.engine.dispose()
    assert row["state"] == LOST and row["note"].startswith("found gone at ") and row["note"].endswith("was killed (SIGKILL)")
    assert owner is None  # the next worker leads the round now, not after three grace periods
    trials = study_trials(storage, study)
    assert trials[number].state == optuna.trial.TrialState.FAIL
    assert [t.state for t in trials[number + 1 :]] == [optuna.trial.TrialState.WAITING]  # its copy, which takes the claim over
    # a name no worker of this study registered under: nothing to hand over
    assert settle_dead_worker(storage, study, worker_name(child.pid, "0123456789ab"), "was killed", SETTINGS) is None


def test_only_the_worker_the_search_started_is_settled_not_another_with_the_same_host_and_pid(tmp_path: Path) -> None:
    """Hosts that share a name (containers) can run workers with the same small pid: the name's tag tells them apart."""
    storage, study = _study(tmp_path, 6)
    child = _killed_child()
    dead, _ = _dead_worker_holding_a_trial_and_the_round(storage, study, child.pid, tag="aaaaaaaaaaaa")
    with (
        mock.patch.dict(os.environ, {ENV_WORKER_TAG: "bbbbbbbbbbbb"}),
        mock.patch("coevo.search.workers.os.getpid", return_value=child.pid),
    ):
        alive = Worker(NB201Problem(dataset="cifar10", device="fpga"), get_proposer("random"), storage=storage, study_name=study, seed=1,
                       settings=SETTINGS)  # fmt: skip
    assert settle_dead_worker(storage, study, dead, "was killed", SETTINGS) is not None
    states = {w["worker"]: w["state"] for w in Coordination(storage, study).workers()}
    assert states[dead] == LOST and states[alive.name] != LOST
    alive.coord.engine.dispose()


def test_the_search_says_at_once_which_worker_process_died_and_how(tmp_path: Path) -> None:
    storage, study = _study(tmp_path, 6)
    child = _killed_child()
    _dead_worker_holding_a_trial_and_the_round(storage, study, child.pid)
    config: Any = SimpleNamespace(storage=storage, reasoner=None, eval_timeout_s=None)
    others = WorkerProcesses(config, SETTINGS, 2)
    others.study = study
    others.tags = ["000000000000", TAG]
    others.procs = [subprocess.Popen([sys.executable, "-c", "pass"]), child]
    others.procs[0].wait()
    [line] = others.check()
    assert line.startswith(f"worker process 3 of 3 (pid {child.pid}) was killed (SIGKILL); its 1 round lease and 1 running trial handed")
    assert others.check() == []  # said once
    assert Coordination(storage, study).workers()[0]["state"] == LOST


def test_the_end_line_says_rerun_only_when_evaluations_remain() -> None:
    finished = SimpleNamespace(budget=300, budget_used=300)
    said = workers_ended_line(1, finished)
    assert "rerun" not in said and "finished its 300 evaluations without it" in said
    assert "12 of the 300 evaluations remain: rerun the same command" in workers_ended_line(2, SimpleNamespace(budget=300, budget_used=288))


def test_runs_show_counts_each_workers_evaluations_from_its_trials(tmp_path: Path) -> None:
    storage, study = _study(tmp_path, 5)
    problem = NB201Problem(dataset="cifar10", device="fpga")
    Worker(problem, get_proposer("random"), storage=storage, study_name=study, seed=0, settings=SETTINGS).run()
    coord = Coordination(storage, study)
    with coord.engine.begin() as conn:  # its row counted 2 at its last beat, and it was killed before the next one
        conn.execute(workers_table.update().values(evaluations=2, state="running", last_seen=time.time() - 120, note=None))
    [gone] = progress(storage, study)["workers"]
    assert gone["state"] == LOST and gone["note"].startswith("found gone at ") and "no heartbeat for" in gone["note"]
    optuna.load_study(study_name=study, storage=storage).set_user_attr(ATTR_BUDGET, 8)  # a rerun with a larger budget
    Worker(problem, get_proposer("random"), storage=storage, study_name=study, seed=1, settings=SETTINGS).run()
    coord.engine.dispose()
    info = progress(storage, study)
    assert [w["evaluations"] for w in info["workers"]] == [5, 3]
    assert sum(w["evaluations"] for w in info["workers"]) == info["budget_used"] == 8
    lost = info["workers"][0]
    assert lost["state"] == LOST and lost["note"].startswith("found gone at ")  # as the next worker wrote it


def test_a_workers_last_progress_is_the_studys_final_count(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # with several workers, the others pay for the last evaluations after this one's last own report (which said 398/400):
    # its own reports are left out here, so what it reports is its final word alone
    storage, study = _study(tmp_path, 4)
    monkeypatch.setattr(Worker, "_report", lambda self, values: None)
    reports: list[Progress] = []
    problem = NB201Problem(dataset="cifar10", device="fpga")
    Worker(problem, get_proposer("random"), storage=storage, study_name=study, seed=0, settings=SETTINGS, on_progress=reports.append).run()
    [last] = reports
    assert (last.queries, last.budget) == (4, 4) and last.hv_ratio is not None and not last.idle


def test_a_rerun_of_a_finished_search_starts_no_worker_and_shows_no_progress(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    storage = f"sqlite:///{tmp_path / 'rerun.sqlite3'}"
    command = ["search", "--proposer", "random", "--budget", "3", "--storage", storage, "--study", "r", "--json"]
    assert main(command) == 0
    capsys.readouterr()
    assert main([*command[:-1], "--workers", "2"]) == 0  # without --json: the notes are printed
    said = capsys.readouterr().err
    assert "already has the 3 evaluations" in " ".join(said.split())
    assert "search random" not in said  # no progress line: nothing was left to count
    assert len(Coordination(storage, "r").workers()) == 1  # the first run's: no worker started for nothing


def test_runs_list_names_the_reasoner_of_a_coevolution_search() -> None:
    assert reasoner_label({}) is None
    assert reasoner_label({0: {"reasoner": "offline (no LLM)"}, 1: {"reasoner": "offline (no LLM)"}}) == "offline (no LLM)"
    mixed = {r: {"reasoner": "offline (no LLM)" if r < 4 else "llm:m"} for r in range(10)}
    assert reasoner_label(mixed) == "offline (no LLM) in rounds 0-3; llm:m in rounds 4-9"


def test_runs_list_and_show_say_which_reasoner_proposed(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    storage = f"sqlite:///{tmp_path / 'r.sqlite3'}"
    for proposer in ("pelnas", "random"):
        assert main(["search", "--proposer", proposer, "--budget", "12", "--storage", storage, "--study", proposer, "--json"]) == 0
    capsys.readouterr()
    assert main(["runs", "list", "--storage", storage, "--json"]) == 0
    rows = {r["study"]: r for r in map(json.loads, capsys.readouterr().out.splitlines())}
    assert rows["pelnas"]["reasoner"] == "offline (no LLM)" and rows["random"]["reasoner"] is None
    assert main(["runs", "list", "--storage", storage]) == 0
    table = capsys.readouterr().out
    assert "reasoner" in table and "offline (no" in table  # a narrow table wraps the cell between words
    assert main(["runs", "show", "pelnas", "--storage", storage]) == 0
    assert "offline (no" in capsys.readouterr().out
