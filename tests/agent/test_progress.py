"""Progress on stderr: plain lines every few seconds when not a terminal, with done/total, elapsed time and an estimate."""

from __future__ import annotations

import io
import json
import re

import pytest
from rich.console import Console

from coevo.agent.cli import main
from coevo.agent.cli._progress import Reporter
from coevo.search.work_progress import report


class FakeClock:
    """A clock that moves only when the test moves it."""

    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def plain_reporter(clock: FakeClock, interval_s: float = 5.0) -> tuple[Reporter, io.StringIO]:
    """A reporter writing plain lines to a buffer, on the fake clock, with no background ticker."""
    buffer = io.StringIO()
    console = Console(file=buffer, force_terminal=False, width=200)
    return Reporter(console, plain=True, interval_s=interval_s, clock=clock, ticking=False), buffer


def lines(buffer: io.StringIO) -> list[str]:
    return [line for line in buffer.getvalue().splitlines() if line]


def test_plain_lines_come_once_under_way_every_interval_and_at_the_end_with_counts_and_an_estimate() -> None:
    clock = FakeClock()
    reporter, buffer = plain_reporter(clock)
    task = reporter.add_task("search pelnas", total=10)
    clock.now = 2.9
    reporter.tick()
    assert lines(buffer) == []  # not under way yet: a command this quick says nothing
    clock.now = 3.0
    reporter.tick()
    assert lines(buffer) == ["search pelnas · 0/10 · 0:03 elapsed · eta ?"]  # nothing done yet, no rate
    clock.now = 4.0
    reporter.update(task, completed=2)
    assert len(lines(buffer)) == 1  # 4 s after the last line: not due
    clock.now = 8.0
    reporter.update(task, completed=4)
    # 4 done in 8 s (two steps of 2 in 4 s each): 6 left at 0.5 a second is 12 s
    assert lines(buffer)[-1] == "search pelnas · 4/10 · 0:08 elapsed · eta 0:12"
    clock.now = 12.0
    reporter.update(task, completed=6)
    assert len(lines(buffer)) == 2  # 4 s after the last line again
    clock.now = 20.0
    reporter.update(task, completed=10)
    assert lines(buffer)[-1] == "search pelnas · 10/10 · ended after 0:20"
    assert len(lines(buffer)) == 3


def test_a_task_that_fails_before_it_is_under_way_writes_nothing() -> None:
    # a bad input found as the work starts (a corrupt study, an argument out of range) stays the one line of its error
    clock = FakeClock()
    reporter, buffer = plain_reporter(clock)
    with pytest.raises(ValueError), reporter:
        reporter.add_task("search random", total=20)
        clock.now = 0.5
        reporter.tick()
        raise ValueError("corrupt")
    assert lines(buffer) == []
    # progress puts a task under way at once, before the start delay
    reporter, buffer = plain_reporter(clock)
    task = reporter.add_task("search random", total=20)
    reporter.update(task, completed=1)
    assert lines(buffer) == ["search random · 1/20 · 0:00 elapsed · eta ?"]


def test_a_task_that_does_not_move_still_gets_a_line_each_interval() -> None:
    clock = FakeClock()
    reporter, buffer = plain_reporter(clock, interval_s=5.0)
    reporter.add_task("search random", total=3, detail="1/3 · HV ratio 0.5000")
    for now in (1.0, 2.0, 2.9):
        clock.now = now
        reporter.tick()
    assert len(lines(buffer)) == 0
    for now in (3.0, 7.9, 8.0, 12.0, 13.0):
        clock.now = now
        reporter.tick()
    got = lines(buffer)
    assert len(got) == 3
    assert [re.search(r"(\d+:\d\d) elapsed", line).group(1) for line in got] == ["0:03", "0:08", "0:13"]  # type: ignore[union-attr]
    assert all("1/3 · HV ratio 0.5000" in line for line in got)


def test_a_phase_without_a_count_says_how_long_it_has_run_and_when_it_ended() -> None:
    clock = FakeClock()
    reporter, buffer = plain_reporter(clock)
    with reporter.phase("scoring the front"):
        clock.now = 6.0
        reporter.tick()
        clock.now = 7.5
    assert lines(buffer) == ["scoring the front · 0:06 elapsed", "scoring the front · ended after 0:08"]


def test_a_phase_is_quiet_while_counted_work_inside_it_reports() -> None:
    clock = FakeClock()
    reporter, buffer = plain_reporter(clock)
    with reporter.phase("tool noc.simulate"), reporter.listening():
        clock.now = 6.0
        reporter.tick()  # nothing counted yet: the phase says it runs
        report("simulating: cycle 2,000 of 10,000", 0.2)
        clock.now = 12.0
        reporter.tick()
        report("simulating: cycle 6,000 of 10,000", 0.6)
        clock.now = 18.0
        reporter.tick()  # the phase's second line would only repeat what the simulation's lines say
        report("simulating: cycle 10,000 of 10,000", 1.0)
    got = lines(buffer)
    phase = [line for line in got if line.startswith("tool noc.simulate")]
    assert phase == ["tool noc.simulate · 0:06 elapsed", "tool noc.simulate · ended after 0:18"], got  # none between
    assert sum(line.startswith("simulating") for line in got) >= 2 and got[-2].startswith("simulating: cycle 10,000 of 10,000 · 100%")
    assert got[-1] == "tool noc.simulate · ended after 0:18"


