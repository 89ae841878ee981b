"""Do LLM.int8 outlier features appear as a byte-level LM gets wider, and what do they do to activation-aware pruning?

    python -m coevo.figures lm-wide --export-corpus .gpu         # here: lm-pystdlib's text splits, gzip, to carry
    python -m coevo.figures lm-wide --corpus .gpu --device cuda  # where a GPU is: train, measure, prune, render
    python -m coevo.figures lm-wide --report-only                # wide.md from the saved CSVs

The CPU runs of lm-outliers (docs/prune.md) stay at widths 64-256, where LLM.int8's |x| >= 6 on a
LayerNorm output needs one channel to hold 36/d of a token's energy. This figure trains the same
architecture (:class:`sim.zoo.models.ByteGPT`) at several widths with one set of settings on the
same corpus, on a GPU, and measures (:mod:`coevo.figures._lm_wide_run`, which says how):

* ``wide-trajectory.csv``: per width and checkpoint, every Linear input's outlier measures
  (:func:`sim.prune.outliers.activation_outliers`, as lm-outliers) and the validation perplexity;
* ``wide-prune.csv``: per width, score (magnitude, Wanda, cos+var, SparseGPT), pattern and
  calibration seed, the test perplexity after pruning, and the dense model's;
* ``wide-run.json``: the settings, the device, the commit, each width's training time, what was skipped.

``wide.md`` is written from those files alone. With one training seed (``--seeds 0``, the width sweep)
the pruning intervals are over calibration seeds and say nothing about training seeds; with several
(``--widths 1024 --seeds 0,1,2,3``) they are over the trained models.
"""

from __future__ import annotations

import json
import sys
from collections import defaultdict
from pathlib import Path
from typing import Any

from coevo.figures._common import comma_list, command_line, figure_parser, git_revision, mean_interval, read_csv, write_markdown
from coevo.figures._lm_wide_run import PRUNE, RUN, TRAJECTORY, WideSettings
from coevo.figures._outlier_rows import layer_from_row
from coevo.search.stats import SMALL_SAMPLE, excludes_zero, format_interval

NAME = "lm-wide"
PAGE = "wide.md"
MAGNITUDE = 6.0
"""LLM.int8's outlier magnitude (as :data:`sim.prune.outliers.MAGNITUDE`; repeated here so rendering needs no torch)."""
BASE = "wanda"
"""The score the other scores are compared with, paired by calibration (and training) seed."""


def parser() -> Any:
    """The figure's options; the measuring ones default to :class:`coevo.figures._lm_wide_run.WideSettings`'s."""
    p = figure_parser(NAME, __doc__)
    p.add_argument("--export-corpus", type=Path, metavar="DIR", help="write lm-pystdlib's text splits to DIR and stop")
    p.add_argument("--corpus", type=Path, metavar="DIR", help="the exported corpus to train on (measure mode)")
    p.add_argument("--device", default="cuda", help="torch device to train on (default cuda)")
    d = WideSettings()  # every measuring default is the settings' own
    p.add_argument("--widths", default=",".join(map(str, d.widths)), help="model widths, comma-separated (default %(default)s)")
    p.add_argument("--layers", type=int, default=d.layers, help="transformer blocks (default %(default)s)")
    p.add_argument("--steps", type=int, default=d.steps, help="training steps per width (default %(default)s)")
    p.add_argument("--batch", type=int, default=d.batch, help="windows per step (default %(default)s)")
    p.add_argument("--block", type=int, default=d.block, help="window length in bytes (default %(default)s)")
    p.add_argument("--lr", type=float, default=d.lr, help="one-cycle peak learning rate (default %(default)s)")
    p.add_argument("--checkpoints", type=int, default=d.checkpoints, help="measurements per training (default %(default)s)")
    p.add_argument(
        "--seeds",
        default=",".join(map(str, d.seeds)),
        help="training seeds, comma-separated: each width is trained from each (default %(default)s)",
    )
    p.add_argument("--patterns", default=",".join(d.patterns), help="pruning patterns, comma-separated (default %(default)s)")
    p.add_argument(
        "--sparsities",
        default=",".join(map(str, d.sparsities)),
        help="the unstructured pattern's sparsities, comma-separated (default %(default)s)",
    )
    p.add_argument("--calib-seeds", type=int, default=d.calib_seeds, help="pruning calibration seeds (default %(default)s)")
    p.add_argument(
        "--deadline-s", type=float, default=d.deadline_s, help="stop starting new work after this many seconds (default %(default)s)"
    )
    p.add_argument("--commit", default=None, help="the commit to record (default: this checkout's; a copy without git has none)")
    return p


