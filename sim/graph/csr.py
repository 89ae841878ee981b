"""Compressed sparse row (CSR) matrices: validation with actionable messages, and the ``.npz`` file format.

A :class:`Csr` holds ``indptr`` (int64, ``n_rows + 1`` entries, monotone, from 0 to nnz),
``indices`` (int32 column ids, sorted and unique within each row, in ``[0, n_cols)``) and
``data`` (float32 or float64). Every kernel of :mod:`sim.graph.spmm` assumes these
invariants; :func:`validate_csr` checks them once, on the way in, so a kernel never reads
out of bounds.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from coevo.sim.errors import UserInputError

if TYPE_CHECKING:  # scipy.sparse loads where a scipy matrix is made or read, not with the Csr type
    import scipy.sparse as sp

INDEX_LIMIT = 2**31 - 1
"""Largest column count and nnz the int32 column ids of :class:`Csr` hold."""


@dataclass(frozen=True)
class Csr:
    """A validated CSR matrix (build it with :func:`validate_csr`, :func:`from_scipy` or :func:`load_npz`).

    Attributes:
        indptr: (n_rows + 1,) int64 row starts.
        indices: (nnz,) int32 column ids, sorted within each row.
        data: (nnz,) float32 or float64 values.
        shape: (n_rows, n_cols).
    """

    indptr: np.ndarray
    indices: np.ndarray
    data: np.ndarray
    shape: tuple[int, int]

    @property
    def nnz(self) -> int:
        """Stored entries."""
        return int(self.indptr[-1])

    @property
    def degrees(self) -> np.ndarray:
        """(n_rows,) int64 entries per row."""
        return np.diff(self.indptr)

    def astype(self, dtype: Any) -> Csr:
        """The same matrix with values of ``dtype`` (float32 or float64)."""
        return Csr(self.indptr, self.indices, self.data.astype(dtype, copy=False), self.shape)

    def to_scipy(self) -> sp.csr_matrix:
        """A :class:`scipy.sparse.csr_matrix` sharing the arrays where scipy allows it."""
        import scipy.sparse as sp

        return sp.csr_matrix((self.data, self.indices, self.indptr), shape=self.shape)

    def transpose(self) -> Csr:
        """A^T, as a validated CSR (a counting sort by column; O(nnz))."""
        return from_scipy(self.to_scipy().T.tocsr())


def validate_csr(indptr: Any, indices: Any, data: Any, shape: tuple[int, int] | None = None, *, what: str = "matrix") -> Csr:
    """Check CSR arrays and return them as a :class:`Csr` (int64 indptr, int32 indices, float values).

    Args:
        indptr: row starts, ``n_rows + 1`` non-negative integers, non-decreasing, first 0.
        indices: column ids; within a row sorted ascending and unique, each in ``[0, n_cols)``.
        data: one value per column id (float32 is kept, any other numeric type becomes float64).
        shape: (n_rows, n_cols); default: rows from ``indptr``, columns = max column id + 1.
        what: how messages name the matrix (e.g. a file name).

    Raises:
        UserInputError: what is wrong (the first offending row or entry) and how to fix it.
    """
    indptr = np.asarray(indptr)
    indices = np.asarray(indices)
    data = np.asarray(data)
    _check_arrays(indptr, indices, data, what)
    nnz = _check_indptr(indptr, what)
    if len(indices) != nnz or len(data) != nnz:
        raise UserInputError(
            f"{what}: inconsistent nnz: indptr[-1] = {nnz} but indices has {len(indices)} and data {len(data)} entries; "
            "all three must agree"
        )
    n_rows = len(indptr) - 1
    n_cols = _check_columns(indices, nnz, n_rows, shape, what)
    if n_cols > INDEX_LIMIT or nnz > INDEX_LIMIT:
        raise UserInputError(f"{what}: {n_cols} columns / {nnz} entries exceed the int32 limit {INDEX_LIMIT} of these kernels")
    _check_rows_sorted(indptr, indices, nnz, what)
    values = data if data.dtype in (np.float32, np.float64) else data.astype(np.float64)
    if values.size and not np.isfinite(values).all():
        k = int(np.argmax(~np.isfinite(values)))
        raise UserInputError(f"{what}: data[{k}] is {values[k]}; values must be finite")
    return Csr(
        np.ascontiguousarray(indptr, dtype=np.int64),
        np.ascontiguousarray(indices, dtype=np.int32),
        np.ascontiguousarray(values),
        (n_rows, n_cols),
    )


def _check_arrays(indptr: np.ndarray, indices: np.ndarray, data: np.ndarray, what: str) -> None:
    """The three arrays are 1-D, the ids integers and the values numbers."""
    if indptr.ndim != 1 or indices.ndim != 1 or data.ndim != 1:
        raise UserInputError(
            f"{what}: indptr, indices and data must be 1-D arrays, got shapes {indptr.shape}, {indices.shape}, {data.shape}"
        )
    for name, arr in (("indptr", indptr), ("indices", indices)):
        if arr.size and not np.issubdtype(arr.dtype, np.integer):
            raise UserInputError(f"{what}: {name} must hold integers, got dtype {arr.dtype}; store them as int32 or int64")
    if data.size and not (np.issubdtype(data.dtype, np.floating) or np.issubdtype(data.dtype, np.integer)):
        raise UserInputError(f"{what}: data must be numeric, got dtype {data.dtype}")


def _check_indptr(indptr: np.ndarray, what: str) -> int:
    """``indptr`` starts at 0 and never decreases; the number of stored entries it gives."""
    if len(indptr) == 0:
        raise UserInputError(f"{what}: indptr is empty; a CSR matrix with n rows has n + 1 row starts (at least [0])")
    if indptr[0] != 0:
        raise UserInputError(f"{what}: indptr[0] is {int(indptr[0])}, must be 0 (row 0 starts at entry 0)")
    nnz = int(indptr[-1])
    if nnz < 0:
        raise UserInputError(f"{what}: nnz (indptr[-1]) is negative ({nnz}); indptr[-1] must be the number of stored entries")
    steps = np.diff(indptr.astype(np.int64))
    if steps.size and steps.min() < 0:
        row = int(np.argmax(steps < 0))
        raise UserInputError(
            f"{what}: indptr is not monotone: row {row} starts at {int(indptr[row])} and ends at {int(indptr[row + 1])} "
            "(a negative row length); indptr must be non-decreasing (the running sum of the row lengths)"
        )
    return nnz


def _check_columns(indices: np.ndarray, nnz: int, n_rows: int, shape: tuple[int, int] | None, what: str) -> int:
    """Column ids are >= 0 and fit ``shape`` (which must match the rows); the number of columns."""
    if nnz and indices.min() < 0:
        k = int(np.argmin(indices))
        raise UserInputError(f"{what}: column id {int(indices[k])} at entry {k} is negative; column ids are 0-based and >= 0")
    n_cols = int(indices.max()) + 1 if nnz else 0
    if shape is None:
        return n_cols
    rows, cols = (int(s) for s in shape)
    if rows != n_rows:
        raise UserInputError(f"{what}: shape says {rows} rows but indptr has {n_rows} + 1 entries; fix the shape or indptr")
    if nnz and n_cols > cols:
        k = int(np.argmax(indices >= cols))
        raise UserInputError(
            f"{what}: column id {int(indices[k])} at entry {k} is out of range for {cols} columns; ids must be < n_cols "
            "(fix the ids or give the true shape)"
        )
    return cols


def _check_rows_sorted(indptr: np.ndarray, indices: np.ndarray, nnz: int, what: str) -> None:
    """Within each row the column ids strictly increase (sorted, no repeats)."""
    if nnz <= 1:
        return
    # a non-increase is allowed only across a row start
    bad = np.diff(indices.astype(np.int64)) <= 0
    starts = indptr[1:-1]
    starts = starts[(starts > 0) & (starts < nnz)]
    bad[starts - 1] = False
    if bad.any():
        k = int(np.argmax(bad)) + 1
        row = int(np.searchsorted(indptr, k, side="right")) - 1
        kind = "repeated" if indices[k] == indices[k - 1] else "unsorted"
        raise UserInputError(
            f"{what}: row {row} has {kind} column ids ({int(indices[k - 1])} then {int(indices[k])} at entries {k - 1}, {k}); "
            "sort each row's column ids (scipy: A.sort_indices(); A.sum_duplicates() also merges repeats)"
        )


def from_scipy(matrix: Any, *, what: str = "matrix") -> Csr:
    """A validated :class:`Csr` from any scipy sparse matrix (converted to CSR; indices are not re-sorted, they are checked)."""
    import scipy.sparse as sp

    m = sp.csr_matrix(matrix)
    return validate_csr(m.indptr, m.indices, m.data, m.shape, what=what)


def from_edges(src: np.ndarray, dst: np.ndarray, n: int, *, dtype: Any = np.float32) -> Csr:
    """The n x n adjacency matrix (value 1) of the edges ``src -> dst``, which must be unique (rows sorted here)."""
    keys = np.sort(src.astype(np.int64) * n + dst)  # one int64 sort: row-major order
    src, dst = keys // n, keys % n
    indptr = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(np.bincount(src, minlength=n), out=indptr[1:])
    return validate_csr(indptr, dst.astype(np.int32), np.ones(len(dst), dtype=dtype), (n, n))


def save_npz(path: str | Path, a: Csr) -> None:
    """Write ``a`` as an ``.npz`` with arrays ``indptr``, ``indices``, ``data``, ``shape`` (what :func:`load_npz` reads)."""
    with open(path, "wb") as f:
        np.savez(f, indptr=a.indptr, indices=a.indices, data=a.data, shape=np.asarray(a.shape, dtype=np.int64))


def load_npz(path: str | Path) -> Csr:
    """Read and validate a CSR ``.npz``: ours (``indptr``, ``indices``, ``data``, optional ``shape``) or scipy's ``save_npz`` format.

    Raises:
        UserInputError: a missing or unreadable file, missing arrays, or a matrix that is not CSR-valid.
    """
    p = Path(path)
    if not p.is_file():
        raise UserInputError(f"graph file {str(p)!r} does not exist; give a named graph or the path of a CSR .npz file")
    try:
        with np.load(p, allow_pickle=False) as z:
            arrays = {k: z[k] for k in z.files}
    except Exception as exc:  # a truncated or foreign file: say so, not a traceback
        raise UserInputError(f"{p.name}: not a readable .npz file ({exc})") from None
    fmt = arrays.get("format")
    if fmt is not None and str(fmt.item() if fmt.ndim == 0 else fmt) not in ("csr", "b'csr'"):
        raise UserInputError(f"{p.name}: holds a scipy {fmt!s} matrix; convert it with A.tocsr() before scipy.sparse.save_npz")
    missing = [k for k in ("indptr", "indices", "data") if k not in arrays]
    if missing:
        raise UserInputError(
            f"{p.name}: missing array(s) {', '.join(missing)}; a CSR .npz holds indptr, indices, data (and shape), "
            "as numpy.savez(path, indptr=..., indices=..., data=..., shape=...) or scipy.sparse.save_npz writes"
        )
    shape = arrays.get("shape")
    given = (int(shape[0]), int(shape[1])) if shape is not None and len(shape) == 2 else None
    return validate_csr(arrays["indptr"], arrays["indices"], arrays["data"], given, what=p.name)
