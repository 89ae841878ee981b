"""``coevo proxies``: how well each zero-cost proxy ranks NB201 cells, and what it costs.

Samples N random cells (fixed seed), computes every proxy (cached in storage, so reruns and
zero-cost searches reuse them; never read from the shipped table: this command measures),
and reports Spearman's rho of each proxy and of the label-free prior against the benchmark's
test accuracy, with the median CPU time per cell.
"""

from __future__ import annotations

import csv
import random
import statistics
from concurrent.futures import ProcessPoolExecutor, as_completed
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import sqlalchemy as sa
import torch

from coevo.search.errors import UserInputError
from coevo.search.nb201.proxies import PRIOR_PROXIES
from coevo.search.nb201.space import Cell, format_arch
from coevo.search.nb201.table import DATASETS, load_table
from coevo.search.predictor import zero_shot
from coevo.search.storage import open_storage, resolve_storage_url
from coevo.search.work_progress import report
from coevo.search.zero_cost import _TABLE, PROXIES, ProxyCache, ProxyConfig
from coevo.sim.paths import new_out_folder


@dataclass
class ProxyReport:
    """Spearman rho per proxy (and ``prior``), cost, and the files written."""

    cells: int
    dataset: str
    rho: dict[str, float]
    median_seconds_per_cell: float | None
    computed: int
    markdown: str


def _score_chunk(storage: str, cells: list[Cell], config: ProxyConfig, what: str | None = None) -> tuple[int, float]:
    torch.set_num_threads(1)
    cache = ProxyCache(storage, config, use_shipped=False)
    cache.scores(cells, what=what)
    return cache.computed, cache.compute_seconds


def _score_in_processes(storage: str, sample: list[Cell], config: ProxyConfig, jobs: int, what: str) -> list[tuple[int, float]]:
    """Score ``sample`` in ``jobs`` processes, in small chunks so that progress (done of total, and an estimate) is reported
    as chunks finish: a worker process cannot report to this one's listener."""
    size = max(1, min(10, len(sample) // (4 * jobs)))
    chunks = [sample[k : k + size] for k in range(0, len(sample), size)]
    results: list[tuple[int, float]] = []
    done = 0
    report(f"{what}: {len(sample)} cells, {jobs} processes", 0.0)
    with ProcessPoolExecutor(max_workers=jobs) as pool:
        futures = {pool.submit(_score_chunk, storage, chunk, config): len(chunk) for chunk in chunks}
        for future in as_completed(futures):
            results.append(future.result())
            done += futures[future]
            report(f"{what}: {done} of {len(sample)} cells scored", done / len(sample))
    return results


def run_proxies(
    *, cells: int, dataset: str, storage: str | None, out: Path, jobs: int = 1, seed: int = 0, config: ProxyConfig | None = None
) -> ProxyReport:
    """Score ``cells`` random cells and write ``proxies.md`` and ``proxies.csv`` into ``out``."""
    if cells < 3:
        raise UserInputError(f"--cells must be at least 3, got {cells}")
    if jobs < 1:
        raise UserInputError(f"--jobs must be at least 1, got {jobs}")
    if dataset not in DATASETS:
        raise UserInputError(f"unknown dataset {dataset!r}; valid datasets: {', '.join(DATASETS)}")
    config = config or ProxyConfig()
    with new_out_folder(out, "proxy outputs"):  # before the scoring, which takes minutes; a bad storage leaves no folder
        open_storage(storage)  # fail early, with the storage's own error, on a bad URL
    storage = resolve_storage_url(storage)
    rng = random.Random(seed)
    table = load_table()
    indices = rng.sample(range(len(table.ops)), cells)
    sample = [table.cell(i) for i in indices]
    ProxyCache(storage, config, use_shipped=False)  # create the table once, before workers race to do it
    what = f"scoring {cells} random cells with zero-cost proxies"
    results = [_score_chunk(storage, sample, config, what=what)] if jobs == 1 else _score_in_processes(storage, sample, config, jobs, what)
    computed = sum(r[0] for r in results)
    scores = ProxyCache(storage, config, use_shipped=False).scores(sample)
    acc = table.acc(dataset)[indices]
    from scipy import stats  # lazy: scipy.stats costs ~1.5 s of every coevo start-up

    rho = {p: float(stats.spearmanr([s[p] for s in scores], acc).statistic) for p in PROXIES}
    prior = np.array([[s[p] for p in PRIOR_PROXIES] for s in scores])
    rho["prior"] = float(stats.spearmanr(zero_shot(prior, prior), acc).statistic)
    cache = ProxyCache(storage, config, use_shipped=False)
    archs = [format_arch(c) for c in sample]
    with cache.engine.connect() as con:
        seconds = [
            row[0] for row in con.execute(sa.select(_TABLE.c.seconds).where(_TABLE.c.config == config.key(), _TABLE.c.arch.in_(archs)))
        ]
    median = statistics.median(seconds) if seconds else None
    with (out / "proxies.csv").open("w", newline="") as fh:
        writer = csv.writer(fh)
        writer.writerow(["index", "arch", f"{dataset}_acc", *PROXIES])
        for i, arch, a, s in zip(indices, archs, acc, scores, strict=True):
            writer.writerow([i, arch, a, *[s[p] for p in PROXIES]])
    lines = [
        f"# Zero-cost proxies on {cells} random NB201 cells ({dataset})",
        "",
        f"Fixed {config.batch_source} batch of {config.batch} 32x32 images, seed {config.seed}, C={config.channels}, "
        f"N={config.cells_per_stage}; prior = mean robust z-score of {', '.join(PRIOR_PROXIES)} (the sample as the reference). "
        "CPU time per cell is the time of all proxies together when first computed "
        f"({computed} computed in this run, the rest from the cache).",
        "",
        "| proxy | Spearman rho |",
        "|---|---|",
        *[f"| {p} | {rho[p]:.3f} |" for p in (*PROXIES, "prior")],
        "",
        f"median CPU seconds per cell (all proxies): {median:.2f}" if median is not None else "median CPU seconds per cell: n/a",
        "",
    ]
    markdown = "\n".join(lines)
    (out / "proxies.md").write_text(markdown)
    return ProxyReport(cells, dataset, rho, median, computed, markdown)


__all__ = ["ProxyReport", "run_proxies"]
