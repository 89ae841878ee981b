"""Output folders a command writes into: created up front, refused in one line when a file is in the way."""

from __future__ import annotations

import shutil
from pathlib import Path

from coevo.sim.errors import UserInputError

__all__ = ["make_out_folder", "remove_created"]


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
    return missing


def remove_created(created: Path | None) -> None:
    """Remove the folder :func:`make_out_folder` created (its return value; None: it existed, nothing to remove).

    For a command that fails before it has written anything there: its bad input leaves nothing behind.
    """
    if created is not None:
        shutil.rmtree(created, ignore_errors=True)
