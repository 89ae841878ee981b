"""Progress on stderr for everything a person waits on: a bar on a terminal, plain lines otherwise.

One object, :class:`Reporter`, holds the tasks (rich's :class:`~rich.progress.Progress` keeps
their counts, elapsed time and rate). On a terminal rich draws them as bars; when stderr is
not a terminal (a log file, a pipe, CI) the same tasks are written as plain lines: one when a
task is under way (it made progress, or has run :data:`START_AFTER_S` seconds), one every
:data:`PLAIN_INTERVAL_S` seconds while it runs (a slow step still shows the run is alive) and
one when it ends, each with done/total, the elapsed time and an estimate of the time left. A
task that ends or fails before it is under way writes nothing: a quick command stays quiet,
and a bad input stays the one line of its error. Long work reported through :mod:`search.work_progress` (a zoo
model trained on first use, proxy scoring, the few-shot stage) becomes a task of its own
(:meth:`Reporter.listening`), whose first report, an announcement with an estimate, stays on
screen as a line once the work has run :data:`START_AFTER_S` seconds (on a terminal too): work
that ends sooner (the prediction stage of a read-only ``coevo runs list``) writes nothing,
though its reports move at once.
"""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from types import TracebackType
from typing import Any

from rich.console import Console
from rich.progress import BarColumn, Progress, ProgressColumn, Task, TaskID, TextColumn, TimeElapsedColumn
from rich.text import Text

from coevo.agent.cli._console import err

PLAIN_INTERVAL_S = 5.0
"""Seconds between two plain lines of a running task when stderr is not a terminal."""
START_AFTER_S = 3.0
"""Seconds a task without progress runs before its first plain line: a person waiting longer than this is told."""
SPEED_WINDOW_S = 60.0
"""Seconds of recent progress the rate (and so the estimate) is taken over."""


def eta_seconds(task: Task) -> float | None:
    """Seconds left: rich's recent rate when it has one, else the average rate since the start; None when unknown."""
    if task.total is None or task.finished:
        return None if task.total is None else 0.0
    left = task.time_remaining
    if left is not None:
        return float(left)
    elapsed = task.elapsed or 0.0
    if task.completed <= 0 or elapsed <= 0:
        return None
    return elapsed * (task.total - task.completed) / task.completed


def clock_text(seconds: float | None) -> str:
    """``m:ss`` (``h:mm:ss`` past an hour), or ``?`` when unknown."""
    if seconds is None or not math.isfinite(seconds):
        return "?"
    s = round(seconds)
    h, rest = divmod(s, 3600)
    return f"{h}:{rest // 60:02d}:{rest % 60:02d}" if h else f"{rest // 60}:{rest % 60:02d}"


class EtaColumn(ProgressColumn):
    """The bar's estimate of the time left: the same number the plain lines give (:func:`eta_seconds`)."""

    def render(self, task: Task) -> Text:
        """``eta m:ss`` (nothing for a phase without a total)."""
        return Text("" if task.total is None else f"eta {clock_text(eta_seconds(task))}", style="progress.remaining")


def plain_line(task: Task, *, ended: bool = False) -> str:
    """One task as a plain line: what, done/total (or the task's detail), elapsed time, and an estimate or how it ended."""
    detail = str(task.fields.get("detail") or "")
    if not detail and task.total is not None:
        detail = f"{task.completed:g}/{task.total:g}"
    parts = [str(task.description), *([detail] if detail else [])]
    elapsed = clock_text(task.elapsed or 0.0)
    if ended:
        parts.append(f"ended after {elapsed}")
    elif task.total is None:
        parts.append(f"{elapsed} elapsed")
    else:
        parts += [f"{elapsed} elapsed", f"eta {clock_text(eta_seconds(task))}"]
    return " · ".join(parts)


