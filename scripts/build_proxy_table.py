"""Score NB201 cells with every zero-cost proxy and export the table coevo ships (``search/nb201/data/proxies-<source>.npz``).

    python scripts/build_proxy_table.py --source natural --cells 15625 --storage sqlite:////work/proxy_table/natural.sqlite3
    python scripts/build_proxy_table.py --source natural --export search/nb201/data/proxies-natural.npz --storage ...

Cells are scored in a fixed random order (a permutation of the 15,625 NAS-Bench-201 indices,
seed 2026), so the first N scored are a uniform random sample: the proxy-quality figures of
docs/zero-cost.md use the first 1,000. ``--reverse`` scores the same cells from the last one
back, so a second process on the same storage meets the first in the middle. Scores go to a proxy cache in ``--storage`` as they are
computed, so the job resumes where it stopped. ``--export`` writes every scored cell of the
table's order to an npz (``index``: NB201 index, one float column per proxy, ``config``: the
cache key, ``provenance``: how it was made), which :class:`search.zero_cost.ProxyCache`
reads before computing anything.
"""

from __future__ import annotations

import argparse
import json
import platform
import sys
import time
from pathlib import Path

import numpy as np
import sqlalchemy as sa
import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from search.nb201 import load_table
from search.nb201.space import format_arch
from search.zero_cost import _TABLE, PROXIES, ProxyCache, ProxyConfig

ORDER_SEED = 2026


def order(n: int) -> np.ndarray:
    """The scoring order: a fixed permutation of the NB201 indices."""
    return np.random.default_rng(ORDER_SEED).permutation(n)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--source", choices=("natural", "gaussian"), default="natural")
    p.add_argument("--cells", type=int, default=None, help="score the first N cells of the order (default: none, export only)")
    p.add_argument("--storage", required=True, help="the proxy cache (SQLite URL); resumable")
    p.add_argument("--reverse", action="store_true", help="score them from the last one back (a second worker)")
    p.add_argument("--threads", type=int, default=1, help="torch threads (default: 1)")
    p.add_argument("--export", type=Path, default=None, help="write the scored cells to this npz")
    args = p.parse_args()
    torch.set_num_threads(args.threads)
    table = load_table()
    cfg = ProxyConfig(batch_source=args.source)
    cache = ProxyCache(args.storage, cfg)
    ids = order(len(table.ops))
    if args.cells:
        started, batch = time.perf_counter(), 50
        for start in range(0, args.cells, batch):
            part = ids[start : min(start + batch, args.cells)] if not args.reverse else ids[: args.cells][::-1][start : start + batch]
            chunk = [table.cell(int(i)) for i in part]
            cache.scores(chunk)
            done = min(start + batch, args.cells)
            rate = cache.computed / max(time.perf_counter() - started, 1e-9)
            print(f"{done}/{args.cells} cells; {cache.computed} computed this run, {rate:.2f} cells/s", flush=True)
    if args.export:
        key = cfg.key()
        with cache.engine.connect() as con:
            rows = {r.arch: (json.loads(r.scores), r.seconds) for r in con.execute(sa.select(_TABLE).where(_TABLE.c.config == key))}
        index, columns, seconds = [], {name: [] for name in PROXIES}, []
        for i in ids:
            arch = format_arch(table.cell(int(i)))
            if arch not in rows:
                continue
            scores, sec = rows[arch]
            index.append(int(i))
            seconds.append(sec)
            for name in PROXIES:
                columns[name].append(scores[name])
        provenance = (
            f"computed by coevo's scripts/build_proxy_table.py (search/zero_cost.py, config {json.dumps(vars(cfg))}, key {key}); "
            f"{len(index)} cells in a fixed random order (seed {ORDER_SEED}); CPU: {platform.processor() or platform.machine()}, "
            f"torch {torch.__version__}; median {float(np.median(seconds)):.2f} s per cell"
        )
        np.savez_compressed(
            args.export,
            index=np.array(index, dtype=np.int32),
            config=np.array(key),
            provenance=np.array(provenance),
            **{name: np.array(columns[name], dtype=np.float64) for name in PROXIES},
        )
        print(f"wrote {args.export}: {len(index)} cells ({provenance})")


if __name__ == "__main__":
    main()
