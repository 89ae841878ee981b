"""Output folders a command writes into (created up front, refused in one line when a file is in the way), and the cache root."""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from coevo.sim.errors import UserInputError

__all__ = ["ENV_CACHE", "cache_root", "make_out_folder", "new_out_folder"]

ENV_CACHE = "COEVO_CACHE"
"""The environment variable that moves coevo's cache (zoo models, graphs, netlists, exact fronts)."""


def cache_root() -> Path:
    """``$COEVO_CACHE`` when set, else ``~/.cache/coevo``: every cache of coevo lives in a folder below it."""
    root = os.environ.get(ENV_CACHE)
    return Path(root) if root else Path.home() / ".cache" / "coevo"


def make_out_folder(out: Path, what: str, flag: str = "--out") -> Path | None:
    """Create ``out`` (and missing parents) before any work is done; returns the topmost folder created, None if it existed.

    Commands call this before they measure, so a bad ``--out`` costs the user nothing (a run that
    fails on its last line, after minutes of scoring, loses them).

    Args:
        out: the folder.
        what: what goes into it, for the message ("report", "benchmark outputs").
        flag: the option that named it.

    Raises:
        UserInputError: ``out`` or a parent is a file, or the folder cannot be created.
    """
    missing = next((p for p in reversed([out, *out.parents]) if not p.exists()), None)
    try:
        out.mkdir(parents=True, exist_ok=True)
    except FileExistsError:
        raise UserInputError(f"{flag} {out} is a file, not a folder: choose another path for the {what}") from None
    except NotADirectoryError:
        blocker = next((p for p in out.parents if p.is_file()), out.parent)
        raise UserInputError(f"cannot create the {what} folder {out}: {blocker} is a file, not a folder") from None
    except OSError as exc:
        raise UserInputError(f"cannot create the {what} folder {out}: {exc.strerror or exc}") from None
    if missing is None:  # it was there: can this process write into it? (asked by writing: root ignores modes, /sys refuses)
        try:
            with tempfile.TemporaryFile(dir=out):
                pass
        except OSError as exc:
            raise UserInputError(
                f"cannot write the {what} into {out}: {exc.strerror or exc}; choose a folder you can write with {flag}"
            ) from None
    return missing


@contextmanager
def new_out_folder(out: Path, what: str, flag: str = "--out") -> Iterator[Path | None]:
    """:func:`make_out_folder`, and the folders it created removed again when the block raises.

    For the checks and writes a command does before its output is worth keeping: its bad input (a
    storage that does not open, a study that does not load) leaves nothing behind. Yields what
    :func:`make_out_folder` returns.
    """
    created = make_out_folder(out, what, flag)
    try:
        yield created
    except BaseException:
        if created is not None:
            shutil.rmtree(created, ignore_errors=True)
        raise
