"""The ``digits-grid`` dataset: scikit-learn's 8x8 digits, each image a pixel grid graph.

Every image is the same graph (a fixed-graph dataset, like the skeleton-joint graphs of the
HE-GCN literature): one node per pixel, edges to the 4 or 8 grid neighbours, normalised with
self loops, ``A_hat = D^-1/2 (A + I) D^-1/2`` (Kipf & Welling). Node features: the pixel
intensity (0..1, the private input a client encrypts) and the pixel's two coordinates in
[-1, 1] (public: the same for every image, so they stay plaintext under encryption).

``digits-grid4`` is the same data average-pooled 2x2 to a 4x4 grid (16 nodes): a quarter of
the ciphertexts, for quick runs and examples. ``digits-grid16`` is the same data with every
pixel split into 2x2 nodes of its intensity (16x16 grid, 256 nodes): a graph four times larger
for the cost side of the comparison. It carries no information the 8x8 grid lacks; what
grows is the graph (nodes, ciphertexts, receptive fields), not the task's difficulty.

Splits are fixed by a seed: 1,257 train, 270 val, 270 test; choices are made on val, test is
reported once.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from coevo.sim.errors import UserInputError

DATASETS = ("digits-grid", "digits-grid4", "digits-grid16")
"""Datasets this package knows."""
N_TRAIN, N_VAL = 1257, 270


@dataclass(frozen=True)
class GraphData:
    """A fixed-graph classification dataset.

    Attributes:
        adj: ``(n, n)`` normalised adjacency with self loops (float64, symmetric).
        coords: ``(n, 2)`` public node features (pixel coordinates in [-1, 1]).
        x: split name -> ``(samples, n)`` private node features (pixel intensity in [0, 1]).
        y: split name -> ``(samples,)`` labels.
        classes: number of classes.
    """

    adj: np.ndarray
    coords: np.ndarray
    x: dict[str, np.ndarray]
    y: dict[str, np.ndarray]
    classes: int

    @property
    def nodes(self) -> int:
        """Number of nodes of the graph."""
        return int(self.adj.shape[0])


def grid_adjacency(rows: int, cols: int, neighbours: int = 4) -> np.ndarray:
    """Normalised adjacency ``D^-1/2 (A + I) D^-1/2`` of a ``rows x cols`` pixel grid.

    Args:
        rows: grid height (>= 1).
        cols: grid width (>= 1).
        neighbours: 4 (up/down/left/right) or 8 (also the diagonals).

    Raises:
        UserInputError: a grid side below 1 or neighbours not 4 or 8.
    """
    if rows < 1 or cols < 1:
        raise UserInputError(f"a grid needs at least one row and one column, got {rows}x{cols}")
    if neighbours not in (4, 8):
        raise UserInputError(f"neighbours must be 4 or 8, got {neighbours}")
    n = rows * cols
    a = np.eye(n)
    steps = [(0, 1), (1, 0)] + ([(1, 1), (1, -1)] if neighbours == 8 else [])
    for r in range(rows):
        for c in range(cols):
            for dr, dc in steps:
                rr, cc = r + dr, c + dc
                if 0 <= rr < rows and 0 <= cc < cols:
                    a[r * cols + c, rr * cols + cc] = a[rr * cols + cc, r * cols + c] = 1.0
    d = 1.0 / np.sqrt(a.sum(axis=1))
    return a * d[:, None] * d[None, :]


def grid_coords(rows: int, cols: int) -> np.ndarray:
    """``(rows*cols, 2)`` pixel coordinates (row, column) scaled to [-1, 1], row-major like the adjacency."""
    r, c = np.meshgrid(np.arange(rows), np.arange(cols), indexing="ij")
    scale = lambda v, m: (2.0 * v / (m - 1) - 1.0) if m > 1 else np.zeros_like(v, dtype=float)  # noqa: E731
    return np.stack([scale(r.ravel(), rows), scale(c.ravel(), cols)], axis=1).astype(np.float64)


def load_dataset(name: str = "digits-grid", neighbours: int = 4, seed: int = 0) -> GraphData:
    """The dataset ``name`` with its fixed splits (``seed`` fixes the permutation).

    Raises:
        UserInputError: unknown dataset name (the message lists the known ones).
    """
    if name not in DATASETS:
        raise UserInputError(f"unknown dataset {name!r}; this package has {', '.join(DATASETS)}")
    from sklearn.datasets import load_digits  # scikit-learn ships the data file; nothing is downloaded

    data = load_digits()
    side = {"digits-grid": 8, "digits-grid4": 4, "digits-grid16": 16}[name]
    images = np.asarray(data.images, dtype=np.float64) / 16.0
    if side == 4:
        images = images.reshape(-1, 4, 2, 4, 2).mean(axis=(2, 4))
    elif side == 16:
        images = images.repeat(2, axis=1).repeat(2, axis=2)
    images = images.reshape(len(data.target), side * side)
    labels = np.asarray(data.target, dtype=np.int64)
    order = np.random.default_rng(seed).permutation(len(labels))
    cut = {"train": order[:N_TRAIN], "val": order[N_TRAIN : N_TRAIN + N_VAL], "test": order[N_TRAIN + N_VAL :]}
    return GraphData(
        adj=grid_adjacency(side, side, neighbours),
        coords=grid_coords(side, side),
        x={k: images[v] for k, v in cut.items()},
        y={k: labels[v] for k, v in cut.items()},
        classes=10,
    )
