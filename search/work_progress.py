"""Progress of long work: tools and problems report, whoever called them (CLI bar or lines, chat spinner) listens.

Long work (a tool's simulation, a problem's one-off set-up such as the zero-cost reference
cells, the zoo's first-use training) calls :func:`report` now and then; :func:`listening`
installs a listener for the duration of a call. The mechanism is :mod:`sim._progress` (the
simulators and the zoo, which import nothing above ``sim``, report through it too); this
module is where the rest of coevo takes it from. Stopping is Ctrl-C: the simulators catch it,
stop at the next cycle and return what they measured, marked ``stopped_early``.
"""

from __future__ import annotations

from collections.abc import Callable

from coevo.sim._progress import Listener, listening, report

__all__ = ["Listener", "cycles", "listening", "report"]


def cycles(what: str) -> Callable[[int, int], bool]:
    """A simulator progress callback (``(cycle, total) -> keep going``) that reports as ``what``."""

    def step(t: int, total: int) -> bool:
        report(f"{what}: cycle {t:,} of {total:,}", t / total if total else 1.0)
        return True

    return step
