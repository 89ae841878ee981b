"""The zero-cost proxy settings, and the proxy table coevo ships for NB201 cells, read without PyTorch.

A search reads proxies for free from the shipped table (``data/proxies-<source>.npz``, built by
``python -m coevo.figures proxy-table``, provenance in ``data/PROVENANCE.md``); only cells the
table lacks need a PyTorch computation (:mod:`search.zero_cost`). This module holds what both
sides share: the proxy names, the settings that key a score (:class:`ProxyConfig`), the table
reader, and :class:`FreeProxies`: every proxy, the predictor features and the label-free prior
of the cells the table has (NaN for the others), which a query-mode search uses without
importing PyTorch or computing anything.
"""

from __future__ import annotations

import functools
import hashlib
import json
import zipfile
from dataclasses import dataclass
from importlib import resources
from typing import Literal

import numpy as np

from coevo.search.errors import CoevoError
from coevo.search.nb201.space import Cell, format_arch, parse_arch
from coevo.search.predictor import robust_z, zero_shot

PROXIES: tuple[str, ...] = ("synflow", "naswot", "jacob_cov", "snip", "grad_norm", "plain", "fisher", "l2_norm", "zen", "params", "flops")
PROXY_VERSION = 2
"""Bumped whenever a proxy's definition changes (2: Zen-score on the Gaussian-initialised network)."""
PRIOR_PROXIES: tuple[str, ...] = ("synflow", "naswot", "jacob_cov", "zen")
"""Proxies averaged into the label-free prior: the recipe of docs/bench/nb201/issue15-zero-shot.md with
the best mean HV on the validation datasets (CIFAR-100, ImageNet16-120)."""
FEATURE_PROXIES: tuple[str, ...] = tuple(p for p in PROXIES if p != "params")
"""Proxies the learned predictor sees (``params`` is ``flops`` up to a monotone map on NB201)."""
REFERENCE_CELLS = 200
"""Random cells whose proxy scores set each proxy's median and spread: the shipped table's first
ones (a uniform sample), else cells drawn with :data:`REFERENCE_SEED`."""
REFERENCE_SEED = 12345


@dataclass(frozen=True)
class ProxyConfig:
    """What the scores depend on; part of the cache key.

    Attributes:
        batch: mini-batch size.
        seed: seed of the weights, the patches and the labels.
        channels, cells_per_stage, num_classes: the NB201 network's size (the benchmark's: 16, 5, 10).
        batch_source: ``natural`` (image patches, :mod:`search.zero_cost`) or ``gaussian`` (synthetic).
    """

    batch: int = 32
    seed: int = 0
    channels: int = 16
    cells_per_stage: int = 5
    num_classes: int = 10
    batch_source: Literal["natural", "gaussian"] = "natural"

    def key(self) -> str:
        """The config hash a stored or shipped score carries (settings, proxy set and definition version)."""
        # the proxy set and definitions are part of what a stored score means: new ones make new rows
        payload = {**vars(self), "proxies": PROXIES, "version": PROXY_VERSION}
        return hashlib.sha1(json.dumps(payload, sort_keys=True).encode()).hexdigest()[:12]


DEFAULT_CONFIG = ProxyConfig()

SHIPPED = {"natural": "proxies-natural.npz"}
"""Precomputed tables shipped in ``search/nb201/data`` per batch source (python -m coevo.figures proxy-table)."""


def _data_files() -> list[tuple[str, object]]:
    return [(name, resources.files("coevo.search.nb201") / "data" / name) for name in SHIPPED.values()]


@functools.cache
def shipped_arrays(key: str) -> tuple[np.ndarray, np.ndarray] | None:
    """``(index, scores)`` of the shipped table made with config key ``key``: NB201 indices (n,) and scores (n, len(PROXIES)).

    None when no table with that key ships: a table made with other settings or proxy
    definitions is never used in place of a computation.
    """
    for _name, path in _data_files():
        if not path.is_file():  # type: ignore[attr-defined]
            continue
        try:
            with resources.as_file(path) as file, np.load(file) as data:  # type: ignore[arg-type]
                if str(data["config"]) != key:
                    continue
                index = np.asarray(data["index"], dtype=np.int64)
                scores = np.stack([np.asarray(data[p], dtype=float) for p in PROXIES], axis=1)
        except (OSError, ValueError, KeyError, zipfile.BadZipFile) as exc:
            raise CoevoError(f"the shipped proxy table {path} is unreadable ({exc}); reinstall coevo (pip install -e .)") from exc
        return index, scores
    return None


