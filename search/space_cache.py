"""The objective values of every design of a space, computed once and kept on disk.

Scoring a search against a problem's exact front needs every design of its space evaluated; for
problems whose evaluation is a simulator run (the pipeline problem: about 30 s for its space on
2 cores) that made every ``coevo runs show`` and every search's start wait that long in silence.
:func:`cached_space` keeps the arrays in ``$COEVO_CACHE/spaces`` under a key of the problem's
spec and a digest of coevo's search and simulator code, so a changed problem, option or model
computes them again. A cache file that cannot be read is computed again and rewritten.
"""

from __future__ import annotations

import functools
import hashlib
import json
import logging
import os
import tempfile
import zipfile
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import numpy as np

from coevo.sim.paths import cache_root

log = logging.getLogger(__name__)

_CODE = Path(__file__).resolve().parents[1]
"""The folder holding coevo's ``search`` and ``sim`` packages, whose code the values depend on."""


@functools.cache
def code_digest() -> str:
    """SHA-256 over the source of coevo's ``search`` and ``sim`` packages (any change computes the spaces again)."""
    digest = hashlib.sha256()
    for package in ("search", "sim"):
        for path in sorted((_CODE / package).rglob("*.py")):
            digest.update(str(path.relative_to(_CODE)).encode())
            digest.update(path.read_bytes())
    return digest.hexdigest()


def _files_named(value: Any) -> list[Path]:
    """Files a spec names (a cluster's ``my.json``, a model's ``my_models.py:make``): their content is part of the key."""
    if isinstance(value, Mapping):
        return [p for v in value.values() for p in _files_named(v)]
    if isinstance(value, list | tuple):
        return [p for v in value for p in _files_named(v)]
    if isinstance(value, str) and value:
        path = Path(value.split(":", 1)[0] if value.count(":") == 1 and not value.startswith(("http:", "https:")) else value)
        try:
            return [path.resolve()] if path.is_file() else []
        except OSError:
            return []
    return []


def cache_path(name: str, spec: Mapping[str, Any]) -> Path:
    """Where the space of problem ``name`` with ``spec`` is kept.

    The key holds the spec, the code digest and the content of every file the spec names, so
    editing a user's cluster or model file computes the space again (the spec holds its path only).
    """
    digest = hashlib.sha256((json.dumps(spec, sort_keys=True, default=str) + code_digest()).encode())
    for path in sorted(set(_files_named(spec))):
        digest.update(str(path).encode())
        digest.update(path.read_bytes())
    return cache_root() / "spaces" / f"{name}-{digest.hexdigest()[:16]}.npz"


def cached_space(name: str, spec: Mapping[str, Any], compute: Callable[[], dict[str, np.ndarray]]) -> dict[str, np.ndarray]:
    """The arrays ``compute()`` returns for this problem and spec, from the cache when they are there.

    Args:
        name: the problem's name (the file's prefix).
        spec: everything the values depend on besides the code (the problem's spec).
        compute: makes the arrays (every design's objectives, ids), called on a miss.
    """
    path = cache_path(name, spec)
    try:
        with np.load(path, allow_pickle=False) as data:
            return {key: data[key] for key in data.files}
    except FileNotFoundError:
        pass
    except (OSError, ValueError, KeyError, EOFError, zipfile.BadZipFile) as exc:  # an empty, cut or corrupt file: computed again
        log.warning("the cached space %s could not be read (%s): computing it again", path, exc)
    arrays = compute()
    _keep(path, arrays)
    return arrays


def _keep(path: Path, arrays: Mapping[str, np.ndarray]) -> None:
    """Write ``arrays`` to ``path`` whole or not at all (a temporary file, flushed to disk, then renamed over it)."""
    tmp: str | None = None
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path.parent, suffix=".npz")
        with os.fdopen(fd, "wb") as fh:
            np.savez(fh, **arrays)  # type: ignore[arg-type]  # numpy stubs type the keywords as allow_pickle
            fh.flush()
            os.fsync(fh.fileno())  # a crash after the rename must not leave an empty file under the final name
        os.replace(tmp, path)
        tmp = None
    except OSError as exc:  # a read-only home or a full disk: the values are still right, only not kept
        log.warning("could not keep the space in %s (%s); it is computed again next time", path.parent, exc)
    finally:
        if tmp is not None:
            Path(tmp).unlink(missing_ok=True)
