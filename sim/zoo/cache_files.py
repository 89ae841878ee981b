"""Files of coevo's caches (zoo models, named graphs, LinGCN models): atomic writes, a lock, and the note of a rebuild.

The house rule for every cache under ``$COEVO_CACHE``: a file that does not load, or that fails
its own check (another recipe, weights that differ from their recorded fingerprint), is made
again from its recipe and the user is told in one line; it is never used as it is, and it is
never a crash. A write goes to a temporary file that is renamed into place, and a write that
fails removes its temporary file.

Notes are :class:`CacheNote` warnings, so a caller that records warnings (as the zoo-backed tools
do for their messages) gets the bare text. A note nobody collects reaches stderr as
``note: <text>`` in the ``coevo`` command, which installs a formatter for this one category
(:func:`install_note_format`; every other warning keeps Python's format), because Python's own
prints the source file, its line and the ``warnings.warn`` call under the note, which means
nothing to a user.
Torch-free, so :mod:`sim.graph` uses it without loading torch.
"""

from __future__ import annotations

import contextlib
import os
import threading
import warnings
from collections.abc import Callable, Iterator
from pathlib import Path

try:  # POSIX: rebuilding a cache entry is locked across processes
    import fcntl
except ImportError:  # pragma: no cover - Windows
    fcntl = None  # type: ignore[assignment]

__all__ = [
    "CacheNote",
    "DamagedCache",
    "atomic_write",
    "collected_notes",
    "exclusive",
    "install_note_format",
    "note",
    "rebuilt_note",
    "why_not_loaded",
]


class CacheNote(UserWarning):
    """A cache file was rebuilt or repaired: worth one line to the user, not an error."""


class DamagedCache(ValueError):
    """A cache file that loads but fails its own check; the message is coevo's sentence saying which check."""


def why_not_loaded(exc: BaseException) -> str:
    """Why a cache file did not load, for a note: our own check's sentence, else the exception's class alone.

    The class alone, not the message: a library's message can run to many lines (torch's unpickling
    errors advise rerunning ``torch.load`` with ``weights_only=False``, which must not be done with a
    cache file nobody vouches for).
    """
    return str(exc) if isinstance(exc, DamagedCache) else type(exc).__name__


def rebuilt_note(path: Path, exc: BaseException, again: str = "trained again") -> str:
    """``rebuilt: the cache file PATH did not load (WHY); trained again``: one line, for :func:`note`."""
    return f"rebuilt: the cache file {path} did not load ({why_not_loaded(exc)}); {again}"


def note(text: str, stacklevel: int = 1) -> None:
    """Tell the user ``text`` as a :class:`CacheNote` (``stacklevel`` counts from the caller of this function)."""
    warnings.warn(text, CacheNote, stacklevel=stacklevel + 1)


@contextlib.contextmanager
def collected_notes() -> Iterator[list[str]]:
    """The texts of the :class:`CacheNote` warnings the block raises, filled in when it ends (a tool's messages).

    Every other warning goes on as it would have without the block.
    """
    notes: list[str] = []
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", CacheNote)
        yield notes
    for w in caught:
        if issubclass(w.category, CacheNote):
            notes.append(str(w.message))
        else:
            warnings.warn_explicit(w.message, w.category, w.filename, w.lineno)


def atomic_write(path: Path, write: Callable[[Path], object]) -> None:
    """``write(tmp)`` a temporary file beside ``path``, then rename it to ``path``; on any failure remove the temporary file.

    The rename is atomic, so a reader (another process) never sees half a file, and a killed or
    failed write leaves the old file, if any, as it was. The temporary name holds the process and
    thread, so two writers never share one.
    """
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}-{threading.get_ident()}.tmp")
    try:
        write(tmp)
        os.replace(tmp, path)
    except BaseException:  # KeyboardInterrupt too: no full-size leftover per failed attempt
        with contextlib.suppress(OSError):
            tmp.unlink(missing_ok=True)
        raise


@contextlib.contextmanager
def exclusive(path: Path) -> Iterator[None]:
    """Hold an exclusive lock beside ``path`` (``flock`` on ``.NAME.lock``; a no-op where the platform has none)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    if fcntl is None:
        yield
        return
    with open(path.with_name(f".{path.name}.lock"), "a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def _format(message: Warning | str, category: type[Warning], filename: str, lineno: int, line: str | None = None) -> str:
    """``note: TEXT`` for a :class:`CacheNote`, Python's format for every other warning."""
    if isinstance(category, type) and issubclass(category, CacheNote):
        return f"note: {message}\n"
    return _python_format(message, category, filename, lineno, line)


_python_format = warnings.formatwarning


def install_note_format() -> None:
    """Print a :class:`CacheNote` nobody collects as ``note: TEXT`` (the ``coevo`` command calls this at start).

    Not at import: replacing :func:`warnings.formatwarning` makes Python format every warning through it, without the
    allocation traceback ``-X tracemalloc`` adds, which a library must not do to its importer. formatwarning, unlike
    showwarning, is left alone by ``warnings.catch_warnings``, so the format outlives every block that records or
    silences warnings, and a block that records never formats: the tools' messages get the bare text.
    """
    warnings.formatwarning = _format