@functools.cache
def shipped_table(key: str) -> dict[str, dict[str, float]] | None:
    """Scores of the shipped table whose config key is ``key``, by arch string (None when none ships)."""
    from coevo.search.nb201.table import load_table

    arrays = shipped_arrays(key)
    if arrays is None:
        return None
    table = load_table()
    index, scores = arrays
    return {format_arch(table.cell(int(i))): dict(zip(PROXIES, map(float, row), strict=True)) for i, row in zip(index, scores, strict=True)}


def shipped_cells(key: str) -> list[Cell]:
    """Cells of the shipped table made with config key ``key``, in the table's (uniformly random) order; [] when none ships."""
    return [parse_arch(a) for a in shipped_table(key) or {}]


class FreeProxies:
    """The shipped table's proxies of every NB201 cell it has, as predictor features and a prior; NaN for the rest.

    Nothing is computed: a cell outside the table has NaN proxy features and prior (a tree
    predictor routes missing values; the engine never pays a network instantiation for a
    candidate). The scale (median and spread of each proxy) is the shipped table's first
    :data:`REFERENCE_CELLS` cells, the same reference :class:`search.nb201.proxies.NB201Proxies` uses.

    Args:
        config: proxy settings; with settings no shipped table was made with, every cell is missing.
    """

    def __init__(self, config: ProxyConfig = DEFAULT_CONFIG) -> None:
        from coevo.search.nb201.table import load_table

        self.config = config
        table = load_table()
        arrays = shipped_arrays(config.key())
        n_cells = len(table.ops)
        self.raw = np.full((n_cells, len(PROXIES)), np.nan)
        self.count = 0
        if arrays is not None and len(arrays[0]) >= REFERENCE_CELLS:
            index, scores = arrays
            self.raw[index] = scores
            self.count = len(index)
            reference = scores[:REFERENCE_CELLS]
            cols = [PROXIES.index(p) for p in FEATURE_PROXIES]
            prior_cols = [PROXIES.index(p) for p in PRIOR_PROXIES]
            known = ~np.isnan(self.raw[:, 0])
            self._z = np.full((n_cells, len(cols)), np.nan)
            self._z[known] = robust_z(self.raw[known][:, cols], reference[:, cols])
            self._prior = np.full(n_cells, np.nan)
            self._prior[known] = zero_shot(self.raw[known][:, prior_cols], reference[:, prior_cols])
        else:
            self._z = np.full((n_cells, len(FEATURE_PROXIES)), np.nan)
            self._prior = np.full(n_cells, np.nan)
        self._table = table
        self._cells: list[Cell] | None = None

    def rows(self, cells: list[Cell] | tuple[Cell, ...]) -> np.ndarray:
        """NB201 indices of ``cells``."""
        return self._table.rows(cells)

    def features(self, cells: list[Cell] | tuple[Cell, ...]) -> np.ndarray:
        """(n, len(FEATURE_PROXIES) + 1): robust z of each feature proxy, then the prior; NaN rows for cells the table lacks."""
        rows = self.rows(cells)
        return np.hstack([self._z[rows], self._prior[rows].reshape(-1, 1)])

    def prior(self, cells: list[Cell] | tuple[Cell, ...]) -> np.ndarray:
        """(n,) label-free estimate (mean robust z of :data:`PRIOR_PROXIES`); NaN for cells the table lacks."""
        return self._prior[self.rows(cells)]

    def cells(self) -> list[Cell]:
        """The cells with free proxies, in NB201 index order."""
        from coevo.search.nb201.table import load_table

        if self._cells is None:
            table = load_table()
            self._cells = [table.cell(int(i)) for i in np.flatnonzero(~np.isnan(self._prior))]
        return list(self._cells)

    def describe(self) -> str:
        """What is free, in one phrase (for a result's information line)."""
        if not self.count:
            return f"no shipped proxy table for config {self.config.key()}"
        n = len(FEATURE_PROXIES)
        return f"{n} zero-cost proxies and their prior for the {self.count:,} shipped-table cells (config {self.config.key()})"


@functools.cache
def free_proxies(config: ProxyConfig = DEFAULT_CONFIG) -> FreeProxies:
    """The process-wide :class:`FreeProxies` of ``config`` (built once: it reads the shipped table)."""
    return FreeProxies(config)
