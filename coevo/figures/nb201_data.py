"""Convert the shared NB201 x hardware CSV into the compact package-data file.

Usage: python -m coevo.figures nb201-data PATH/TO/nb201_accuracy_latency.csv

Writes ``search/nb201/data/nb201.npz`` (op codes per edge, accuracies, latencies) and
copies the table's provenance next to it. The CSV is the source of truth; the npz is a
lossless re-encoding (float64 values, op codes instead of strings) that loads in ~20 ms.
"""

from __future__ import annotations

import csv
import shutil
from pathlib import Path

import numpy as np

from coevo.figures._common import CHECKOUT, plain_parser
from coevo.search.nb201.space import parse_arch

OUT = CHECKOUT / "search" / "nb201" / "data"


def main(argv: list[str] | None = None) -> None:
    """Re-encode the CSV named in ``argv`` (its columns and sources: search/nb201/data/PROVENANCE.md) as ``nb201.npz``."""
    p = plain_parser("nb201-data", __doc__)
    p.add_argument("csv", help="the NB201 x hardware CSV (nb201_accuracy_latency.csv; see search/nb201/data/PROVENANCE.md)")
    src = Path(p.parse_args(argv).csv)
    with src.open(newline="") as fh:
        reader = csv.DictReader(fh)
        rows = list(reader)
        header = reader.fieldnames or []
    index = np.array([int(r["index"]) for r in rows], dtype=np.int32)
    if not np.array_equal(index, np.arange(len(rows))):
        raise SystemExit("expected rows ordered by NAS-Bench-201 index 0..N-1")
    ops = np.array([parse_arch(r["arch"]) for r in rows], dtype=np.uint8)
    arrays: dict[str, np.ndarray] = {"ops": ops}
    for col in header:
        if col.endswith("_test_acc"):
            arrays["acc_" + col.removesuffix("_test_acc")] = np.array([float(r[col]) for r in rows])
        elif col.startswith("lat_") and col.endswith("_ms"):
            arrays["lat_" + col[4:-3]] = np.array([float(r[col]) for r in rows])
    OUT.mkdir(parents=True, exist_ok=True)
    np.savez_compressed(OUT / "nb201.npz", **arrays)  # type: ignore[arg-type]
    shutil.copy(src.with_name("README.md"), OUT / "PROVENANCE.md")
    print(f"wrote {OUT / 'nb201.npz'}: {len(rows)} cells, {len(arrays) - 1} value columns")
