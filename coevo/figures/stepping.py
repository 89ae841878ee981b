"""Issue 31 figures (SteppingNet): importance-driven assignment vs the fixed partition, slimmable and independent nets at equal MACs.

    python -m coevo.figures stepping [--out docs/bench/stepping] [--models cnn-digits] [--seeds 0 1 2 3 4]
                                       [--folds 5] [--train-images 250] [--epochs cnn-digits=15]
                                       [--steps 0.25 0.5 0.75 1.0] [--repeats 40] [--kinds LABEL ...]

The task is chosen so that methods can be told apart: cross-validation over every image of the
model's data (cnn-digits: all 1,797 digits, each tested exactly once per seed), with a hard split
(each fold trains on only ``--train-images`` images drawn from the other folds), so float accuracy
sits clearly below saturation. A seed draws the folds, the training images, the initialisation and
the batch order: seeds vary the trained model as well as the method. Every kind of net sees the
same folds, images, initialisation seed, epochs and optimiser (paired).

Kinds (labels): ``importance+kd`` (SteppingNet as in the paper: units moved up to larger subnets by
importance while training, distillation from the largest step), ``index+kd`` (the fixed index
partition, same distillation: the ablation of the assignment), ``importance`` (no distillation: the
ablation of distillation), ``slimmable`` and ``independent`` (the same-MAC baselines).

Writes into ``--out``:

* ``stepping.csv``: one row per (model, kind, seed, fold, step): MACs, achieved fraction, test
  images and how many were right, units moved by the assignment, training seconds.
* ``stepping-latency.csv``: CPU latency per step (batch 1 and 64, one thread) of seed 0 fold 0's
  ``importance+kd`` net: incremental step-up, on-the-fly path, from scratch, dense net of the same MACs.
* ``stepping-macs.csv``: MACs executed when stepping up (the runner's count and
  ``torch.utils.flop_counter.FlopCounterMode``) against ``MAC(s+1) - MAC(s)``.
* ``stepping-run.json``: the run's settings, load before and after, threads, minutes.
* ``stepping.md``: the tables, paired intervals and verdicts, all computed from the four files.

``--report-only`` writes ``stepping.md`` again from the saved files. Bad input (a MAC fraction
outside (0, 1], steps not increasing, fewer than 2 folds, too many training images) is one line
on stderr and exit status 2, before anything is written.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import torch
from torch.utils.flop_counter import FlopCounterMode

from coevo.figures._common import PROVENANCE_FILE, command_line, figure_parser, read_numbers, write_csv, write_markdown
from coevo.search.stats import t_interval
from coevo.sim.errors import UserInputError
from coevo.sim.stepping import SteppingCNN, StepRunner, TrainConfig, accuracies, make_net, measure_latency, plan, train, zoo_setup
from coevo.sim.stepping.config import SteppingConfig
from coevo.sim.zoo.registry import splits_of

NAME = "stepping"

KINDS: dict[str, tuple[str, str, bool]] = {
    "importance+kd": ("stepping", "importance", True),
    "index+kd": ("stepping", "index", True),
    "importance": ("stepping", "importance", False),
    "slimmable": ("slimmable", "index", False),
    "independent": ("independent", "index", False),
}
"""label -> (net kind, assignment, distillation)."""

METHOD = "importance+kd"
PAIRS = (
    ("importance+kd", "index+kd", "the assignment: importance vs the fixed index partition (both distilled)"),
    ("importance+kd", "slimmable", "SteppingNet vs a slimmable net"),
    ("importance+kd", "independent", "SteppingNet vs independent dense nets"),
    ("importance+kd", "importance", "distillation from the largest step (both importance-assigned)"),
    ("index+kd", "slimmable", "the fixed partition vs a slimmable net"),
    ("index+kd", "independent", "the fixed partition vs independent dense nets"),
)


def flops_of(fn: Any) -> int:
    """FLOPs PyTorch's own counter sees while ``fn()`` runs."""
    with FlopCounterMode(display=False) as counter:
        fn()
    return int(counter.get_total_flops())


