"""Progress of long work: tools and problems report, whoever called them (CLI bar, chat spinner) listens.

Long work (a tool's simulation, a problem's one-off set-up such as the zero-cost reference
cells) calls :func:`report` now and then; :func:`listening` installs a listener for the
duration of a call (a context variable, so concurrent calls in threads do not mix).
Without a listener a report costs nothing. Stopping is Ctrl-C: the simulators catch it,
stop at the next cycle and return what they measured, marked ``stopped_early``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar

Listener = Callable[[str, float], None]
"""``(what, fraction done in [0, 1])``."""

_LISTENER: ContextVar[Listener | None] = ContextVar("coevo_tool_progress", default=None)


def report(what: str, fraction: float) -> None:
    """Tell the listener (if any) how far a long run is."""
    listener = _LISTENER.get()
    if listener is not None:
        listener(what, min(max(fraction, 0.0), 1.0))


def cycles(what: str) -> Callable[[int, int], bool]:
    """A simulator progress callback (``(cycle, total) -> keep going``) that reports as ``what``."""

    def step(t: int, total: int) -> bool:
        report(f"{what}: cycle {t:,} of {total:,}", t / total if total else 1.0)
        return True

    return step


@contextmanager
def listening(listener: Listener) -> Iterator[None]:
    """Send :func:`report` calls made inside the block to ``listener``."""
    token = _LISTENER.set(listener)
    try:
        yield
    finally:
        _LISTENER.reset(token)
