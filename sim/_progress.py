"""Progress of long work, at the bottom of the package: simulators and the zoo report, whoever listens shows it.

Long work calls :func:`report` now and then with ``(what, fraction done)``; :func:`listening`
installs a listener for the duration of a call (a context variable, so concurrent calls in
threads do not mix; the search's evaluation threads copy their caller's context). Without a
listener a report costs nothing. It lives in ``sim`` because the simulators stand alone
(they import nothing above them) and the zoo's first-use training must still be heard;
:mod:`search.work_progress` is the module the rest of coevo imports.

By convention the first report of a piece of work (fraction 0) announces it: what it does,
about how long it takes, and where its result is kept (``training zoo model cnn-digits on
first use (about 80 s on 2 cores; cached in ...)``); later reports with the same text before
the first colon update it.
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


@contextmanager
def listening(listener: Listener) -> Iterator[None]:
    """Send :func:`report` calls made inside the block to ``listener``."""
    token = _LISTENER.set(listener)
    try:
        yield
    finally:
        _LISTENER.reset(token)