def parser() -> argparse.ArgumentParser:
    """The figure's options; the model and the steps are the family's (``SteppingConfig``)."""
    ap = figure_parser(NAME, __doc__)
    ap.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2, 3, 4])
    ap.add_argument("--models", nargs="+", default=[SteppingConfig.model])
    # per-model epochs, not SteppingConfig.search_epochs (3, one design of a search): the committed figure's experiment setting
    ap.add_argument("--epochs", nargs="*", default=[f"{SteppingConfig.model}=15"], help="MODEL=EPOCHS")
    ap.add_argument("--steps", type=float, nargs="+", default=list(SteppingConfig.steps))
    ap.add_argument("--folds", type=int, default=5, help="cross-validation folds over all the model's images")
    ap.add_argument("--train-images", type=int, default=250, help="training images per fold, drawn from the other folds")
    ap.add_argument("--repeats", type=int, default=40)
    ap.add_argument("--kinds", nargs="*", default=None, help=f"train only these labels ({', '.join(KINDS)}); default all")
    return ap


def _check(args: argparse.Namespace) -> None:
    """Raise :class:`UserInputError` (one line) for options that cannot run, before anything is written."""
    epochs = dict(e.split("=", 1) for e in args.epochs) if args.epochs else {}
    for model in args.models:
        _, arch = zoo_setup(model)
        plan(arch, args.steps)  # a MAC fraction outside (0, 1] or steps not increasing fail here
        if not str(epochs.get(model, "x")).isdigit() or int(epochs[model]) < 1:
            raise UserInputError(f"--epochs has no positive MODEL=EPOCHS for {model}: give e.g. {model}=15")
        total = sum(len(s) for s in splits_of(zoo_setup(model)[0])[0].values())
        if args.folds < 2 or args.folds > total:
            raise UserInputError(f"--folds {args.folds} must lie in [2, {total}] ({model} has {total} images)")
        most = total - math.ceil(total / args.folds)
        if not 2 <= args.train_images <= most:
            raise UserInputError(f"--train-images {args.train_images} must lie in [2, {most}] (the images outside one fold of {model})")
    unknown = [k for k in args.kinds or [] if k not in KINDS]
    if unknown:
        raise UserInputError(f"--kinds {unknown}: use labels among {', '.join(KINDS)}")


def main(argv: list[str] | None = None) -> int:
    """Train and measure (unless ``--report-only``), then write stepping.md from the saved files; 2 on bad input."""
    args = parser().parse_args(argv)
    try:
        _check(args)
    except UserInputError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    torch.set_num_threads(1)
    out = Path(args.out)
    command = command_line(NAME, argv)
    if args.report_only:
        _write_md(out, command)
        return 0
    out.mkdir(parents=True, exist_ok=True)
    run: dict[str, Any] = {
        "load_before": [round(x, 2) for x in os.getloadavg()],
        "threads": torch.get_num_threads(),
        "cpus": os.cpu_count(),
        "seeds": args.seeds,
        "models": args.models,
        "steps": args.steps,
        "folds": args.folds,
        "train_images": args.train_images,
        "epochs": {k: int(v) for k, v in (e.split("=", 1) for e in args.epochs)},
        "kinds": [k for k in KINDS if args.kinds is None or k in args.kinds],
        "rounds": TrainConfig(1).rounds,
        "importance_images": TrainConfig(1).importance_images,
        "torch": torch.__version__,
    }
    started = time.time()
    rows: list[dict[str, Any]] = []
    lat_rows: list[dict[str, Any]] = []
    mac_rows: list[dict[str, Any]] = []
    for model in args.models:
        kept = _cross_validate(model, args, run, rows, out, command)
        _measure(model, kept, args, lat_rows, mac_rows)
    write_csv(out / "stepping-latency.csv", lat_rows, command=command)
    write_csv(out / "stepping-macs.csv", mac_rows, command=command)
    run["load_after"] = [round(x, 2) for x in os.getloadavg()]
    run["minutes"] = round((time.time() - started) / 60, 1)
    (out / "stepping-run.json").write_text(json.dumps(run, indent=1) + "\n")
    _write_md(out, command)
    print(f"wrote {out / 'stepping.md'}")
    return 0


def _folds(n: int, folds: int, seed: int) -> list[torch.Tensor]:
    perm = torch.randperm(n, generator=torch.Generator().manual_seed(seed))
    return [perm[i::folds] for i in range(folds)]


