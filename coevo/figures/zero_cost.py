"""Zero-cost proxy and predictor figures of issue 15, from the shipped proxy table and a Gaussian-batch sample.

    python -m coevo.figures zero-cost [--out docs/bench/nb201]

Reads the first 2,837 rows of ``search/nb201/data/proxies-natural.npz`` (natural-image batch: the
cells the table held when these figures were made, a uniform random sample of NB201,
search/nb201/data/PROVENANCE.md) and ``docs/bench/nb201/issue15-proxies-gaussian.npz``
(Gaussian batch: 925 of the first 1,000 of those cells, the rest of the 1,000 not finished in
the time the scoring machine had). Writes into ``--out``:

* ``issue15-proxies.md/.csv``: Spearman rho of every proxy on the cells scored with both
  batches, Gaussian (before) and natural (after), for each dataset;
* ``issue15-zero-shot.md/.csv``: label-free recipes (proxy set, scale, latency bands): rho on
  the sample and the HV ratio (against the whole space's true front) of the sample's front
  under the estimate, per device, beside the best any selection from the sample can reach.
  The recipe is chosen on CIFAR-100 and ImageNet16-120 (validation), reported on CIFAR-10;
* ``issue15-predictor.md/.csv``: the learned predictor's rho on the unlabelled sample cells by
  number of labels (0, 10, 30, 100; labels drawn at random from the sample, 10 draws each).
"""

from __future__ import annotations

import json
import statistics
import sys
from pathlib import Path

import numpy as np

from coevo.figures._common import command_line, figure_parser, write_csv, write_markdown
from coevo.search.metrics import FrontReference, pareto_mask
from coevo.search.nb201 import load_table
from coevo.search.nb201.proxies import FEATURE_PROXIES, PRIOR_PROXIES, REFERENCE_CELLS, NB201Proxies
from coevo.search.nb201.proxy_table import PROXIES, ProxyConfig, shipped_table
from coevo.search.nb201.space import parse_arch
from coevo.search.nb201.table import DATASETS, USEFUL_FLOOR
from coevo.search.predictor import BoostedSurrogate, spearman, zero_shot

NAME = "zero-cost"

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


ISSUE15_CELLS = 2837
"""The shipped table's first rows, the cells it held when these figures were made (a uniform random sample; the
table now holds every cell after them, in the same order): the figures read these alone, so they reproduce."""


def load_natural() -> tuple[np.ndarray, np.ndarray]:
    """(NB201 index, scores (N, len(PROXIES))) of the shipped table's first :data:`ISSUE15_CELLS` cells, in its order."""
    scores = shipped_table(ProxyConfig().key())
    if scores is None:
        raise SystemExit("no shipped proxy table for the default config: run python -m coevo.figures proxy-table --export first")
    table = load_table()
    archs = list(scores)[:ISSUE15_CELLS]
    index = np.array([table.index_of(parse_arch(a)) for a in archs])
    return index, np.array([[scores[a][p] for p in PROXIES] for a in archs])


def load_gaussian(path: Path) -> tuple[np.ndarray, np.ndarray]:
    """(NB201 index, scores) of the Gaussian-batch table."""
    with np.load(path) as data:
        if str(data["config"]) != ProxyConfig(batch_source="gaussian").key():
            raise SystemExit(f"{path} was made with other settings or proxy definitions; rebuild it")
        return data["index"].astype(int), np.stack([data[p] for p in PROXIES], axis=1)


