"""The shipped NB201 x hardware table: accuracy per dataset and latency per device.

Provenance: ``data/PROVENANCE.md`` beside this file (NATS-Bench accuracies, HELP /
HW-NAS-Bench latencies, MIT). Loaded once per process from a compressed npz.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from dataclasses import dataclass
from importlib import resources
from typing import Literal, get_args

import numpy as np

from coevo.search.errors import unknown_name
from coevo.search.nb201.space import N_OPS, Cell, cell_key, format_arch, is_disconnected

Dataset = Literal["cifar10", "cifar100", "imagenet16_120"]
"""The table's datasets, declared once (the ``nb201`` problem's option and the nb201 tools' argument)."""
DATASETS: tuple[Dataset, ...] = get_args(Dataset)
USEFUL_FLOOR: dict[str, float] = {"cifar10": 80.0, "cifar100": 50.0, "imagenet16_120": 25.0}
"""Accuracy floor (%) of the useful region per dataset (docs/design.md, Metrics)."""


@dataclass(frozen=True, eq=False)
class NB201Table:
    """All 15,625 cells with their accuracies (%) and latencies (ms).

    Attributes:
        ops: (N, 6) op codes per cell, row i = NAS-Bench-201 index i.
        accuracy: dataset -> (N,) test accuracy in %.
        latency: device -> (N,) latency in ms.
        key_to_index: (N,) NAS-Bench-201 index of each :func:`cell_key`.
    """

    ops: np.ndarray
    accuracy: dict[str, np.ndarray]
    latency: dict[str, np.ndarray]
    key_to_index: np.ndarray

    @property
    def devices(self) -> tuple[str, ...]:
        """Device names accepted by ``--device`` (the latency columns)."""
        return tuple(sorted(self.latency))

    def acc(self, dataset: str) -> np.ndarray:
        """Accuracy column (%) of ``dataset``; unknown names list the valid ones."""
        try:
            return self.accuracy[dataset]
        except KeyError:
            raise unknown_name("dataset", dataset, self.accuracy) from None

    def lat(self, device: str) -> np.ndarray:
        """Latency column (ms) of ``device``; unknown names list the valid ones."""
        try:
            return self.latency[device]
        except KeyError:
            raise unknown_name("device", device, self.latency) from None

    @functools.cached_property
    def disconnected(self) -> np.ndarray:
        """(N,) whether each cell's output is cut off from its input (:func:`search.nb201.space.is_disconnected`)."""
        return np.array([is_disconnected(tuple(row)) for row in self.ops.tolist()], dtype=bool)

    def rows(self, cells: Sequence[Cell] | np.ndarray) -> np.ndarray:
        """NAS-Bench-201 indices of many cells at once."""
        ops = np.asarray(cells, dtype=np.int64).reshape(-1, self.ops.shape[1])
        return self.key_to_index[ops @ (N_OPS ** np.arange(ops.shape[1] - 1, -1, -1))]

    def index_of(self, cell: Cell) -> int:
        """NAS-Bench-201 index of ``cell``."""
        return int(self.key_to_index[cell_key(cell)])

    def arch(self, index: int) -> str:
        """Arch string of the cell at NAS-Bench-201 ``index``."""
        return format_arch(tuple(int(c) for c in self.ops[index]))

    def cell(self, index: int) -> Cell:
        """Cell (op codes) at NAS-Bench-201 ``index``."""
        return tuple(int(c) for c in self.ops[index])


@functools.cache
def load_table() -> NB201Table:
    """Load the shipped table (cached for the life of the process)."""
    ref = resources.files("coevo.search.nb201").joinpath("data/nb201.npz")
    with ref.open("rb") as fh, np.load(fh) as data:
        arrays = {k: data[k] for k in data.files}
    ops = arrays.pop("ops")
    accuracy = {k[4:]: v for k, v in arrays.items() if k.startswith("acc_")}
    latency = {k[4:]: v for k, v in arrays.items() if k.startswith("lat_")}
    keys = np.zeros(len(ops), dtype=np.int64)
    for column in ops.T:
        keys = keys * N_OPS + column
    key_to_index = np.empty(len(keys), dtype=np.int64)
    key_to_index[keys] = np.arange(len(keys))
    return NB201Table(ops=ops, accuracy=accuracy, latency=latency, key_to_index=key_to_index)