def _cross_validate(
    model: str, args: argparse.Namespace, run: dict[str, Any], rows: list[dict[str, Any]], out: Path, command: str
) -> dict[str, torch.nn.Module]:
    """Train every kind on every (seed, fold); append rows; return seed 0 fold 0's nets (for latency and MACs)."""
    rec, arch = zoo_setup(model)
    splits, _ = splits_of(rec)
    x = torch.cat([splits[k].x for k in ("train", "val", "test")])
    y = torch.cat([splits[k].y for k in ("train", "val", "test")])
    the_plan = plan(arch, args.steps)
    epochs = run["epochs"][model]
    kept: dict[str, torch.nn.Module] = {}
    for seed in args.seeds:
        parts = _folds(len(y), args.folds, seed)
        for fold, test in enumerate(parts):
            rest = torch.cat([p for i, p in enumerate(parts) if i != fold])
            train_idx = rest[: args.train_images]  # rest is in the seed's random order
            for label in run["kinds"]:
                kind, assign, distill = KINDS[label]
                train_seed = 1000 * seed + fold
                cfg = TrainConfig(
                    epochs, train_seed, distill and kind != "independent", rec["train"]["batch"], rec["train"]["lr"], assign=assign
                )
                torch.manual_seed(train_seed)
                net = make_net(kind, the_plan)
                t = time.time()
                moves = train(net, x[train_idx], y[train_idx], cfg)
                seconds = time.time() - t
                acc = accuracies(net, x[test], y[test])
                macs = [the_plan.macs(s) if kind == "stepping" else the_plan.dense_macs(s) for s in range(the_plan.steps)]
                moved = [sum(m.moved[layer] for m in moves) for layer in range(4)]
                for s in range(the_plan.steps):
                    rows.append(
                        {
                            "model": model, "kind": label, "seed": seed, "fold": fold, "step": s, "target": args.steps[s],
                            "macs": macs[s], "mac_fraction": round(macs[s] / the_plan.full_macs, 4),
                            "test_images": len(test), "right": round(acc[s] * len(test) / 100),
                            "train_images": len(train_idx), "epochs": epochs, "rounds": len(moves),
                            "moved_conv1": moved[0], "moved_conv2": moved[1], "moved_conv3": moved[2], "moved_fc1": moved[3],
                            "train_s": round(seconds, 2),
                        }
                    )  # fmt: skip
                if seed == args.seeds[0] and fold == 0:
                    kept[label] = net
            done = [r for r in rows if r["seed"] == seed and r["fold"] == fold and r["step"] == the_plan.steps - 1]
            print(
                f"{model} seed {seed} fold {fold}: largest step " + ", ".join(f"{r['kind']} {r['right']}/{r['test_images']}" for r in done)
            )
        write_csv(out / "stepping.csv", rows, command=command)  # after each seed: a long run leaves the finished seeds behind
    return kept


