"""Zero-cost proxy and predictor figures of issue 15, written from the shipped proxy table.

    python scripts/zero_cost_figures.py --gaussian sqlite:////work/proxy_table/gaussian.sqlite3   # first time: saves the sample
    python scripts/zero_cost_figures.py                                                              # afterwards: from the saved CSV

Reads ``search/nb201/data/proxies-natural.npz`` (every cell, natural-image batch) and the
Gaussian-batch scores of the first 1,000 cells of the same fixed order (from a proxy cache
the first time, saved as ``docs/bench/issue15-proxies-sample.csv``; the file is then the
source). Writes into ``--out`` (default ``docs/bench``):

* ``issue15-proxies.md/.csv``: Spearman rho of every proxy on those 1,000 cells, Gaussian
  batch (before) and natural batch (after), for each dataset;
* ``issue15-zero-shot.md/.csv``: label-free recipes (proxy set, scale, latency bands): rho on
  the 1,000 cells and the HV ratio of the estimated front over the whole space per device. The
  recipe is chosen on CIFAR-100 and ImageNet16-120 (validation) and reported on CIFAR-10;
* ``issue15-predictor.md/.csv``: the learned predictor's rho on every unlabelled cell by number
  of labels (0, 10, 30, 100; labels drawn at random from the 1,000, 10 draws each).
"""

from __future__ import annotations

import argparse
import csv
import json
import statistics
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from search.metrics import FrontReference, pareto_mask
from search.nb201 import load_table
from search.nb201.proxies import FEATURE_PROXIES, PRIOR_PROXIES, REFERENCE_CELLS, NB201Proxies
from search.nb201.space import format_arch
from search.nb201.table import DATASETS, USEFUL_FLOOR
from search.predictor import BoostedSurrogate, spearman, zero_shot
from search.zero_cost import PROXIES, ProxyCache, ProxyConfig, shipped_table

SAMPLE = 1000
DEVICES = ("fpga", "raspi4", "pixel3", "eyeriss")
VALIDATION = ("cifar100", "imagenet16_120")
LABELS = (0, 10, 30, 100)
DRAWS = 10
RECIPES: dict[str, tuple[tuple[str, ...], str, int]] = {
    # name: (proxies, scale, latency bands)
    "rank: synflow+naswot+snip (before)": (("synflow", "naswot", "snip"), "rank", 0),
    "rank: synflow+jacob_cov+snip (vote, Abdelfattah et al.)": (("synflow", "jacob_cov", "snip"), "rank", 0),
    "rank: synflow+naswot+jacob_cov": (("synflow", "naswot", "jacob_cov"), "rank", 0),
    "z: synflow+naswot": (("synflow", "naswot"), "z", 0),
    "z: synflow+naswot+jacob_cov": (("synflow", "naswot", "jacob_cov"), "z", 0),
    "z: synflow+naswot+jacob_cov+zen": (("synflow", "naswot", "jacob_cov", "zen"), "z", 0),
    "z: all but plain and params": (tuple(p for p in FEATURE_PROXIES if p != "plain"), "z", 0),
    "z: synflow+naswot+jacob_cov, 5 latency bands": (("synflow", "naswot", "jacob_cov"), "z", 5),
    "z: synflow+naswot+jacob_cov, 10 latency bands": (("synflow", "naswot", "jacob_cov"), "z", 10),
}


def order_sample() -> np.ndarray:
    from scripts.build_proxy_table import order  # the one scoring order

    return order(len(load_table().ops))[:SAMPLE]


def load_natural() -> tuple[np.ndarray, np.ndarray]:
    """(index, scores (N, len(PROXIES))) of every cell of the shipped table, in NB201 index order."""
    table = load_table()
    scores = shipped_table(ProxyConfig().key())
    if scores is None:
        raise SystemExit("no shipped proxy table for the default config: run scripts/build_proxy_table.py --export first")
    index = np.arange(len(table.ops))
    raw = np.array([[scores[format_arch(table.cell(int(i)))][p] for p in PROXIES] for i in index])
    return index, raw


