"""Error types shared by every coevo package.

The two families (:class:`UserInputError`: the request was wrong, the message says what to
change; :class:`CoevoError`: something failed while doing a valid request) are defined in
:mod:`sim.errors`, the bottom layer, so the simulators raise them without importing anything
above; they are re-exported here with the errors of the search layer (storage).
"""

from __future__ import annotations

from coevo.sim.errors import CoevoError, UserInputError, unknown_name


class StorageError(CoevoError):
    """A storage URL could not be opened or used; the message names the URL and a fix."""


class StorageMissingError(StorageError, UserInputError):
    """A read-only caller found nothing stored at a storage URL (no file, no tables); nothing was created.

    Also a :class:`UserInputError`: the URL names nothing yet, which the caller can fix.
    """


class EvaluationsFailingError(CoevoError):
    """A worker's first paid evaluations all failed: the problem's ``evaluate`` looks broken, so the worker stopped early."""


__all__ = ["CoevoError", "EvaluationsFailingError", "StorageError", "StorageMissingError", "UserInputError", "unknown_name"]