def test_reported_long_work_is_announced_then_followed_then_ended() -> None:
    clock = FakeClock()
    reporter, buffer = plain_reporter(clock)
    with reporter.listening():
        report("training zoo model m: on first use (about 80 s on 2 cores; cached in /c)", 0.0)
        clock.now = 3.0
        report("training zoo model m: epoch 1 of 4", 0.25)
        clock.now = 6.0
        report("training zoo model m: epoch 2 of 4", 0.5)
        clock.now = 12.0
        report("training zoo model m: epoch 4 of 4", 1.0)
        report("unrelated: after the end", 0.5)  # another kind of work: a task of its own
        clock.now = 15.0
        reporter.tick()
    got = lines(buffer)
    assert got[0].startswith("training zoo model m: on first use (about 80 s on 2 cores; cached in /c) · 0%")
    assert got[1] == "training zoo model m: epoch 2 of 4 · 50% · 0:06 elapsed · eta 0:06"
    assert got[2] == "training zoo model m: epoch 4 of 4 · 100% · ended after 0:12"
    assert got[3].startswith("unrelated: after the end · 50%")  # announced once it had run 3 s
    assert got[4].startswith("unrelated: after the end · 50% · ended after")  # still running when the block ended
    assert len(got) == 5


def test_reported_work_over_before_it_is_under_way_writes_nothing() -> None:
    # `coevo runs list` of a --budget 0 study re-runs its prediction stage and scores its front in well under the 3 s
    # a person waits before being told: its announcements moved to 100% at once, and used to be written all the same
    clock = FakeClock()
    reporter, buffer = plain_reporter(clock)
    with reporter.listening():
        report("prediction stage: fitting the predictor (0 paid designs)", 0.0)
        clock.now = 0.5
        report("prediction stage: scoring designs", 0.6)
        clock.now = 1.0
        report("prediction stage: done", 1.0)
        report("scoring the reported designs on the true objectives: 0 of 37 designs", 0.0)
        clock.now = 2.0
        report("scoring the reported designs on the true objectives: 20 of 37 designs", 0.5)
        reporter.tick()
    assert lines(buffer) == []
    # the same on a terminal: no announcement is printed for it
    buffer = io.StringIO()
    reporter = Reporter(Console(file=buffer, force_terminal=True, width=200), clock=clock, ticking=False)
    with reporter.listening():
        report("prediction stage: fitting the predictor (0 paid designs)", 0.0)
        clock.now = 2.5
        reporter.tick()
        report("prediction stage: done", 1.0)
    assert "prediction stage" not in buffer.getvalue()


def test_a_piped_search_writes_progress_lines_and_its_wall_time_covers_the_command(
    capsys: pytest.CaptureFixture[str], storage: str
) -> None:
    assert main(["search", "--budget", "5", "--proposer", "random", "--storage", storage, "--json"]) == 0
    captured = capsys.readouterr()
    err = captured.err.splitlines()
    assert any(re.match(r"search random · [1-5]/5 · HV ratio (-|0\.\d{4}) · \d+:\d\d elapsed · eta ", line) for line in err)
    assert any(re.match(r"search random · 5/5 · HV ratio 0\.\d{4} · ended after \d+:\d\d$", line) for line in err)
    wall_s = json.loads(captured.out)["wall_s"]
    assert wall_s > 0  # from main's start (the fake-clock test in tests/search/test_wall_time.py pins what it covers)


def test_work_that_ends_between_two_ticks_after_the_threshold_is_announced_and_ended() -> None:
    """A pending announcement was dropped when the work finished before the next tick: 3-4 s of work wrote nothing."""
    clock = FakeClock()
    reporter, buffer = plain_reporter(clock)
    task = reporter.add_task("scoring the reported designs", total=10, announce=True)
    clock.now = 2.9
    reporter.tick()  # not due yet
    clock.now = 3.8
    reporter.update(task, completed=10)  # done before the next tick
    got = lines(buffer)
    assert len(got) == 2 and got[0].startswith("scoring the reported designs") and "ended after 0:04" in got[1]
    quick, quiet = plain_reporter(FakeClock())
    short = quick.add_task("a quick step", total=1, announce=True)
    quick.update(short, completed=1)  # over at once: nothing
    assert lines(quiet) == []


def test_on_a_terminal_announcements_stay_as_lines_and_no_plain_lines_are_written() -> None:
    clock = FakeClock()
    buffer = io.StringIO()
    reporter = Reporter(Console(file=buffer, force_terminal=True, width=200), clock=clock, ticking=False)
    assert not reporter.plain
    task = reporter.add_task("search pelnas", total=10)
    reporter.add_task("training zoo model m: on first use (about 80 s on 2 cores; cached in /c)", total=1.0, announce=True)
    clock.now = 30.0
    reporter.update(task, completed=5)
    reporter.tick()
    written = buffer.getvalue()
    assert "training zoo model m: on first use (about 80 s on 2 cores; cached in /c)" in written
    assert "search pelnas" not in written  # the bar is rich's to draw (the reporter was never started here)


def test_a_worker_reports_its_progress_unless_quiet(capsys: pytest.CaptureFixture[str], storage: str) -> None:
    from coevo.search.nb201 import NB201Problem
    from coevo.search.proposers import get_proposer
    from coevo.search.study import open_study

    # a study with its budget unspent, so the worker has work to report (on a finished one it has none and says nothing)
    open_study(NB201Problem(dataset="cifar10", device="fpga"), get_proposer("random"), storage=storage, study_name="w", seed=0, budget=3)
    assert main(["worker", "--study", "w", "--storage", storage]) == 0
    err = capsys.readouterr().err.splitlines()
    assert any(line.startswith("worker on w · ") and "ended after" in line for line in err), err
    assert main(["worker", "--study", "w", "--storage", storage, "--quiet"]) == 0
    assert "worker on w" not in capsys.readouterr().err  # the workers `search --workers N` starts: the search reports