def sample_csv(out: Path, gaussian: str | None, natural: np.ndarray) -> Path:
    """The saved sample: per cell of the first 1,000, both batches' scores (made once from the Gaussian cache)."""
    path = out / "issue15-proxies-sample.csv"
    if gaussian is None:
        if not path.exists():
            raise SystemExit(f"{path} is missing: pass --gaussian with the proxy cache of scripts/build_proxy_table.py --source gaussian")
        return path
    table = load_table()
    cache = ProxyCache(gaussian, ProxyConfig(batch_source="gaussian"), use_shipped=False)
    ids = order_sample()
    cells = [table.cell(int(i)) for i in ids]
    before = len(cells)
    scores = cache.scores(cells)
    if cache.computed:
        raise SystemExit(f"the Gaussian cache lacked {cache.computed} of {before} cells: finish scripts/build_proxy_table.py first")
    with path.open("w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(["index", "arch", *[f"gaussian_{p}" for p in PROXIES], *[f"natural_{p}" for p in PROXIES]])
        for i, cell, s in zip(ids, cells, scores, strict=True):
            w.writerow([int(i), format_arch(cell), *[s[p] for p in PROXIES], *natural[int(i)].tolist()])
    return path


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--gaussian", default=None, help="proxy cache with the Gaussian-batch scores (first run only)")
    p.add_argument("--out", type=Path, default=Path("docs/bench"))
    args = p.parse_args()
    table = load_table()
    _, natural = load_natural()
    path = sample_csv(args.out, args.gaussian, natural)
    with path.open() as fh:
        rows = list(csv.DictReader(fh))
    ids = np.array([int(r["index"]) for r in rows])
    gauss = np.array([[float(r[f"gaussian_{p}"]) for p in PROXIES] for r in rows])
    command = "python scripts/zero_cost_figures.py"

    # ---- 1. every proxy, before and after
    lines = [
        f"<!-- {command} (data: {path.name}, search/nb201/data/proxies-natural.npz) -->",
        f"# Zero-cost proxies on {len(ids)} random NB201 cells: Gaussian batch (before) and natural-image batch (after)",
        "",
        "Spearman rho against each dataset's test accuracy; the same 1,000 cells (the first of the fixed scoring order, seed "
        "2026), the same networks and seeds, only the batch differs. prior: the label-free estimate of zero-cost and "
        f"few-shot mode (mean robust z of {', '.join(PRIOR_PROXIES)}).",
        "",
        "| proxy | " + " | ".join(f"{d} before | {d} after" for d in DATASETS) + " |",
        "|---|" + "---|---|" * len(DATASETS),
    ]
    csv_rows = []
    cols = [PROXIES.index(q) for q in PRIOR_PROXIES]
    ref_ids = np.array([table.index_of(c) for c in NB201Proxies.reference_cells()])
    for name in (*PROXIES, "prior"):
        cells = []
        for d in DATASETS:
            acc = table.acc(d)[ids]
            if name == "prior":
                # the prior's reference sample, scored with each batch (the Gaussian one from the sample itself: not shipped)
                b = spearman(zero_shot(gauss[:, cols], gauss[:REFERENCE_CELLS, cols]), acc)
                a = spearman(zero_shot(natural[ids][:, cols], natural[ref_ids][:, cols]), acc)
            else:
                j = PROXIES.index(name)
                b, a = spearman(gauss[:, j], acc), spearman(natural[ids, j], acc)
            cells.append(f"{b:.3f} | {a:.3f}")
            csv_rows.append({"proxy": name, "dataset": d, "rho_gaussian": round(b, 4), "rho_natural": round(a, 4)})
        lines.append(f"| {name} | " + " | ".join(cells) + " |")
    (args.out / "issue15-proxies.md").write_text("\n".join(lines) + "\n")
    _write(args.out / "issue15-proxies.csv", csv_rows)

    # ---- 2. label-free recipes
    ref = natural[ref_ids]
    rec_rows = []
    for recipe, (proxies, scale, bands) in RECIPES.items():
        c = [PROXIES.index(q) for q in proxies]
        for d in DATASETS:
            acc_all = table.acc(d)
            row: dict[str, object] = {"recipe": recipe, "dataset": d}
            for dev in DEVICES:
                lat = table.lat(dev)
                est = zero_shot(natural[:, c], ref[:, c], scale=scale, cheap=lat, reference_cheap=lat[ref_ids], bands=bands)  # type: ignore[arg-type]
                if dev == DEVICES[0] or bands:
                    row.setdefault("rho_1000", round(spearman(est[ids], acc_all[ids]), 4))
                keep = pareto_mask(est, lat)
                reference = FrontReference.from_space(acc_all, lat, USEFUL_FLOOR[d])
                row[f"hv_{dev}"] = round(reference.hv_ratio(acc_all[keep], lat[keep]), 4)
                row[f"size_{dev}"] = int(keep.sum())
            rec_rows.append(row)
    _write(args.out / "issue15-zero-shot.csv", rec_rows)
    lines = [
        f"<!-- {command} -->",
        "# Label-free estimates: which recipe (chosen on validation datasets)",
        "",
        "rho: Spearman on the 1,000 sample cells. HV: ratio of the front of the whole space under the estimate (every one of "
        "the 15,625 cells scored, the limit of a zero-cost search with an unbounded budget) scored with true accuracy, "
        "per device. The choice is made on CIFAR-100 and ImageNet16-120 (mean HV over their 8 device columns); CIFAR-10 is "
        "reported, not used.",
        "",
        "| recipe | dataset | rho | " + " | ".join(f"HV {d}" for d in DEVICES) + " | front size (fpga) |",
        "|---|---|---|" + "---|" * len(DEVICES) + "---|",
    ]
    for r in rec_rows:
        lines.append(
            f"| {r['recipe']} | {r['dataset']} | {r['rho_1000']:.3f} | "
            + " | ".join(f"{r[f'hv_{d}']:.4f}" for d in DEVICES)
            + f" | {r['size_fpga']} |"
        )
    val = {
        recipe: statistics.fmean(
            float(r[f"hv_{d}"]) for r in rec_rows if r["recipe"] == recipe and r["dataset"] in VALIDATION for d in DEVICES
        )  # type: ignore[arg-type]
        for recipe in RECIPES
    }
    best = max(val, key=lambda k: val[k])
    lines += [
        "",
        "Mean HV on the validation datasets: " + "; ".join(f"{k}: {v:.4f}" for k, v in val.items()),
        "",
        f"Best on validation: **{best}**.",
    ]
    (args.out / "issue15-zero-shot.md").write_text("\n".join(lines) + "\n")

    # ---- 3. the learned predictor by number of labels
    # the few-shot predictor's features of every cell, as few-shot mode builds them (from the shipped table)
    features = NB201Proxies("sqlite:///:memory:").features([table.cell(i) for i in range(len(table.ops))])
    pred_rows = []
    for d in DATASETS:
        acc_all = table.acc(d)
        for k in LABELS:
            rhos, top = [], []
            for draw in range(DRAWS):
                rng = np.random.default_rng(draw)
                labelled = rng.choice(ids, size=k, replace=False) if k else np.array([], dtype=int)
                rest = np.setdiff1d(np.arange(len(acc_all)), labelled)
                if k == 0:
                    pred = features[rest, -1]
                else:
                    model = BoostedSurrogate(features[labelled], acc_all[labelled], bounds=(0.0, 100.0), seed=draw, prior_column=-1)
                    pred = model.predict(features[rest])
                rhos.append(spearman(pred, acc_all[rest]))
                good = acc_all[rest] >= np.quantile(acc_all, 0.9)  # the top decile, where fronts live
                top.append(spearman(pred[good], acc_all[rest][good]))
                if k == 0:
                    break  # no labels: nothing random
            pred_rows.append(
                {
                    "dataset": d,
                    "labels": k,
                    "rho": round(statistics.fmean(rhos), 4),
                    "rho_sd": round(statistics.stdev(rhos), 4) if len(rhos) > 1 else 0.0,
                    "rho_top10pct": round(statistics.fmean(top), 4),
                    "draws": len(rhos),
                }
            )
    _write(args.out / "issue15-predictor.csv", pred_rows)
    lines = [
        f"<!-- {command} -->",
        "# The learned predictor by number of accuracy labels",
        "",
        "LightGBM (a bag of 16) on the proxies' robust z-scores, op counts and the prior, fitting a correction of a line on the "
        "prior (search/predictor.py). Labels: drawn at random from the 1,000 sample cells (10 draws); rho: Spearman on every "
        "other cell of the space (~15,600); top 10 %: among the cells in the top decile of true accuracy. 0 labels is the "
        "prior alone.",
        "",
        "| dataset | labels | rho (mean ± sd) | rho in the top 10 % |",
        "|---|---|---|---|",
        *[f"| {r['dataset']} | {r['labels']} | {r['rho']:.3f} ± {r['rho_sd']:.3f} | {r['rho_top10pct']:.3f} |" for r in pred_rows],
    ]
    (args.out / "issue15-predictor.md").write_text("\n".join(lines) + "\n")
    print(json.dumps({"best_recipe_on_validation": best, "files": ["issue15-proxies.md", "issue15-zero-shot.md", "issue15-predictor.md"]}))


def _write(path: Path, rows: list[dict[str, object]]) -> None:
    with path.open("w", newline="") as fh:
        w = csv.DictWriter(fh, fieldnames=list(rows[0]))
        w.writeheader()
        w.writerows(rows)


if __name__ == "__main__":
    main()
