"""Score NB201 cells with every zero-cost proxy and export the table coevo ships (``search/nb201/data/proxies-<source>.npz``).

    python -m coevo.figures proxy-table --source natural --cells 15625 --storage sqlite:////work/proxy_table/natural.sqlite3
    python -m coevo.figures proxy-table --source natural --export search/nb201/data/proxies-natural.npz --storage ...

Cells are scored in a fixed random order (a permutation of the 15,625 NAS-Bench-201 indices,
seed 2026), so the first N scored are a uniform random sample: the proxy-quality figures of
docs/bench/nb201/issue15-proxies.md use the first 1,000 of the shipped table. ``--reverse`` scores
the same cells from the last one back, so a second process on the same storage meets the first in the middle; ``--shard I/N``
scores every N-th cell from the I-th (one storage per shard; ``--export`` merges several
``--storage`` URLs). ``--device cuda`` scores on a GPU: the networks and batches are made on the
CPU from the same seeds and moved, with TF32 off, so only rounding differs from a CPU run.
Scores go to a proxy cache in ``--storage`` as they are
computed, so the job resumes where it stopped. ``--export`` writes every scored cell of the
table's order to an npz (``index``: NB201 index, one float column per proxy, ``seconds``: CPU
seconds of each cell, ``config``: the cache key, ``provenance``: how it was made), which :class:`search.zero_cost.ProxyCache`
reads before computing anything.

Completing a shipped table on a small machine (how the 15,625-cell table was finished):

    python -m coevo.figures proxy-table --cells 15625 --missing --shard 0/2 --storage sqlite:////work/pt/a.sqlite3 &
    python -m coevo.figures proxy-table --cells 15625 --missing --shard 1/2 --storage sqlite:////work/pt/b.sqlite3
    python -m coevo.figures proxy-table --base search/nb201/data/proxies-natural.npz \
        --export search/nb201/data/proxies-natural.npz --storage sqlite:////work/pt/a.sqlite3 sqlite:////work/pt/b.sqlite3

``--missing`` skips the cells the shipped table has; ``--base`` exports that table's rows first, in
their order and with their own provenance kept in the new one, so its first cells (the reference
sample of the robust z-scale, :data:`search.nb201.proxy_table.REFERENCE_CELLS`) stay the same.
"""

from __future__ import annotations

import argparse
import json
import platform
import time
from pathlib import Path

import numpy as np
import sqlalchemy as sa
import torch

from coevo.figures._common import plain_parser
from coevo.search.nb201 import load_table
from coevo.search.nb201.proxy_table import shipped_arrays
from coevo.search.nb201.space import format_arch
from coevo.search.nb201.table import NB201Table
from coevo.search.zero_cost import _TABLE, PROXIES, ProxyCache, ProxyConfig, set_device

ORDER_SEED = 2026


def order(n: int) -> np.ndarray:
    """The scoring order: a fixed permutation of the NB201 indices."""
    return np.random.default_rng(ORDER_SEED).permutation(n)


def main(argv: list[str] | None = None) -> None:
    p = plain_parser("proxy-table", __doc__)
    p.add_argument("--source", choices=("natural", "gaussian"), default="natural")
    p.add_argument("--cells", type=int, default=None, help="score the first N cells of the order (default: none, export only)")
    p.add_argument("--storage", required=True, nargs="+", help="the proxy cache (SQLite URL; resumable); several are merged by --export")
    p.add_argument("--like", type=Path, default=None, help="score the cells of this exported table, in its order")
    p.add_argument("--reverse", action="store_true", help="score them from the last one back (a second worker)")
    p.add_argument("--shard", default="0/1", help="I/N: score only every N-th cell of the order, from the I-th (default: 0/1, all)")
    p.add_argument("--device", default="cpu", help="torch device to score on (default: cpu)")
    p.add_argument("--missing", action="store_true", help="skip the cells the shipped table already has")
    p.add_argument("--base", type=Path, default=None, help="with --export: this table's rows first, in its order, then the new ones")
    p.add_argument("--export", type=Path, default=None, help="write the scored cells to this npz")
    p.add_argument("--provenance", default="", help="where the scores were computed (machine, device), for the npz's provenance")
    args = p.parse_args(argv)
    set_device(args.device)
    table = load_table()
    cfg = ProxyConfig(batch_source=args.source)
    caches = [ProxyCache(url, cfg, use_shipped=False) for url in args.storage]
    ids = order(len(table.ops)) if args.like is None else np.load(args.like)["index"]
    if args.cells:
        _score(args, table, cfg, caches[0], ids[: args.cells])
    if args.export:
        _export(args, table, cfg, caches, ids)