class Reporter:
    """The progress of one command on stderr (module doc): ``add_task``/``update`` as rich's Progress, drawn or written.

    Args:
        console: where it goes (stderr's console).
        plain: plain lines instead of bars; default: when ``console`` is not a terminal.
        interval_s: seconds between two plain lines of a running task.
        start_after_s: seconds a task without progress runs before its first plain line.
        clock: the time function (monotonic seconds); tests pass a fake one.
        ticking: in plain mode, a background thread writes the due lines of tasks that do not
            move (a long evaluation); tests turn it off and call :meth:`tick` themselves.
    """

    def __init__(
        self,
        console: Console = err,
        *,
        plain: bool | None = None,
        interval_s: float = PLAIN_INTERVAL_S,
        start_after_s: float = START_AFTER_S,
        clock: Callable[[], float] = time.monotonic,
        ticking: bool = True,
    ) -> None:
        self.console = console
        self.plain = not console.is_terminal if plain is None else plain
        self.interval_s = interval_s
        self.start_after_s = start_after_s
        self.clock = clock
        self.bar = Progress(
            TextColumn("[bold]{task.description}"),
            BarColumn(),
            TextColumn("{task.fields[detail]}"),
            TimeElapsedColumn(),
            EtaColumn(),
            console=console,
            transient=True,
            disable=self.plain,
            get_time=clock,
            speed_estimate_period=SPEED_WINDOW_S,
        )
        self._last: dict[TaskID, float] = {}
        self._pending: dict[TaskID, tuple[str, float]] = {}  # announcements not written yet: their line and when they came
        self._lock = threading.RLock()
        self._stop = threading.Event()
        self._ticker: threading.Thread | None = None
        self._ticking = ticking

    def __enter__(self) -> Reporter:
        self.bar.start()
        if self._ticking:  # on a terminal too: an announcement is printed once its work has run a while
            self._ticker = threading.Thread(target=self._tick_until_stopped, name="coevo-progress", daemon=True)
            self._ticker.start()
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None) -> None:
        self._stop.set()
        if self._ticker is not None:
            self._ticker.join()
        for task in self._running():  # the end line of what was still running (a search stopped by Ctrl-C, say)
            self.remove_task(task.id)
        self.bar.stop()

    def add_task(self, description: str, total: float | None = None, detail: str = "", *, announce: bool = False) -> TaskID:
        """A new task (``total`` None: a phase without a count); ``announce`` keeps its description on screen as a line.

        An announcement is written (plain mode: as its first plain line) once the task has run :attr:`start_after_s`,
        whatever progress it reports meanwhile; one over sooner writes nothing. Another task's first line waits until it
        is under way (progress, or :attr:`start_after_s`).
        """
        with self._lock:
            task = self.bar.add_task(description, total=total, detail=detail)
            if announce:
                current = self._task(task)
                line = plain_line(current) if self.plain and current is not None else description
                self._pending[task] = (line, self.clock())
            return task

    def update(self, task: TaskID, **fields: Any) -> None:
        """Change a task (rich's ``update`` keywords: ``completed``, ``total``, ``description``, ``detail``, ...).

        A task that reaches its total ends: its end line in plain mode, and its bar is hidden
        (the work after it, such as scoring the front, shows its own instead of a frozen bar).
        """
        with self._lock:
            self.bar.update(task, **fields)
            current = self._task(task)
            if current is None or not current.visible:
                return
            if current.finished:
                self._announce_if_due(current)  # it ran past the threshold since the last tick: announced, then its end
                if self.plain and (task in self._last or (current.completed > 0 and task not in self._pending)):
                    self._write(task, ended=True)
                self._pending.pop(task, None)  # over before it was announced: a quick step says nothing
                self.bar.update(task, visible=False)
            elif self.plain:
                self._write_if_due(current)

    def remove_task(self, task: TaskID) -> None:
        """End a task: its end line in plain mode (when it had not ended already), and its bar goes."""
        with self._lock:
            current = self._task(task)
            if current is not None and current.visible and self.plain and task in self._last:
                self._write(task, ended=True)
            self.bar.remove_task(task)
            self._last.pop(task, None)
            self._pending.pop(task, None)

    def discard(self, task: TaskID) -> None:
        """Drop a task without an end line: work that turned out to have nothing to do (a line it wrote already stays)."""
        with self._lock:
            if self._task(task) is not None:
                self.bar.remove_task(task)
            self._last.pop(task, None)
            self._pending.pop(task, None)

    @contextmanager
    def phase(self, what: str) -> Iterator[None]:
        """A step without a count (``what``): a pulsing bar on a terminal; start, periodic and end lines otherwise."""
        task = self.add_task(what)
        try:
            yield
        finally:
            self.remove_task(task)

    @contextmanager
    def listening(self) -> Iterator[None]:
        """Show what long work reports (:mod:`search.work_progress`) while the block runs: one task per kind of work.

        The kind is the text before a report's first colon; its first report announces it (an
        estimate, where the result goes) and stays as a line; a report at 1 ends it.
        """
        from coevo.search.work_progress import listening

        tasks: dict[str, TaskID] = {}

        def listener(what: str, fraction: float) -> None:
            kind = what.split(":")[0]
            with self._lock:
                if kind not in tasks:
                    tasks[kind] = self.add_task(what, total=1.0, detail=f"{fraction:.0%}", announce=True)
                self.update(tasks[kind], description=what, completed=fraction, detail=f"{fraction:.0%}")
                if fraction >= 1.0:
                    self.remove_task(tasks.pop(kind))

        try:
            with listening(listener):
                yield
        finally:
            for task in tasks.values():
                self.remove_task(task)

    def tick(self) -> None:
        """Write the plain line of every running task whose last line is :attr:`interval_s` old (plain mode).

        A phase without a count (``tool X · 0:13 elapsed``) that has written its first line stays
        quiet while a counted task runs beside it: that task's lines say the work goes on, with more. On a terminal,
        only the announcements that are due are printed (rich draws the rest).
        """
        with self._lock:
            if not self.plain:
                for task in self._running():
                    self._announce_if_due(task)
                return
            running = self._running()
            counted = any(t.total is not None for t in running)
            for task in running:
                if counted and task.total is None and task.id in self._last:
                    continue
                self._write_if_due(task)

    def _tick_until_stopped(self) -> None:
        while not self._stop.wait(min(1.0, self.interval_s / 5)):
            self.tick()

    def _running(self) -> list[Task]:
        return [t for t in self.bar.tasks if t.visible]

    def _task(self, task: TaskID) -> Task | None:
        return next((t for t in self.bar.tasks if t.id == task), None)

    def _announce_if_due(self, task: Task) -> bool:
        """Write ``task``'s pending announcement once it has run :attr:`start_after_s`; True while it is still pending."""
        pending = self._pending.get(task.id)
        if pending is None:
            return False
        line, at = pending
        if self.clock() - at < self.start_after_s:
            return True
        del self._pending[task.id]
        self._last[task.id] = at  # the next line comes an interval after the announcement, as if it had been written then
        self.console.print(line, markup=False, soft_wrap=True, highlight=False)
        return False

    def _write_if_due(self, task: Task) -> None:
        if self._announce_if_due(task):
            return
        last = self._last.get(task.id)
        if last is not None:
            if self.clock() - last >= self.interval_s:
                self._write(task.id)
        elif task.completed > 0 or (task.elapsed or 0.0) >= self.start_after_s:
            self._write(task.id)  # its first line: it made progress, or has run long enough for a person to wonder

    def _write(self, task: TaskID, *, ended: bool = False) -> None:
        current = self._task(task)
        if current is None:
            return
        self._last[task] = self.clock()
        self.console.print(plain_line(current, ended=ended), markup=False, soft_wrap=True, highlight=False)
