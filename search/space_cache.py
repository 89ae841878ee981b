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


def cache_path(name: str, spec: Mapping[str, Any]) -> Path:
    """Where the space of problem ``name`` with ``spec`` is kept."""
    key = hashlib.sha256((json.dumps(spec, sort_keys=True, default=str) + code_digest()).encode()).hexdigest()[:16]
    return cache_root() / "spaces" / f"{name}-{key}.npz"


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
    except (OSError, ValueError, KeyError, zipfile.BadZipFile) as exc:  # a cut or corrupt file: computed again
        log.warning("the cached space %s could not be read (%s): computing it again", path, exc)
    arrays = compute()
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path.parent, suffix=".npz")
        with os.fdopen(fd, "wb") as fh:
            np.savez(fh, **arrays)  # type: ignore[arg-type]  # numpy stubs type the keywords as allow_pickle
        os.replace(tmp, path)  # whole or not at all: a reader never sees half a file
    except OSError as exc:  # a read-only home: the values are still right, only not kept
        log.warning("could not keep the space in %s (%s); it is computed again next time", path.parent, exc)
    return arrays