def _score(args: argparse.Namespace, table: NB201Table, cfg: ProxyConfig, cache: ProxyCache, ids: np.ndarray) -> None:
    shard, shards = (int(v) for v in args.shard.split("/"))
    todo = ids[shard::shards]
    if args.missing:
        shipped = shipped_arrays(cfg.key())
        todo = todo[~np.isin(todo, shipped[0])] if shipped is not None else todo
    todo = todo[::-1] if args.reverse else todo
    started, batch = time.perf_counter(), 50
    for start in range(0, len(todo), batch):
        cache.scores([table.cell(int(i)) for i in todo[start : start + batch]])
        done = min(start + batch, len(todo))
        rate = cache.computed / max(time.perf_counter() - started, 1e-9)
        print(f"{done}/{len(todo)} cells; {cache.computed} computed this run, {rate:.2f} cells/s", flush=True)


def _export(args: argparse.Namespace, table: NB201Table, cfg: ProxyConfig, caches: list[ProxyCache], ids: np.ndarray) -> None:
    key = cfg.key()
    rows: dict[int, tuple[list[float], float]] = {}
    by_arch = {format_arch(table.cell(int(i))): int(i) for i in ids}
    for cache in caches:
        with cache.engine.connect() as con:
            for r in con.execute(sa.select(_TABLE).where(_TABLE.c.config == key)):
                scores = json.loads(r.scores)
                rows[by_arch[r.arch]] = ([scores[name] for name in PROXIES], r.seconds)
    base_note, first = "", np.zeros(0, dtype=np.int64)
    if args.base is not None:
        with np.load(args.base) as base:
            if str(base["config"]) != key:
                raise SystemExit(f"--base {args.base} was made with config {base['config']}, not {key}")
            first = np.asarray(base["index"], dtype=np.int64)
            # the base table's scores stand as they were computed (its rows keep their place and provenance)
            for k, i in enumerate(first):
                rows[int(i)] = ([float(base[name][k]) for name in PROXIES], float(base["seconds"][k]))
            base_note = f"rows 1-{len(first)}: {base['provenance']} || rows after: "
    rest = [int(i) for i in ids if int(i) in rows and int(i) not in set(first.tolist())]
    index = [*map(int, first), *rest]
    seconds = np.array([rows[i][1] for i in rest] or [0.0])
    scores = np.array([rows[i][0] for i in index], dtype=np.float64).reshape(len(index), len(PROXIES))
    provenance = base_note + (
        f"computed by coevo's python -m coevo.figures proxy-table (search/zero_cost.py, config {json.dumps(vars(cfg))}, key {key}); "
        f"{len(rest)} cells in a fixed random order (seed {ORDER_SEED}); {args.provenance or platform.machine()}, "
        f"torch {torch.__version__}; median {float(np.median(seconds)):.3f} s per cell there"
    )
    np.savez_compressed(
        args.export,
        index=np.array(index, dtype=np.int32),
        config=np.array(key),
        seconds=np.array([rows[i][1] for i in index], dtype=np.float32),
        base_rows=np.array(len(first), dtype=np.int32),
        provenance=np.array(provenance),
        **{name: scores[:, k] for k, name in enumerate(PROXIES)},  # type: ignore[arg-type]
    )
    print(f"wrote {args.export}: {len(index)} cells ({provenance})")