def _measure(
    model: str, kept: dict[str, torch.nn.Module], args: argparse.Namespace, lat_rows: list[dict[str, Any]], mac_rows: list[dict[str, Any]]
) -> None:
    """Latency and MAC equality of seed 0 fold 0's stepping net (``importance+kd`` if trained, else ``index+kd``)."""
    label = next((k for k in (METHOD, "index+kd", "importance") if k in kept), None)
    if label is None:
        return
    net = kept[label]
    assert isinstance(net, SteppingCNN)
    rec, _ = zoo_setup(model)
    x_all = splits_of(rec)[0]["test"].x
    dense = kept.get("independent")
    for batch in (1, 64):
        x = x_all[:batch]
        for lat in measure_latency(net, x, repeats=args.repeats if batch == 1 else max(10, args.repeats // 4), dense=dense):
            lat_rows.append(
                {
                    "model": model, "net": label, "batch": batch, "step": lat.step, "macs": net.plan.macs(lat.step),
                    "incremental_ms": round(lat.incremental_ms, 4), "cumulative_ms": round(lat.cumulative_ms, 4),
                    "scratch_ms": round(lat.scratch_ms, 4), "dense_same_macs_ms": round(lat.dense_ms or 0.0, 4),
                }
            )  # fmt: skip
    runner = StepRunner(net)
    x = x_all[:8]
    the_plan = net.plan
    for s in range(the_plan.steps):
        before = runner.macs
        flops = flops_of(lambda s=s, r=runner, x=x: r.start(x) if s == 0 else r.step_up())
        mac_rows.append(
            {
                "model": model, "net": label, "step": s, "plan_mac_diff": the_plan.macs(s) - (the_plan.macs(s - 1) if s else 0),
                "runner_counted": runner.macs - before, "flop_counter_macs_per_image": flops // 2 // len(x),
                "subnet_macs": the_plan.macs(s), "target_macs": math.floor(the_plan.fractions[s] * the_plan.full_macs),
                "scratch_flop_counter_macs_per_image": flops_of(lambda s=s, n=net, x=x: StepRunner(n).subnet(x, s)) // 2 // len(x),
            }
        )  # fmt: skip


# ---------------------------------------------------------------- the page, from the saved files


def _accuracy(rows: list[dict[str, Any]]) -> dict[tuple[str, str, int, int], float]:
    """(model, kind, seed, step) -> cross-validated accuracy in % (right over every image tested once)."""
    right: dict[tuple[str, str, int, int], list[int]] = {}
    for r in rows:
        k = (r["model"], r["kind"], r["seed"], r["step"])
        got = right.setdefault(k, [0, 0])
        got[0] += r["right"]
        got[1] += r["test_images"]
    return {k: 100.0 * a / n for k, (a, n) in right.items()}


def _interval(values: list[float]) -> tuple[float, float]:
    mean, half = t_interval(values)
    return mean, half


def verdict(values: list[float]) -> str:
    """One word on paired differences over seeds: ``ahead`` / ``behind`` when the 95 % interval excludes 0, else ``inside noise``."""
    if len(values) < 2:
        return "one seed: no interval"
    mean, half = _interval(values)
    if abs(mean) <= half:
        return "inside noise"
    return "ahead" if mean > 0 else "behind"


def _cell(values: list[float]) -> str:
    if not values:
        return "–"
    mean, half = _interval(values)
    return f"{mean:+.2f}" if math.isnan(half) else f"{mean:+.2f} ± {half:.2f}"


_KIND_TEXT: dict[str, str] = {
    "importance+kd": "`importance+kd` is SteppingNet as implemented here (units start in subnet 0 and the least important move "
    "up to larger subnets, round by round, until every subnet has its MAC budget; distillation from the largest step)",
    "index+kd": "`index+kd` is the fixed index partition with the same distillation",
    "importance": "`importance` drops the distillation",
    "slimmable": "`slimmable` (shared weights, switchable BatchNorm, every width every iteration) is a same-MAC baseline",
    "independent": "`independent` (one dense net per step) is a same-MAC baseline",
}
"""What each kind is, in the page's words."""


def _kinds_text(trained: set[str]) -> str:
    """The page's 'Kinds' paragraph: only the kinds this run trained, in the registry's order."""
    described = [_KIND_TEXT[k] for k in KINDS if k in trained and k in _KIND_TEXT]
    return "Kinds trained in this run: " + "; ".join(described) + ". Nothing was selected on the test folds."


def _write_md(out: Path, command: str) -> None:
    rows = read_numbers(out / "stepping.csv")
    lat = read_numbers(out / "stepping-latency.csv")
    macs = read_numbers(out / "stepping-macs.csv")
    run = json.loads((out / "stepping-run.json").read_text())
    made = json.loads((out / PROVENANCE_FILE).read_text()).get("stepping.csv", {})
    acc = _accuracy(rows)
    lines = [
        "# Issue 31: SteppingNet with importance-driven assignment, against the fixed partition, slimmable and independent nets",
        "",
        f"Data: one run of `{made.get('command', '?')}` at commit `{made.get('git', '?')}` ({run['minutes']} min); this page "
        f"is rendered from its files by `{command}`. Machine: {run['cpus']} cores shared with other jobs, torch {run['torch']}, "
        f"{run['threads']} thread. Load (1, 5, 15 min) before the run {run['load_before']}, after {run['load_after']}.",
        "",
        f"Task: cross-validation over every image of the model's data ({run['folds']} folds, each image tested once per seed), "
        f"each fold trained on only {run['train_images']} images drawn from the other folds (a hard split, so accuracy is below "
        f"saturation). Seeds {run['seeds']}: a seed draws the folds, the training images, the initialisation and the batch "
        f"order; every kind sees the same ones. Epochs {run['epochs']}, the zoo's optimiser (AdamW 3e-3, one-cycle, batch 64). "
        f"Step MAC fractions {run['steps']} of the zoo model's MACs. Importance-driven assignment: {run['rounds']} rounds in the "
        f"first 60 % of the optimiser steps, importance measured on {run['importance_images']} training images.",
        "",
        _kinds_text({str(r["kind"]) for r in rows}),
        "",
    ]
    for model in dict.fromkeys(r["model"] for r in rows):
        lines += _model_section(model, rows, acc, run)
    lines += _mac_section(macs)
    lines += _latency_section(lat)
    write_markdown(out / "stepping.md", "\n".join(lines) + "\n", command)


def _model_section(model: str, rows: list[dict[str, Any]], acc: dict[tuple[str, str, int, int], float], run: dict[str, Any]) -> list[str]:
    sub = [r for r in rows if r["model"] == model]
    kinds = list(dict.fromkeys(r["kind"] for r in sub))
    steps = sorted({r["step"] for r in sub})
    seeds = sorted({r["seed"] for r in sub})
    n_images = sum(r["test_images"] for r in sub if r["kind"] == kinds[0] and r["seed"] == seeds[0] and r["step"] == 0)
    lines = [
        f"## {model}: cross-validated test accuracy (% of {n_images:,} images, mean over seeds ± 95 % t half-width)",
        "",
        "| step | target | " + " | ".join(f"{k}: MACs (frac) | {k}" for k in kinds) + " |",
        "|" + "---|" * (2 + 2 * len(kinds)),
    ]
    for s in steps:
        cells = [str(s), str(run["steps"][s])]
        for k in kinds:
            r0 = next(r for r in sub if r["kind"] == k and r["step"] == s)
            cells += [f"{r0['macs']} ({r0['mac_fraction']})", _acc_cell([acc[(model, k, seed, s)] for seed in seeds])]
        lines.append("| " + " | ".join(cells) + " |")
    means = {k: statistics.fmean(acc[(model, k, seed, s)] for seed in seeds for s in steps) for k in kinds}
    worst = min(means.values())
    se2 = 2 * math.sqrt(worst * (100 - worst) / n_images)
    lines += [
        "",
        "Mean over steps and seeds: " + ", ".join(f"{k} {v:.2f} %" for k, v in means.items()) + f". Two binomial standard "
        f"errors of one seed's accuracy over {n_images:,} images at {worst:.1f} %: {se2:.2f} points.",
        "",
        "### Paired differences (points; same seed, folds and images; mean over seeds ± 95 % t half-width; verdict from the interval)",
        "",
        "| comparison | " + " | ".join(f"step {s}" for s in steps) + " | mean over steps | verdict (mean over steps) |",
        "|" + "---|" * (3 + len(steps)),
    ]
    findings = []
    for a, b, what in PAIRS:
        if a not in kinds or b not in kinds:
            continue
        per_step = [[acc[(model, a, seed, s)] - acc[(model, b, seed, s)] for seed in seeds] for s in steps]
        pooled = [statistics.fmean(acc[(model, a, seed, s)] - acc[(model, b, seed, s)] for s in steps) for seed in seeds]
        v = verdict(pooled)
        lines.append(f"| {a} − {b} | " + " | ".join(_cell(d) for d in per_step) + f" | {_cell(pooled)} | {v} |")
        step_v = [verdict(d) for d in per_step]
        findings.append(
            f"- {what}: `{a}` − `{b}` = {_cell(pooled)} points over steps: **{v}**; per step: "
            + ", ".join(f"step {s} {sv}" for s, sv in zip(steps, step_v, strict=True))
            + "."
        )
    moved = [r for r in sub if r["kind"] == METHOD and r["step"] == 0]
    if moved:
        layers = ("conv1", "conv2", "conv3", "fc1")
        avg = {layer: statistics.fmean(r[f"moved_{layer}"] for r in moved) for layer in layers}
        lines += [
            "",
            f"Unit moves of `{METHOD}`, summed over its {moved[0]['rounds']} rounds (a unit moved up in two rounds counts twice; "
            "how many move is set by the shrinking group ends, which units move by importance), mean over seeds and folds: "
            + ", ".join(f"{layer} {avg[layer]:.1f}" for layer in layers)
            + ".",
        ]
    lines += ["", "### Verdicts", "", *findings, ""]
    lines += _reading(model, kinds, seeds, steps, acc)
    return lines


def _acc_cell(values: list[float]) -> str:
    mean, half = _interval(values)
    return f"{mean:.2f}" if math.isnan(half) else f"{mean:.2f} ± {half:.2f}"


def _reading(model: str, kinds: list[str], seeds: list[int], steps: list[int], acc: dict[tuple[str, str, int, int], float]) -> list[str]:
    """The page's conclusion, decided by the verdicts (no number is typed here)."""
    if METHOD not in kinds:
        return []
    verdicts = {}
    for b in ("index+kd", "slimmable", "independent"):
        if b in kinds:
            verdicts[b] = verdict(
                [statistics.fmean(acc[(model, METHOD, seed, s)] - acc[(model, b, seed, s)] for s in steps) for seed in seeds]
            )
    ahead = [b for b, v in verdicts.items() if v == "ahead"]
    behind = [b for b, v in verdicts.items() if v == "behind"]
    noise = [b for b, v in verdicts.items() if v == "inside noise"]
    text = [f"**Reading ({model}).**"]
    if ahead:
        text.append(f"SteppingNet (`{METHOD}`) is ahead of {' and '.join(f'`{b}`' for b in ahead)} beyond the seed interval.")
    if behind:
        text.append(
            f"SteppingNet (`{METHOD}`) is behind {' and '.join(f'`{b}`' for b in behind)} beyond the seed interval: "
            "the published gain does not appear here."
        )
    if noise:
        text.append(f"Against {' and '.join(f'`{b}`' for b in noise)} its difference is inside the noise: no gain is shown.")
    return [" ".join(text), ""]


def _mac_section(macs: list[dict[str, Any]]) -> list[str]:
    lines = [
        "## MACs executed when stepping up",
        "",
        "On seed 0 fold 0's stepping net (after its units were moved). `runner` counts each executed convolution/linear op from "
        "its operand shapes; `FlopCounterMode` is PyTorch's own counter (FLOPs / 2 / batch) around the same call; `budget` is "
        "the step's MAC fraction times the full model's MACs; `restart` is what reaching step s costs without reuse.",
        "",
        "| model | net | step | MAC(s) − MAC(s−1) | runner counted | FlopCounterMode | MAC(s) | budget "
        "| from scratch (FlopCounterMode) | restart |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    restart = 0
    for r in macs:
        restart = (restart if r["step"] else 0) + r["subnet_macs"]
        lines.append(
            f"| {r['model']} | {r['net']} | {r['step']} | {r['plan_mac_diff']} | {r['runner_counted']} | "
            f"{r['flop_counter_macs_per_image']} | {r['subnet_macs']} | {r['target_macs']} | "
            f"{r['scratch_flop_counter_macs_per_image']} | {restart} |"
        )
    equal = all(r["plan_mac_diff"] == r["runner_counted"] == r["flop_counter_macs_per_image"] for r in macs)
    within = all(r["subnet_macs"] <= r["target_macs"] for r in macs)
    return [*lines, "", f"Step-up MACs equal by all three counts: **{equal}**. Every subnet within its MAC budget: **{within}**.", ""]


def _latency_section(lat: list[dict[str, Any]]) -> list[str]:
    lines = [
        "## Stepping overhead in measured latency (ms, medians, one thread)",
        "",
        "`incremental`: stepping up to this step from the one below, cache kept; `cumulative`: start plus every step-up to here; "
        "`scratch`: this stepping subnet from nothing (one op per group per layer); `dense`: the independent dense net of the "
        "same MACs (one op per layer). Interleaved in one loop, on a shared machine (load above).",
        "",
        "| model | batch | step | MACs | incremental | cumulative | scratch | dense same MACs | cumulative / scratch |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for r in lat:
        lines.append(
            f"| {r['model']} | {r['batch']} | {r['step']} | {r['macs']} | {r['incremental_ms']:.3f} | {r['cumulative_ms']:.3f} | "
            f"{r['scratch_ms']:.3f} | {r['dense_same_macs_ms']:.3f} | {r['cumulative_ms'] / r['scratch_ms']:.2f} |"
        )
    lines.append("")
    for model in dict.fromkeys(r["model"] for r in lat):
        for batch in sorted({r["batch"] for r in lat if r["model"] == model}):
            rs = [r for r in lat if r["model"] == model and r["batch"] == batch and r["step"] > 0]
            if not rs:
                continue
            inc = statistics.fmean(r["incremental_ms"] / r["scratch_ms"] for r in rs)
            cum = statistics.fmean(r["cumulative_ms"] / r["scratch_ms"] for r in rs)
            dense = [r["scratch_ms"] / r["dense_same_macs_ms"] for r in rs if r["dense_same_macs_ms"] > 0]
            tail = f", and a stepping subnet from scratch {statistics.fmean(dense):.2f}x the dense net of the same MACs" if dense else ""
            lines.append(
                f"- {model}, batch {batch}: a step-up takes {inc:.2f}x the time of that subnet from scratch, the whole on-the-fly "
                f"path {cum:.2f}x{tail} (steps 1 and up, mean of the medians). Verdict: "
                + (
                    "the on-the-fly path is not faster than recomputing the subnet on this CPU (medians on a shared machine, "
                    "no interval; per-op overhead of eager PyTorch on tiny nets)."
                    if cum > 1
                    else "the on-the-fly path is faster than recomputing the subnet (medians on a shared machine, no interval)."
                )
            )
    return [*lines, ""]
