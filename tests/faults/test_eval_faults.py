"""Failed evaluations are first-class (issue 28).

A NaN, an infinity, an exception, a missing objective or a timeout fails its trial with the
reason in its ``failure`` attribute, is paid for exactly once (never re-queued, never evaluated
again by this or another worker), and the search goes on to its exact budget. Ctrl-C stops a
hanging evaluation at once and leaves it, unpaid, for a rerun.

The problem is a user problem file (written for each test) on a 6 x 6 grid: points with
``(a + b) % every == 0`` are bad and fail the way its ``fault`` option says. Every call of
``evaluate`` appends the point to a log file, so the tests count what was really evaluated
independently of what the study recorded.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import optuna
import pytest
from optuna.trial import TrialState

from coevo.agent.cli import build_parser, main
from coevo.agent.cli._common import search_config
from coevo.agent.cli.worker import WorkerProcesses
from coevo.search.config import SearchConfig
from coevo.search.errors import UserInputError
from coevo.search.problem import Problem
from coevo.search.problems import make_problem, problem_class
from coevo.search.proposers import get_proposer
from coevo.search.runner import run_search, summarize
from coevo.search.study import evaluations_from_study, open_study, paid_count
from coevo.search.workers import Coordination, Worker, WorkerSettings
from coevo.tools import REGISTRY, ToolArgumentError, call_tool
from tests.helpers import coevo_env, wait_until

SOURCE = '''
"""A 6 x 6 grid whose bad points fail on purpose (tests/faults/test_eval_faults.py)."""
from __future__ import annotations

import time
from pathlib import Path
from typing import Any, Literal

from pydantic import Field

import coevo


class FaultyOptions(coevo.ProblemOptions):
    fault: Literal["none", "nan", "inf", "raise", "missing", "hang", "torch-hang"] = Field("nan", description="how a bad point fails")
    every: int = Field(3, ge=1, description="points with (a + b) % every == 0 are bad")
    log: str = Field("", description="file: one line per evaluate call")
    marker: str = Field("", description="file written when a bad point's evaluation starts")
    release: str = Field("", description="a hanging evaluation returns once this file exists")
    delay: float = Field(0.0, ge=0, description="seconds each good evaluation takes")


class Faulty(coevo.LevelProblem):
    name = "faulty"
    Options = FaultyOptions
    levels = {"a": coevo.Levels(tuple(range(6))), "b": coevo.Levels(tuple(range(6)))}
    objectives = (
        coevo.Objective("score", "maximize", "1", "expensive"),
        coevo.Objective("latency", "minimize", "ms", "cheap"),
    )

    def evaluate(self, point: Any) -> dict[str, float]:
        a, b = point
        o = self.options
        if o.log:
            with open(o.log, "a") as f:
                f.write(f"{a}-{b}\\n")
        values = {"score": float(a * b + a), "latency": float(a + b + 1)}
        if (a + b) % o.every:
            time.sleep(o.delay)
            return values
        if o.marker:
            Path(o.marker).write_text(f"{a}-{b}")
        if o.fault == "nan":
            values["latency"] = float("nan")
        elif o.fault == "inf":
            values["score"] = float("inf")
        elif o.fault == "raise":
            raise ValueError(f"cannot build design {a}-{b}")
        elif o.fault == "missing":
            del values["latency"]
        elif o.fault == "hang":
            deadline = time.monotonic() + 3600
            while not (o.release and Path(o.release).exists()) and time.monotonic() < deadline:
                time.sleep(0.05)
        elif o.fault == "torch-hang":  # busy in torch's C++ (a training step) until released
            import torch

            x = torch.randn(256, 256)
            deadline = time.monotonic() + 3600
            while not (o.release and Path(o.release).exists()) and time.monotonic() < deadline:
                x = torch.tanh(x @ x)
        return values

    def cheap_values(self, points: Any) -> dict[str, Any]:
        return {"latency": [float(p[0] + p[1] + 1) for p in points]}


class Quick(Faulty):
    """The same problem, declaring a short per-evaluation limit of its own."""

    name = "faulty-quick"
    eval_timeout_s = 0.5
'''

REASONS: dict[str, Callable[[str], str]] = {
    "nan": lambda point: "objective latency is NaN",
    "inf": lambda point: "objective score is infinite",
    "raise": lambda point: f"evaluate raised ValueError: cannot build design {point}",
    "missing": lambda point: "evaluate returned no value for objective latency",
}
"""The failure each fault must leave on its trial, as the issue words them."""

FAST = WorkerSettings(heartbeat_s=1, grace_s=3, patience_s=10)
TIMING = ["--heartbeat", "1", "--grace", "3"]


@dataclass
class Space:
    """The problem file of one test and the files its evaluations write."""

    file: Path
    log: Path
    marker: Path
    release: Path

    def options(self, fault: str, every: int = 3, **extra: Any) -> dict[str, Any]:
        return {"fault": fault, "every": every, "log": str(self.log), "marker": str(self.marker), "release": str(self.release), **extra}

    def problem(self, fault: str, every: int = 3, cls: str = "Faulty", **extra: Any) -> Problem:
        return make_problem(f"{self.file}:{cls}", self.options(fault, every, **extra))

    def calls(self) -> list[str]:
        """The points ``evaluate`` was called on, in order."""
        return self.log.read_text().split() if self.log.exists() else []


def bad(point: str, every: int) -> bool:
    a, b = (int(x) for x in point.split("-"))
    return (a + b) % every == 0


@pytest.fixture
def space(tmp_path: Path) -> Iterator[Space]:
    file = tmp_path / "faulty.py"
    file.write_text(SOURCE)
    made = Space(file, tmp_path / "calls.log", tmp_path / "hanging", tmp_path / "release")
    yield made
    made.release.touch()  # evaluations left hanging in abandoned threads return now, instead of polling for an hour


@dataclass
class Audit:
    """A study as the tests read it, straight from Optuna's trials and coevo's claims."""

    trials: list[optuna.trial.FrozenTrial]
    states: Counter[str]
    paid: list[optuna.trial.FrozenTrial]
    """COMPLETE queries and FAIL trials carrying a failure: the evaluations the budget paid for."""
    failed: dict[str, str]
    """Point id -> failure of each failed evaluation."""
    claims: tuple[int, int]


def audit(storage: str, study: str) -> Audit:
    trials = optuna.load_study(study_name=study, storage=storage).get_trials(deepcopy=False)
    complete = [t for t in trials if t.state == TrialState.COMPLETE and t.user_attrs.get("query", True)]
    failed = [t for t in trials if t.state == TrialState.FAIL and "failure" in t.user_attrs]
    coordination = Coordination(storage, study)
    claims = coordination.counts()
    coordination.engine.dispose()
    return Audit(
        trials,
        Counter(t.state.name for t in trials),
        complete + failed,
        {t.user_attrs["point_id"]: t.user_attrs["failure"] for t in failed},
        claims,
    )


def assert_paid_exactly(space: Space, found: Audit, budget: int, every: int) -> list[str]:
    """Exactly ``budget`` evaluate calls, each on another point, each recorded once; nothing left running. Returns the bad points."""
    calls = space.calls()
    assert len(calls) == budget and len(set(calls)) == budget, f"evaluate calls {Counter(calls)} for a budget of {budget}"
    assert len(found.paid) == budget and found.claims == (budget, budget), (len(found.paid), found.claims)
    assert Counter(t.user_attrs["point_id"] for t in found.paid) == Counter(calls)  # each call recorded once, as what it was
    assert found.states["RUNNING"] == 0 and found.states["WAITING"] == 0, found.states
    bad_points = [p for p in calls if bad(p, every)]
    assert sorted(found.failed) == sorted(bad_points)  # every bad point failed, no good one did
    return bad_points


# ---------------------------------------------------------------- each kind of failure


@pytest.mark.parametrize("fault", sorted(REASONS))
def test_a_failed_evaluation_fails_its_trial_is_paid_once_and_the_search_goes_on(space: Space, storage: str, fault: str) -> None:
    budget, every = 8, 2  # half the grid is bad: a seeded random search meets several bad points
    problem = space.problem(fault, every)
    result = run_search(problem, "random", budget=budget, storage=storage, study_name=fault, settings=FAST)
    found = audit(storage, fault)
    bad_points = assert_paid_exactly(space, found, budget, every)
    assert bad_points, "the search met no bad point: the test would prove nothing"
    assert found.failed == {p: REASONS[fault](p) for p in bad_points}
    assert (result.evaluations, result.failed, result.paid, result.stopped) == (budget - len(bad_points), len(bad_points), budget, None)
    assert {(f["point_id"], f["failure"]) for f in result.failures} == set(found.failed.items())
    evaluations = [e for e in evaluations_from_study(problem, optuna.load_study(study_name=fault, storage=storage)) if e.query]
    assert len(evaluations) == budget - len(bad_points) and not {e.point_id for e in evaluations} & set(found.failed)
    for t in found.trials:  # a sampler re-proposing a failed point is answered by a skip, never a second evaluation
        if t.user_attrs.get("point_id") in found.failed and "failure" not in t.user_attrs:
            assert t.state == TrialState.PRUNED and t.user_attrs["skipped"].startswith("failed: the point's evaluation in trial"), t
    if fault == "raise":
        failed = next(t for t in found.trials if "failure" in t.user_attrs)
        assert "ValueError: cannot build design" in failed.user_attrs["traceback"] and "faulty.py" in failed.user_attrs["traceback"]


def test_the_cli_reports_failures_in_one_line_exits_0_and_runs_show_counts_them(
    space: Space, storage: str, capsys: pytest.CaptureFixture[str]
) -> None:
    budget, every = 6, 2
    args = ["search", "--problem", f"{space.file}:Faulty", "--options", json.dumps(space.options("nan", every)), "--proposer", "random"]
    assert main([*args, "--budget", str(budget), "--storage", storage, "--study", "cli", "--json", *TIMING]) == 0
    printed = capsys.readouterr()
    summary = json.loads(printed.out)
    bad_points = assert_paid_exactly(space, audit(storage, "cli"), budget, every)
    assert (summary["failed"], summary["paid"], summary["evaluations"]) == (len(bad_points), budget, budget - len(bad_points))
    lines = [line for line in printed.err.splitlines() if "paid evaluations failed" in line]
    assert len(lines) == 1 and lines[0].startswith(f"{len(bad_points)} of {budget} paid evaluations failed"), printed.err
    assert "objective latency is NaN" in lines[0] and "Traceback" not in printed.err
    assert main(["runs", "show", "cli", "--storage", storage, "--json"]) == 0
    shown = json.loads(capsys.readouterr().out)
    counts = (shown["failed"], shown["budget_used"], shown["budget"], shown["evaluations"])
    assert counts == (len(bad_points), budget, budget, budget - len(bad_points))
    assert shown["states"]["FAIL"] == len(bad_points) and "RUNNING" not in shown["states"]
    # whether the budget paid for the expensive objective (all but zero-cost searches do) is the problem's to say:
    # unknown until its code (a user's file) is imported
    assert shown["paid"] is None
    assert main(["runs", "show", "cli", "--storage", storage, "--json", "--yes"]) == 0
    assert json.loads(capsys.readouterr().out)["paid"] == budget


def test_a_worker_whose_first_evaluations_all_fail_stops_early_in_one_line(
    space: Space, storage: str, capsys: pytest.CaptureFixture[str]
) -> None:
    broken_after = WorkerSettings().broken_after
    budget = 4 * broken_after  # every point is bad: without the guard the whole budget would go to failures
    args = ["search", "--problem", f"{space.file}:Faulty", "--options", json.dumps(space.options("raise", 1)), "--proposer", "random"]
    command = [*args, "--budget", str(budget), "--storage", storage, "--study", "broken", *TIMING]
    assert main(command) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err[-1].startswith(f"error: the first {broken_after} evaluations of this worker all failed"), err
    assert "evaluate raised ValueError" in err[-1] and "Traceback" not in "\n".join(err)
    found = audit(storage, "broken")
    assert len(space.calls()) == broken_after and len(found.paid) == broken_after == len(found.failed)
    assert found.claims == (broken_after, broken_after) and found.states["RUNNING"] == 0, found
    assert main(command) == 2  # a rerun tries as many more, then stops again: each try is paid, none twice
    found = audit(storage, "broken")
    assert len(space.calls()) == len(set(space.calls())) == 2 * broken_after == len(found.paid) and found.states["RUNNING"] == 0


# ---------------------------------------------------------------- timeouts


def test_the_problem_declares_the_time_limit_and_an_evaluation_past_it_fails_as_timed_out(space: Space, storage: str) -> None:
    budget, every = 4, 3
    problem = space.problem("hang", every, cls="Quick")  # Quick.eval_timeout_s = 0.5; no flag given
    result = run_search(problem, "random", budget=budget, storage=storage, study_name="quick", settings=FAST)
    found = audit(storage, "quick")
    bad_points = assert_paid_exactly(space, found, budget, every)
    assert bad_points and set(found.failed.values()) == {"timed out after 0.5 s"} and result.failed == len(bad_points)
    for t in found.trials:
        if "failure" in t.user_attrs:  # ended at its deadline, not held: 0.5 s, bounded generously for a loaded machine
            assert t.datetime_complete is not None and t.datetime_start is not None
            assert (t.datetime_complete - t.datetime_start).total_seconds() < 30


def test_eval_timeout_overrides_the_problems_limit_from_the_command_line(
    space: Space, storage: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert problem_class(f"{space.file}:Faulty").eval_timeout_s == Problem.eval_timeout_s  # the one default: an hour
    budget, every = 4, 3
    args = ["search", "--problem", f"{space.file}:Faulty", "--options", json.dumps(space.options("hang", every)), "--proposer", "random"]
    assert main([*args, "--budget", str(budget), "--storage", storage, "--study", "flag", "--eval-timeout", "0.5", "--json", *TIMING]) == 0
    summary = json.loads(capsys.readouterr().out)
    bad_points = assert_paid_exactly(space, audit(storage, "flag"), budget, every)
    assert bad_points and {f["failure"] for f in summary["failures"]} == {"timed out after 0.5 s"}
    assert summary["paid"] == budget
    optuna.load_study(study_name="flag", storage=storage).set_user_attr("coevo.budget", 2 * budget)  # more budget for a worker
    assert main(["worker", "--storage", storage, "--study", "flag", "--eval-timeout", "0.5", "--json", *TIMING]) == 0
    joined = json.loads(capsys.readouterr().out)
    found = audit(storage, "flag")
    bad_points = assert_paid_exactly(space, found, 2 * budget, every)
    assert joined["evaluated"] + joined["failed"] == budget and set(found.failed.values()) == {"timed out after 0.5 s"}


def test_the_search_tools_take_the_eval_timeout_and_status_counts_failures_as_paid(space: Space, storage: str) -> None:
    budget, every = 4, 3
    args = {"problem": f"{space.file}:Faulty", "options": space.options("hang", every), "proposer": "random", "budget": budget}
    run = call_tool(REGISTRY.get("search.run"), {**args, "storage": storage, "study": "tool", "eval_timeout_s": 0.5}).value
    bad_points = assert_paid_exactly(space, audit(storage, "tool"), budget, every)
    assert bad_points and (run["failed"], run["paid"]) == (len(bad_points), budget)
    assert {f["failure"] for f in run["failures"]} == {"timed out after 0.5 s"}
    status = call_tool(REGISTRY.get("search.status"), {"study": "tool", "storage": storage}).value
    assert status["finished"], status  # the failures were paid for: the budget is spent
    assert (status["failed"], status["paid"], status["evaluations"]) == (len(bad_points), budget, budget - len(bad_points))
    with pytest.raises(ToolArgumentError, match="eval_timeout_s"):
        call_tool(REGISTRY.get("search.run"), {**args, "storage": storage, "eval_timeout_s": 0})


def test_no_heartbeat_is_recorded_for_a_trial_past_its_deadline(space: Space, storage: str) -> None:
    problem = space.problem("none")
    name = "beats"
    open_study(problem, get_proposer("random"), storage=storage, study_name=name, seed=0, budget=3)
    worker = Worker(problem, get_proposer("random"), storage=storage, study_name=name, seed=0, settings=WorkerSettings(heartbeat_s=0.2))
    worker.coord.register(worker.name)
    trial_id = worker.heart.get_trial_id_from_study_id_trial_number(worker.study_id, worker.study.ask().number)
    engine = worker.heart.engine

    def heartbeat() -> Any:
        with engine.connect() as conn:
            return conn.exec_driver_sql("select heartbeat from trial_heartbeats where trial_id = ?", (trial_id,)).scalar()

    def beats_after(since: float) -> Callable[[], bool]:
        return lambda: float(worker.coord.workers()[0]["last_seen"]) > since

    worker._current, worker._deadline = trial_id, time.monotonic() - 1.0  # an evaluation past its deadline
    with worker._heartbeat():
        first = float(worker.coord.workers()[0]["last_seen"])
        wait_until(beats_after(first), 30, "a first beat of the worker")
        second = float(worker.coord.workers()[0]["last_seen"])
        wait_until(beats_after(second), 30, "a second beat of the worker")
        assert heartbeat() is None  # the worker beat twice; its trial, past the deadline, never
        worker._deadline = time.monotonic() + 60  # within its deadline, the same thread beats for the trial
        wait_until(lambda: heartbeat() is not None, 30, "a heartbeat of the trial within its deadline")


# ---------------------------------------------------------------- Ctrl-C


@contextmanager
def _signals_handled_with_stderr_on(fd: int) -> Iterator[threading.Event]:
    """A worker's SIGINT/SIGTERM handlers installed and stderr (fd 2) pointing at ``fd`` (a pty, a pipe) inside; both
    restored after. Yields the stop the handlers set."""
    from coevo.search.workers import _stop_on_signals

    if threading.current_thread() is not threading.main_thread():
        pytest.skip("signal handlers are set in the main thread only")
    stop = threading.Event()
    saved = os.dup(2)
    restore = _stop_on_signals(stop)
    try:
        os.dup2(fd, 2)
        yield stop
    finally:
        os.dup2(saved, 2)
        restore()
        os.close(saved)


def test_the_first_ctrl_c_on_a_terminal_is_answered_at_once_and_the_second_interrupts() -> None:
    # a proposer's step (a round's proposals) can take a while before the stop is seen: the person hears at once
    from coevo.search.workers import STOPPING_NOTE

    master, slave = os.openpty()
    with _signals_handled_with_stderr_on(slave) as stop:  # stderr is a terminal
        signal.raise_signal(signal.SIGINT)
        assert stop.is_set()
        with pytest.raises(KeyboardInterrupt):
            signal.raise_signal(signal.SIGINT)
    os.close(slave)
    said = os.read(master, 4096).decode()
    os.close(master)
    assert "stopping:" in said and "Ctrl-C again to stop at once" in said and said.count("stopping:") == 1, said
    assert " ".join(said.split()) == " ".join(STOPPING_NOTE.split())
    # stderr not a terminal (a log, a pipe): nothing is written
    r, w = os.pipe()
    with _signals_handled_with_stderr_on(w) as stop:
        signal.raise_signal(signal.SIGINT)
    os.close(w)
    assert stop.is_set() and os.read(r, 4096) == b""
    os.close(r)


def test_a_worker_started_by_a_search_leaves_the_stopping_note_to_the_search(monkeypatch: pytest.MonkeyPatch) -> None:
    # a terminal's Ctrl-C reaches the whole process group: with --workers 3 the note came three times
    from coevo.search.workers import ENV_WORKER_TAG

    master, slave = os.openpty()
    for tag, said in (("w1", b""), ("", b"stopping:")):
        monkeypatch.setenv(ENV_WORKER_TAG, tag)
        with _signals_handled_with_stderr_on(slave) as stop:  # a terminal, as the search's own stderr
            signal.raise_signal(signal.SIGINT)
            os.write(slave, b"|")  # a marker: what the handler wrote, if anything, comes before it
        heard = b""
        while not heard.endswith(b"|"):
            heard += os.read(master, 4096)
        assert stop.is_set() and heard.strip().startswith(said) and (said or heard.strip() == b"|"), (tag, heard)
    os.close(slave)
    os.close(master)


def _interrupted_search(space: Space, args: list[str], tmp_path: Path, doing: str, settle_s: float = 0.0) -> tuple[int, str, float]:
    """``coevo search ARGS`` in its own process, sent SIGINT once its bad point's evaluation started (``settle_s`` later):
    its exit status, its stderr, and the seconds from the signal to its end."""
    command = [sys.executable, "-m", "coevo.agent.cli", *args]
    proc = subprocess.Popen(command, cwd=tmp_path, env=coevo_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:

        def started() -> bool:
            assert proc.poll() is None, f"the search exited first with {proc.returncode}: {proc.communicate()[1][-2000:]}"
            return space.marker.exists()

        wait_until(started, 240, f"the search to start {doing}")  # start-up takes most of a minute on a loaded machine
        time.sleep(settle_s)
        proc.send_signal(signal.SIGINT)
        sent = time.monotonic()
        _, stderr = proc.communicate(timeout=60)
        took = time.monotonic() - sent
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    return proc.returncode, stderr, took


def test_ctrl_c_during_an_evaluation_busy_in_torch_ends_with_130_not_an_abort(space: Space, storage: str, tmp_path: Path) -> None:
    # Python's shutdown stopped the abandoned evaluation's daemon thread inside torch's C++: "terminate called without
    # an active exception", status 134, after the run's last line
    args = ["search", "--problem", f"{space.file}:Faulty", "--options", json.dumps(space.options("torch-hang", 3)), "--proposer", "random"]
    args += ["--budget", "5", "--storage", storage, "--study", "torch-hang", *TIMING]
    # 0.5 s: well inside the loop of matrix products
    code, stderr, _ = _interrupted_search(space, args, tmp_path, "an evaluation busy in torch", settle_s=0.5)
    assert code == 130 and "terminate called" not in stderr, (code, stderr[-2000:])
    assert "rerun the same command to resume" in stderr


def test_ctrl_c_stops_a_hanging_evaluation_at_once_unpaid_and_a_rerun_evaluates_it(
    space: Space, storage: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    budget, every = 5, 3
    args = ["search", "--problem", f"{space.file}:Faulty", "--options", json.dumps(space.options("hang", every)), "--proposer", "random"]
    args += ["--budget", str(budget), "--storage", storage, "--study", "ctrl-c", *TIMING]
    code, stderr, took = _interrupted_search(space, args, tmp_path, "a hanging evaluation")
    assert code == 130 and took < 15, (code, took, stderr)  # within seconds, not after the hour
    assert "interrupted by a signal" in stderr and "rerun the same command to resume" in stderr and "Traceback" not in stderr
    hung = space.marker.read_text()
    found = audit(storage, "ctrl-c")
    interrupted = [t for t in found.trials if "interrupted" in t.user_attrs]
    assert len(interrupted) == 1 and interrupted[0].state == TrialState.FAIL and "failure" not in interrupted[0].user_attrs
    waiting = [t for t in found.trials if t.state == TrialState.WAITING]
    assert [t.user_attrs["point_id"] for t in waiting] == [hung] and "interrupted" not in waiting[0].user_attrs  # re-queued, clean
    assert found.states["RUNNING"] == 0 and not found.failed  # not paid: the user stopped it, the point did not fail
    assert found.claims == (len(space.calls()), len(space.calls()) - 1)  # its claim waits for the copy
    space.release.touch()  # the rerun's evaluations return
    assert main(args) == 0
    capsys.readouterr()
    found = audit(storage, "ctrl-c")
    calls = space.calls()
    assert Counter(calls)[hung] == 2 and len(calls) == budget + 1  # the interrupted call, then the one paid for
    assert len(found.paid) == budget and found.claims == (budget, budget) and not found.failed
    assert found.states["RUNNING"] == found.states["WAITING"] == 0
    assert [t.user_attrs["point_id"] for t in found.paid].count(hung) == 1


# ---------------------------------------------------------------- many workers, crashes, proposers


def test_a_nan_point_is_evaluated_once_by_two_workers_and_never_requeued(space: Space, storage: str) -> None:
    budget, every = 8, 3
    settings = WorkerSettings(heartbeat_s=1, grace_s=2, patience_s=10)  # sweeps run while the workers work
    problem = space.problem("nan", every, delay=0.5)  # good points take long enough for a sweep to see a stale NaN trial
    name = "two"
    study = open_study(problem, get_proposer("random"), storage=storage, study_name=name, seed=0, budget=budget)
    nan_point = (1, 2)
    for _ in range(3):  # the same NaN point waits three times: both workers get it
        study.enqueue_trial(problem.to_params(nan_point))
    workers = [
        Worker(space.problem("nan", every, delay=0.5), get_proposer("random"), storage=storage, study_name=name, seed=s, settings=settings)
        for s in (0, 1)
    ]
    threads = [threading.Thread(target=w.run, daemon=True) for w in workers]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
    for w in workers:
        w.stop.set()  # bound the old behaviour (re-queued forever); a no-op once they finished
    for t in threads:
        t.join(timeout=30)
    found = audit(storage, name)
    assert Counter(space.calls())["1-2"] == 1, f"the NaN point was evaluated {Counter(space.calls())['1-2']} times"
    assert_paid_exactly(space, found, budget, every)
    assert found.failed["1-2"] == "objective latency is NaN"
    assert not [t for t in found.trials if "failed_trial" in t.system_attrs]  # nothing was re-queued
    copies = [t for t in found.trials if t.user_attrs.get("point_id") == "1-2" and "failure" not in t.user_attrs]
    assert len(copies) >= 2 and all(t.state == TrialState.PRUNED for t in copies)  # the other two copies (and any re-proposal): skipped
    assert sum(w.result.evaluated + w.result.failed for w in workers) == budget and all(w.result.stopped is None for w in workers)


def test_a_failure_recorded_by_a_worker_that_died_before_telling_is_settled_not_requeued(space: Space, storage: str) -> None:
    budget = 3
    settings = WorkerSettings(heartbeat_s=1, grace_s=2, patience_s=10)
    problem = space.problem("nan")
    name = "died"
    study = open_study(problem, get_proposer("random"), storage=storage, study_name=name, seed=0, budget=budget)
    study.enqueue_trial(problem.to_params((1, 2)))
    dead = Worker(problem, get_proposer("random"), storage=storage, study_name=name, seed=0, settings=settings)
    trial = dead.study.ask()
    dead.heart.record_heartbeat(dead.heart.get_trial_id_from_study_id_trial_number(dead.study_id, trial.number))
    assert dead.coord.claim("1-2", trial.number, budget, dead._holder_state) == ("new", None)
    for key, value in {"point_id": "1-2", "query": True, "failure": "objective latency is NaN"}.items():
        trial.set_user_attr(key, value)  # what a worker killed between recording the failure and telling it leaves
    live = Worker(space.problem("nan"), get_proposer("random"), storage=storage, study_name=name, seed=1, settings=settings)
    timer = threading.Timer(60, live.stop.set)  # a bound: the claim it leaves open must not keep the worker waiting forever
    timer.start()
    try:
        result = live.run()
    finally:
        timer.cancel()
    assert result.stopped is None and result.evaluated + result.failed == budget - 1
    found = audit(storage, name)
    assert "1-2" not in space.calls() and found.failed["1-2"] == "objective latency is NaN"
    assert found.claims == (budget, budget) and len(found.paid) == budget
    assert not [t for t in found.trials if "failed_trial" in t.system_attrs]  # failed, not re-queued
    assert found.states["RUNNING"] == found.states["WAITING"] == 0


@pytest.mark.parametrize("proposer", ["pelnas", "tpe"])
def test_the_proposers_keep_going_past_failures_and_never_pay_for_a_failed_point_again(space: Space, storage: str, proposer: str) -> None:
    budget, every = 14, 2
    problem = space.problem("raise", every)
    engine = get_proposer(proposer, {"round_size": 4} if proposer == "pelnas" else None)  # several co-evolution rounds
    result = run_search(problem, engine, budget=budget, storage=storage, study_name=proposer, settings=FAST)
    found = audit(storage, proposer)
    bad_points = assert_paid_exactly(space, found, budget, every)
    assert bad_points and result.paid == budget and result.failed == len(bad_points) and result.stopped is None
    if proposer == "pelnas":
        assert int(optuna.load_study(study_name=proposer, storage=storage).user_attrs["coevo.round"]) >= 3
        proposed = Counter(t.user_attrs.get("point_id") for t in found.trials if t.user_attrs.get("round") is not None)
        assert proposed and max(proposed.values()) == 1  # no design proposed twice, failed ones included


def test_evaluations_of_a_study_skip_failed_and_non_finite_trials(space: Space, storage: str) -> None:
    problem = space.problem("nan")
    study = open_study(problem, get_proposer("random"), storage=storage, study_name="old", seed=0, budget=5)
    dists = problem.distributions()

    def add(point: tuple[int, int], state: TrialState, values: list[float] | None, **attrs: Any) -> None:
        user_attrs = {"point_id": problem.point_id(point), "query": True, **attrs}
        params = problem.to_params(point)
        study.add_trial(optuna.trial.create_trial(state=state, values=values, params=params, distributions=dists, user_attrs=user_attrs))

    add((2, 2), TrialState.COMPLETE, [6.0, 5.0])
    add((1, 1), TrialState.COMPLETE, [float("inf"), 3.0])  # a result coevo counted before it checked values
    add((1, 2), TrialState.FAIL, None, failure="objective latency is NaN")
    add((0, 1), TrialState.FAIL, None)  # a dead worker's trial: not an evaluation, not paid
    assert [e.point_id for e in evaluations_from_study(problem, study)] == ["2-2"]
    assert paid_count(study) == 3
    result = summarize(problem, study, proposer="random", seed=0, budget=5, storage=storage, wall_s=0.0)
    assert (result.evaluations, result.failed) == (1, 1) and [row["point_id"] for row in result.front] == ["2-2"]


# ---------------------------------------------------------------- the limit's declaration and flags


@pytest.mark.parametrize(
    "argv",
    [["search", "--eval-timeout", "0"], ["search", "--eval-timeout", "nan"], ["worker", "--study", "x", "--eval-timeout", "-1"]],
)
def test_a_bad_eval_timeout_is_one_line_naming_the_flag(
    argv: list[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(tmp_path)
    assert main(argv) == 2
    text = " ".join(capsys.readouterr().err.split())
    assert "--eval-timeout must be a positive number of seconds (inf: no limit)" in text and "Traceback" not in text
    assert list(tmp_path.iterdir()) == []  # refused before anything was created


def test_the_eval_timeout_travels_from_the_flags_and_a_problem_must_declare_a_positive_one(
    space: Space, monkeypatch: pytest.MonkeyPatch
) -> None:
    config = SearchConfig.create(proposer="random", budget=5, eval_timeout_s=2.5)
    argv = config.to_argv()
    assert argv[argv.index("--eval-timeout") + 1] == "2.5"  # a background search (search.start) gets it
    assert search_config(build_parser(problem_class("nb201")).parse_args(["search", *argv])).eval_timeout_s == 2.5
    started: list[list[str]] = []
    monkeypatch.setattr(subprocess, "Popen", lambda command, **_: started.append(command))
    WorkerProcesses(config, WorkerSettings(), 2).start("s")
    assert len(started) == 2 and all(c[c.index("--eval-timeout") + 1] == "2.5" for c in started)  # and so do --workers N's workers
    assert SearchConfig().eval_timeout_s is None  # unset: the problem's own limit
    broken = space.file.with_name("broken.py")
    broken.write_text(SOURCE + "\n\nclass Never(Faulty):\n    name = 'never'\n    eval_timeout_s = 0\n")
    with pytest.raises(UserInputError, match=r"Never\.eval_timeout_s must be a positive number of seconds"):
        problem_class(f"{broken}:Never")