def main(argv: list[str] | None = None) -> int:
    """Export the corpus, or measure (then render), or render only; 2 and one line on a bad option."""
    args = parser().parse_args(argv)
    command = command_line(NAME, argv)
    if args.export_corpus is not None:
        from coevo.figures._lm_wide_run import export_corpus

        sizes = export_corpus(args.export_corpus)
        print(f"wrote lm-pystdlib's splits to {args.export_corpus}: " + ", ".join(f"{k} {v:,} bytes" for k, v in sizes.items()))
        return 0
    if not args.report_only:
        code = _measure(args, command)
        if code:
            return code
    if not (args.out / TRAJECTORY).is_file():
        print(f"error: no {TRAJECTORY} in {args.out}: measure first (--corpus DIR --device cuda)", file=sys.stderr)
        return 2
    print(render(args.out, command))
    return 0


def _measure(args: Any, command: str) -> int:
    from coevo.figures._lm_wide_run import run

    try:
        widths, seeds = tuple(comma_list(args.widths, "--widths", int)), tuple(comma_list(args.seeds, "--seeds", int))
        sparsities = tuple(comma_list(args.sparsities, "--sparsities", float))
        settings = WideSettings(
            widths=widths, seeds=seeds, patterns=tuple(args.patterns.split(",")), sparsities=sparsities, layers=args.layers,
            block=args.block, batch=args.batch, steps=args.steps, lr=args.lr, checkpoints=args.checkpoints,
            calib_seeds=args.calib_seeds, deadline_s=args.deadline_s,
        )  # fmt: skip
        settings.check()
        if args.corpus is None:
            raise ValueError("--corpus DIR is needed to measure (write one with --export-corpus DIR)")
        run(settings, args.corpus, args.out, args.device, args.commit or git_revision())
    except (ValueError, FileNotFoundError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    return 0


# ---------------------------------------------------------------- the page, from the saved files alone


def _target(row: dict[str, str]) -> str:
    """A pruning row's pattern as the tables name it: an unstructured row with its sparsity (N:M has its own)."""
    if row["pattern"] != "unstructured":
        return row["pattern"]
    x = float(row.get("target_sparsity") or row["sparsity"])  # the first run's files: the measured sparsity (0.5 exactly)
    return f"unstructured {round(100 * x, 2):g} %"


def _seed(row: dict[str, str]) -> int:
    """A row's training seed; the first run's files have no column for it (one training, seed 0, per its run file)."""
    return int(row.get("seed") or 0)


def _checkpoints(rows: list[dict[str, str]]) -> dict[tuple[int, int], dict[int, list[dict[str, str]]]]:
    """(width, training seed) -> step -> that checkpoint's layer rows."""
    out: dict[tuple[int, int], dict[int, list[dict[str, str]]]] = defaultdict(lambda: defaultdict(list))
    for row in rows:
        out[(int(row["width"]), _seed(row))][int(row["step"])].append(row)
    return out


def _point(rows: list[dict[str, str]]) -> dict[str, Any]:
    """One checkpoint reduced over its layers: LLM.int8's counts over the hidden-width inputs, and the largest share."""
    from coevo.sim.prune.outliers import OutlierReport

    report = OutlierReport(tuple(layer_from_row(r) for r in rows))
    summary = report.summary()
    hidden = report.hidden_layers
    top = max(hidden, key=lambda layer: layer.top_share)
    return {
        "step": int(rows[0]["step"]), "tokens": int(rows[0]["tokens_seen"]), "train_s": float(rows[0]["train_s"]),
        "val_ppl": float(rows[0]["val_ppl"]), "absmax": summary["absmax"], "kurtosis_max": summary["kurtosis_max"],
        "top_share": top.top_share, "top_layer": top.layer, "hidden": int(summary["hidden_outlier_channels"]),
        "all": int(summary["hidden_outlier_channels"] + summary["other_outlier_channels"]),
        "hidden_layers_with": sum(1 for layer in hidden if layer.outlier_channels), "hidden_layers": len(hidden),
        "systematic": int(summary["systematic_channels"]), "params": int(rows[0]["params"]), "layers": int(rows[0]["layers"]),
        "which": ", ".join(map(str, report.systematic)),
    }  # fmt: skip


def _systematic_cell(point: dict[str, Any]) -> str:
    """The count of systematic channels, with their indices where there are any (to see whether they persist)."""
    return f"{point['systematic']} ({point['which']})" if point["which"] else str(point["systematic"])


Points = dict[tuple[int, int], list[dict[str, Any]]]
"""(width, training seed) -> that model's checkpoints, in step order."""


def _final_table(points: Points) -> list[str]:
    lines = [
        "| width | seed | parameters | steps (tokens) | training s | val ppl | max \\|x\\| | kurtosis max | top share (layer) "
        "| 36/d | outlier channels, hidden / all | hidden inputs with outlier channels | systematic channels |",
        "|---:|---:|---:|---|---:|---:|---:|---:|---|---:|---|---|---|",
    ]
    for (width, seed), run in sorted(points.items()):
        p = run[-1]
        lines.append(
            f"| {width} | {seed} | {p['params']:,} | {p['step']:,} ({p['tokens'] / 1e6:.1f} M) | {p['train_s']:.0f} "
            f"| {p['val_ppl']:.3f} | {p['absmax']:.2f} | {p['kurtosis_max']:.2f} | {100 * p['top_share']:.2f} % (`{p['top_layer']}`) "
            f"| {100 * MAGNITUDE**2 / width:.2f} % | {p['hidden']} / {p['all']} | {p['hidden_layers_with']} of {p['hidden_layers']} "
            f"| {_systematic_cell(p)} |"
        )
    return lines


def _over_seeds(points: Points) -> list[str]:
    """Per width trained from several seeds, the last checkpoint's measures as mean ± t interval over the seeds."""
    finals: dict[int, list[dict[str, Any]]] = defaultdict(list)
    last = {width: max(run[-1]["step"] for (w, _), run in points.items() if w == width) for width, _ in points}
    for (width, _), run in sorted(points.items()):
        if run[-1]["step"] == last[width]:  # a training stopped early is not counted as finished
            finals[width].append(run[-1])
    lines = []
    for width, ps in sorted(finals.items()):
        if len(ps) < 2:
            continue
        parts = [
            f"{what} {mean_interval([float(p[key]) for p in ps], digits=digits)}"
            for what, key, digits in (("val ppl", "val_ppl", 3), ("max |x|", "absmax", 2), ("hidden-state outlier channels", "hidden", 1),
                                      ("systematic channels", "systematic", 1))
        ]  # fmt: skip
        with_any = sum(1 for p in ps if p["systematic"])
        lines.append(f"- Width {width}, {len(ps)} training seeds (mean ± Student t 95 % half-width): " + ", ".join(parts)
                     + f"; {with_any} of {len(ps)} seeds have systematic channels.")  # fmt: skip
    return ["", *lines] if lines else []


def _trajectory_section(points: Points) -> list[str]:
    lines = [
        "## Outliers at the end of training",
        "",
        "At the last checkpoint of each model. Outlier channels: |x| >= 6 on >= 6 % of the validation tokens (LLM.int8), "
        "counted over the hidden-width inputs (the hidden states LLM.int8 analyses) / over all inputs (adding the FFN "
        "contraction's 4x wider input); systematic: hidden-state channels that are outlier channels in >= 25 % of the "
        "hidden-width inputs (their indices in brackets). Top share: the largest share of a hidden-width input's energy one "
        "channel carries (layer named); 36/d: the share a LayerNorm output's channel needs, before the affine gain, to reach "
        "|x| = 6.",
        "",
        *_final_table(points),
        *_over_seeds(points),
    ]
    lines += ["", "Every checkpoint:", "", "| width | seed | step | val ppl | max \\|x\\| | kurtosis max | top share (layer) "
              "| outlier channels, hidden / all | systematic (channels) |", "|---:|---:|---:|---:|---:|---:|---|---|---|"]  # fmt: skip
    for (width, seed), run in sorted(points.items()):
        lines += [
            f"| {width} | {seed} | {p['step']:,} | {p['val_ppl']:.3f} | {p['absmax']:.2f} | {p['kurtosis_max']:.2f} "
            f"| {100 * p['top_share']:.2f} % (`{p['top_layer']}`) | {p['hidden']} / {p['all']} "
            f"| {_systematic_cell(p)} |"
            for p in run
        ]
    return lines


Cell = dict[int, dict[int, float]]
"""One score at one width and pattern: training seed -> calibration seed -> test perplexity."""


def _ratios(a: dict[int, float], b: dict[int, float]) -> list[float]:
    """Per calibration seed present in both, ``100 (a / b - 1)``: the perplexity change in percent."""
    return [100 * (a[s] / b[s] - 1) for s in sorted(set(a) & set(b))]


def _units(cell: Cell, many: bool) -> list[float]:
    """The values an interval is taken over: each training seed's mean over its calibration seeds when there are
    several training seeds (the calibration seeds are nested in them), else the calibration seeds' values."""
    if many:
        return [sum(v.values()) / len(v) for _, v in sorted(cell.items()) if v]
    return [x for _, v in sorted(cell.items()) for x in v.values()]


def _diff_units(a: Cell, b: Cell, many: bool) -> list[float]:
    """``a`` against ``b`` in percent, paired by calibration seed within a training seed, reduced as :func:`_units`."""
    per_seed = {seed: dict(enumerate(_ratios(a[seed], b[seed]))) for seed in sorted(set(a) & set(b))}
    return _units({s: v for s, v in per_seed.items() if v}, many)


def _prune_section(rows: list[dict[str, str]]) -> list[str]:
    if not rows:
        return ["## Pruning", "", "No pruning rows were saved (the run stopped before its pruning stage)."]
    ppl: dict[tuple[int, str], dict[str, Cell]] = defaultdict(lambda: defaultdict(lambda: defaultdict(dict)))
    dense: dict[int, dict[int, float]] = defaultdict(dict)
    for r in rows:
        ppl[(int(r["width"]), _target(r))][r["score"]][_seed(r)][int(r["calib_seed"])] = float(r["test_ppl"])
        dense[int(r["width"])][_seed(r)] = float(r["dense_test_ppl"])
    seeds = sorted({_seed(r) for r in rows})
    many = len(seeds) > 1
    scores = list(dict.fromkeys(r["score"] for r in rows))
    others = [s for s in scores if s != BASE]
    over = (
        "over the trained models, as many as the models column says: each counted once, as the mean of its calibration "
        "seeds; a cell over fewer models says how many"
        if many
        else "over calibration seeds; magnitude needs none, so its seeds repeat one value"
    )
    lines = [
        "## Pruning each model",
        "",
        f"Test perplexity after pruning to each pattern (unstructured at the sparsity named, per output row as Wanda; N:M), "
        "sequential layer by layer, calibration "
        f"windows drawn from the training split (mean ± Student t 95 % half-width {over}). Then each score against "
        f"{BASE}, paired by calibration seed{' within each training seed' if many else ''}: the change of test perplexity "
        f"in percent (negative: lower perplexity than {BASE}); * marks an interval that excludes 0.",
        "",
        "| width | pattern |"
        + (" models |" if many else "")
        + " dense | "
        + " | ".join(scores)
        + " | "
        + " | ".join(f"{s} vs {BASE}" for s in others)
        + " |",
        "|---:|---|" + ("---:|" if many else "") + "---:|" + "---:|" * len(scores) + "---|" * len(others),
    ]
    for (width, pattern), by_score in sorted(ppl.items()):
        n = len({seed for cell in by_score.values() for seed in cell})
        cells = [_level(_units(by_score[s], many)) + _fewer(len(by_score[s]), n) if s in by_score else "n/a" for s in scores]
        diffs = []
        for s in others:
            units = _diff_units(by_score[s], by_score[BASE], many) if s in by_score and BASE in by_score else []
            diffs.append(_paired(units) + (_fewer(len(units), n) if many else ""))
        level = _level(list(dense[width].values()))
        models = f" {n} |" if many else ""
        lines.append(f"| {width} | {pattern} |{models} {level} | " + " | ".join(cells) + " | " + " | ".join(diffs) + " |")
    lines += ["", _small_sample(rows, many)]
    return lines


def _fewer(k: int, n: int) -> str:
    """`` (k models)`` when a cell has fewer trained models than its row (a deadline cut its pruning short)."""
    return f" ({k} models)" if 0 < k < n else ""


def _small_sample(rows: list[dict[str, str]], many: bool) -> str:
    """The caveat every interval here needs: a t interval over a handful of values has few degrees of freedom."""
    count = len({_seed(r) for r in rows}) if many else len({r["calib_seed"] for r in rows})
    what = "trained models" if many else "calibration seeds"
    if count >= SMALL_SAMPLE:
        return f"Intervals over {count} {what}."
    return (f"Intervals over {count} {what}: a Student t interval over fewer than {SMALL_SAMPLE} values has few degrees of "
            "freedom, so it is wide and leans on the values being roughly normal.")  # fmt: skip


def _per_model_section(rows: list[dict[str, str]], points: Points) -> list[str]:
    """With several training seeds: each model's outliers beside each score's change against the base, to see
    whether the models with larger outlier features are the ones where the activation term pays."""
    ppl: dict[tuple[int, int], dict[tuple[str, str], dict[int, float]]] = defaultdict(lambda: defaultdict(dict))
    for r in rows:
        ppl[(int(r["width"]), _seed(r))][(_target(r), r["score"])][int(r["calib_seed"])] = float(r["test_ppl"])
    if len({seed for _, seed in ppl}) < 2:
        return []
    columns = list(dict.fromkeys((_target(r), r["score"]) for r in rows if r["score"] != BASE))
    lines = [
        "",
        f"Each trained model (per-model mean over its calibration seeds of the change against {BASE}, in percent), beside its "
        "outliers at the last checkpoint:",
        "",
        "| width | seed | max \\|x\\| | hidden outlier channels | systematic | "
        + " | ".join(f"{score} vs {BASE}, {pattern}" for pattern, score in columns)
        + " |",
        "|---:|---:|---:|---:|---:|" + "---:|" * len(columns),
    ]
    for (width, seed), cells in sorted(ppl.items()):
        p = points[(width, seed)][-1] if (width, seed) in points else None
        outliers = f"{p['absmax']:.2f} | {p['hidden']} | {p['systematic']}" if p else "n/a | n/a | n/a"
        diffs = []
        for pattern, score in columns:
            change = _ratios(cells.get((pattern, score), {}), cells.get((pattern, BASE), {}))
            diffs.append(f"{sum(change) / len(change):+.2f}" if change else "n/a")
        lines.append(f"| {width} | {seed} | {outliers} | " + " | ".join(diffs) + " |")
    return lines


def _level(values: list[float]) -> str:
    if not values:
        return "n/a"
    if len(set(values)) == 1:
        return f"{values[0]:.3f}"  # magnitude over calibration seeds: no calibration data, every seed the same model
    return mean_interval(values, digits=3)


def _paired(values: list[float]) -> str:
    if not values:
        return "n/a"
    return format_interval(values, digits=2) + " %" + (" *" if excludes_zero(values) else "")


def _seed_note(skipped: dict[str, Any]) -> str:
    return f", seed {skipped['seed']}" if "seed" in skipped else ""


def render(folder: Path, command: str) -> str:
    """Write ``wide.md`` in ``folder`` from its CSVs and run file; returns the page."""
    info = json.loads((folder / RUN).read_text()) if (folder / RUN).is_file() else {}
    by_model = _checkpoints(read_csv(folder / TRAJECTORY))
    points = {key: [_point(rows) for _, rows in sorted(steps.items())] for key, steps in by_model.items()}
    seeds = sorted({seed for _, seed in points})
    prune_rows = read_csv(folder / PRUNE) if (folder / PRUNE).is_file() else []
    s = info.get("settings", {})
    lines = [
        "# Outlier features of byte-level LMs trained on a GPU, and pruning them (issue 31, item 1)",
        "",
        f"Written by `python -m coevo.figures lm-wide --report-only` from `{TRAJECTORY}`, `{PRUNE}` and `{RUN}` beside this "
        f"page. Measured on {info.get('device', 'an unrecorded device')} (torch {info.get('torch', '?')}) from commit "
        f"{info.get('commit', '?')}, {info.get('wall_s', '?')} s in all; the CPU machine that runs the rest of docs/bench "
        "could not train these widths in the time a run gets.",
        "",
        f"Settings, the same for every model: ByteGPT with {s.get('layers', '?')} pre-LayerNorm blocks, one head per 64 "
        f"channels, windows of {s.get('block', '?')} bytes, {s.get('batch', '?')} windows per step, {s.get('steps', '?')} "
        f"steps of AdamW (weight decay {s.get('weight_decay', '?')}) on a one-cycle schedule peaking at {s.get('lr', '?')} "
        f"(10 % warm-up), gradient clipping at 1, bf16 autocast on CUDA, training seed{'s' if len(seeds) > 1 else ''} "
        f"{', '.join(map(str, seeds))} (the initial weights and the training windows); measured in float32 on "
        f"{s.get('tokens', '?')} validation tokens at {s.get('checkpoints', '?')} checkpoints. Corpus: lm-pystdlib's splits "
        "(the CPU machine's Python standard library, split by file), exported there and carried.",
        "",
        *_trajectory_section(points),
        "",
        *_prune_section(prune_rows),
        *_per_model_section(prune_rows, points),
    ]
    if info.get("skipped"):
        lines += ["", "Skipped: " + "; ".join(f"width {x['width']}{_seed_note(x)} ({x['why']})" for x in info["skipped"]) + "."]
    cut = [m for m in info.get("models", []) if m.get("pruning_cut")]
    if cut:
        lines += ["", "Pruning cut short by the deadline: " + "; ".join(f"width {m['width']}, seed {m['seed']}" for m in cut) + "."]
    if len(seeds) < 2:
        lines += [
            "",
            "One training per width: the pruning intervals are over calibration seeds, and a difference between widths is one "
            "training each, not an interval over training seeds.",
        ]
    page = "\n".join(lines) + "\n"
    return write_markdown(folder / PAGE, page, command)