def main(argv: list[str] | None = None) -> None:
    p = figure_parser(NAME, __doc__)
    p.add_argument("--gaussian", type=Path, default=Path("docs/bench/nb201/issue15-proxies-gaussian.npz"), help="the Gaussian-batch table")
    args = p.parse_args(argv)
    table = load_table()
    nat_ids, nat = load_natural()
    g_ids, gauss_all = load_gaussian(args.gaussian)
    position = {int(i): k for k, i in enumerate(nat_ids)}
    both = [k for k, i in enumerate(g_ids) if int(i) in position]
    ids = g_ids[both]
    gauss = gauss_all[both]
    natural_both = nat[[position[int(i)] for i in ids]]
    # nothing here is measured: the tables are computed from the saved proxy scores, so --report-only is the same as a run
    given = sys.argv[1:] if argv is None else argv
    command = command_line(NAME, [a for a in given if a != "--report-only"])

    # ---- 1. every proxy, before and after
    lines = [
        f"<!-- {command} (data: {args.gaussian.name}, search/nb201/data/proxies-natural.npz) -->",
        f"# Zero-cost proxies on {len(ids)} random NB201 cells: Gaussian batch (before) and natural-image batch (after)",
        "",
        f"Spearman rho against each dataset's test accuracy; the same {len(ids)} cells (of the first 1,000 of the shipped "
        "table, a uniform random sample), the same networks and seeds, only the batch differs. prior: the label-free "
        f"estimate of zero-cost and few-shot mode (mean robust z of {', '.join(PRIOR_PROXIES)}).",
        "",
        "| proxy | " + " | ".join(f"{d} before | {d} after" for d in DATASETS) + " |",
        "|---|" + "---|---|" * len(DATASETS),
    ]
    csv_rows = []
    cols = [PROXIES.index(q) for q in PRIOR_PROXIES]
    ref_rows = [position[table.index_of(c)] for c in NB201Proxies(None).reference_cells()]
    for name in (*PROXIES, "prior"):
        cells = []
        for d in DATASETS:
            acc = table.acc(d)[ids]
            if name == "prior":
                # the prior's reference sample, scored with each batch (the Gaussian one from the sample itself: not shipped)
                b = spearman(zero_shot(gauss[:, cols], gauss[:REFERENCE_CELLS, cols]), acc)
                a = spearman(zero_shot(natural_both[:, cols], nat[ref_rows][:, cols]), acc)
            else:
                j = PROXIES.index(name)
                b, a = spearman(gauss[:, j], acc), spearman(natural_both[:, j], acc)
            cells.append(f"{b:.3f} | {a:.3f}")
            csv_rows.append({"proxy": name, "dataset": d, "rho_gaussian": round(b, 4), "rho_natural": round(a, 4)})
        lines.append(f"| {name} | " + " | ".join(cells) + " |")
    write_markdown(args.out / "issue15-proxies.md", "\n".join(lines) + "\n", command)
    write_csv(args.out / "issue15-proxies.csv", csv_rows, command=command)

    # ---- 2. label-free recipes, on the whole shipped sample
    ref = nat[ref_rows]
    rec_rows = []
    for recipe, (proxies, scale, bands) in RECIPES.items():
        c = [PROXIES.index(q) for q in proxies]
        for d in DATASETS:
            acc = table.acc(d)[nat_ids]
            row: dict[str, object] = {"recipe": recipe, "dataset": d}
            for dev in DEVICES:
                lat = table.lat(dev)[nat_ids]
                reference = FrontReference.from_space(table.acc(d), table.lat(dev), USEFUL_FLOOR[d])
                est = zero_shot(nat[:, c], ref[:, c], scale=scale, cheap=lat, reference_cheap=lat[ref_rows], bands=bands)  # type: ignore[arg-type]
                if dev == DEVICES[0] or bands:
                    row.setdefault("rho", round(spearman(est, acc), 4))
                keep = pareto_mask(est, lat)
                row[f"hv_{dev}"] = round(reference.hv_ratio(acc[keep], lat[keep]), 4)
                row[f"size_{dev}"] = int(keep.sum())
                front = pareto_mask(acc, lat)
                row[f"bound_{dev}"] = round(reference.hv_ratio(acc[front], lat[front]), 4)
            rec_rows.append(row)
    write_csv(args.out / "issue15-zero-shot.csv", rec_rows, command=command)
    lines = [
        f"<!-- {command} -->",
        "# Label-free estimates: which recipe (chosen on validation datasets)",
        "",
        f"rho: Spearman on the {len(nat_ids)} cells of the shipped table (a uniform random sample of NB201). HV: ratio, "
        "against the whole space's true front, of the sample's front under the estimate scored with true accuracy, per "
        "device; bound: the ratio of the sample's true front (what a perfect estimate would reach on this sample). The "
        "choice is made on CIFAR-100 and ImageNet16-120 (mean HV over their 8 device columns); CIFAR-10 is reported, "
        "not used.",
        "",
        "| recipe | dataset | rho | " + " | ".join(f"HV {d} (bound)" for d in DEVICES) + " | front size (fpga) |",
        "|---|---|---|" + "---|" * len(DEVICES) + "---|",
    ]
    for r in rec_rows:
        lines.append(
            f"| {r['recipe']} | {r['dataset']} | {r['rho']:.3f} | "
            + " | ".join(f"{r[f'hv_{d}']:.4f} ({r[f'bound_{d}']:.4f})" for d in DEVICES)
            + f" | {r['size_fpga']} |"
        )
    val = {
        recipe: statistics.fmean(
            float(str(r[f"hv_{d}"])) for r in rec_rows if r["recipe"] == recipe and r["dataset"] in VALIDATION for d in DEVICES
        )
        for recipe in RECIPES
    }
    best = max(val, key=lambda k: val[k])
    lines += [
        "",
        "Mean HV on the validation datasets: " + "; ".join(f"{k}: {v:.4f}" for k, v in val.items()),
        "",
        f"Best on validation: **{best}**.",
    ]
    write_markdown(args.out / "issue15-zero-shot.md", "\n".join(lines) + "\n", command)

    # ---- 3. the learned predictor by number of labels
    # the few-shot predictor's features of every cell, as few-shot mode builds them (from the shipped table)
    features = NB201Proxies("sqlite:///:memory:").features([table.cell(int(i)) for i in nat_ids])
    pred_rows = []
    for d in DATASETS:
        acc_all = table.acc(d)[nat_ids]
        for k in LABELS:
            rhos, top = [], []
            for draw in range(DRAWS):
                rng = np.random.default_rng(draw)
                labelled = rng.choice(len(nat_ids), size=k, replace=False) if k else np.array([], dtype=int)
                rest = np.setdiff1d(np.arange(len(nat_ids)), labelled)
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
    write_csv(args.out / "issue15-predictor.csv", pred_rows, command=command)
    lines = [
        f"<!-- {command} -->",
        "# The learned predictor by number of accuracy labels",
        "",
        "LightGBM (a bag of 16) on the proxies' robust z-scores, op counts and the prior, fitting a correction of a line on the "
        "prior (search/predictor.py). Labels: drawn at random from the shipped table's cells (10 draws); rho: Spearman on "
        "every other cell of it; top 10 %: among the cells in the top decile of true accuracy. 0 labels is the "
        "prior alone.",
        "",
        "| dataset | labels | rho (mean ± sd) | rho in the top 10 % |",
        "|---|---|---|---|",
        *[f"| {r['dataset']} | {r['labels']} | {r['rho']:.3f} ± {r['rho_sd']:.3f} | {r['rho_top10pct']:.3f} |" for r in pred_rows],
    ]
    write_markdown(args.out / "issue15-predictor.md", "\n".join(lines) + "\n", command)
    print(json.dumps({"best_recipe_on_validation": best, "files": ["issue15-proxies.md", "issue15-zero-shot.md", "issue15-predictor.md"]}))
