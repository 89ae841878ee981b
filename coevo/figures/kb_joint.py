"""What ``--kb-from`` a single-family study does to a joint search (issue 32, item 5): nb201 -> nb201-accel, quant -> deploy-cnn.

    python -m coevo.figures kb-joint --seeds 3
    python -m coevo.figures kb-joint --report-only

Two pairs, each a source study of one part of a composed problem, then per seed the joint search
alone and seeded with ``--kb-from`` the source:

* **nb201 -> nb201-accel**: the source ``coevo search --problem nb201 --dataset cifar10 --device
  fpga --proposer pelnas --budget 100 --seed 0`` (the ``cell`` part, which predicts the joint
  accuracy); the joint ``coevo search --problem nb201-accel --dataset cifar10 --proposer pelnas
  --budget 40``, seeded with its evaluations (``--kb-from-use`` left at its default: its paid
  cifar10 accuracies label the cell part's accuracy in the joint predictor); scored by the HV
  ratio against nb201-accel's exact (accuracy, latency_ms) front;
* **quant -> deploy-cnn**: the source ``coevo search --problem quant --finetune-epochs 0
  --proposer pelnas --budget 40 --seed 0`` (the ``bits`` part of the same CNN); the joint
  ``coevo search --problem deploy-cnn --proposer pelnas --budget 24``, seeded with its heuristics
  (all a study of this part gives: :mod:`search.transfer`); deploy-cnn has no exact front, so each
  is scored by its pooled HV ratio (:func:`search.bench.pooled_scorer`: the HV of its found
  (accuracy, energy_uj) front over the HV of every joint run's fronts pooled, the reference point
  deploy-cnn's acquisition bounds), and the seeded runs say what became of the imported heuristics
  (:mod:`knowledge.imported`: held, did not hold, open, not tested here).

The same-seed difference (seeded minus alone) gets a 95 % t interval. Each command runs in a fresh
process on one temporary SQLite file, the offline reasoner (no LLM). Writes ``kb-joint.csv`` (one
row per search) and ``kb-joint.md`` rendered from it.
"""

from __future__ import annotations

import shlex
import tempfile
from collections import Counter
from pathlib import Path
from typing import Any

from coevo.figures._common import command_line, figure_parser, offline_search, read_numbers, write_csv, write_markdown
from coevo.search.stats import excludes_zero, format_interval

NAME = "kb-joint"
CSV, MD = "kb-joint.csv", "kb-joint.md"
NB201, QUANT = "nb201 -> nb201-accel", "quant -> deploy-cnn"
SOURCE_STUDY = "nb201-cifar10-fpga-pelnas-s0"
SOURCE = ["search", "--problem", "nb201", "--dataset", "cifar10", "--device", "fpga", "--proposer", "pelnas", "--budget", "100"]
JOINT = ["search", "--problem", "nb201-accel", "--dataset", "cifar10", "--proposer", "pelnas", "--budget", "40"]
QUANT_STUDY = "quant-cnn-digits-rtn-pelnas-s0"
QUANT_SOURCE = ["search", "--problem", "quant", "--finetune-epochs", "0", "--proposer", "pelnas", "--budget", "40"]
DEPLOY = ["search", "--problem", "deploy-cnn", "--proposer", "pelnas", "--budget", "24"]
SCORES = {NB201: "HV ratio against nb201-accel's exact (accuracy, latency_ms) front", QUANT: "pooled HV ratio"}


def _row(pair: str, arm: str, seed: int, args: list[str], result: dict[str, Any], imported: str = "") -> dict[str, Any]:
    return {
        "pair": pair,
        "arm": arm,
        "seed": seed,
        "hv_ratio": result["hv_ratio"],
        "front_recall": result["front_recall"],
        "evaluations": result["evaluations"],
        "wall_s": result["wall_s"],
        "transferred": "; ".join(result["information"]["transferred"]),
        "imported": imported,
        "command": shlex.join(["coevo", *args]),
    }


def measure(seeds: int) -> list[dict[str, Any]]:
    """Both pairs: the source study, then the joint search alone and seeded on each seed; one row per search."""
    with tempfile.TemporaryDirectory() as tmp:
        storage = f"sqlite:///{Path(tmp) / 's.sqlite3'}"
        return _nb201(seeds, storage) + _quant(seeds, storage)


def _nb201(seeds: int, storage: str) -> list[dict[str, Any]]:
    source = [*SOURCE, "--seed", "0", "--study", SOURCE_STUDY]
    rows = [_row(NB201, "source", 0, source, offline_search(source, storage))]
    for seed in range(seeds):
        alone = [*JOINT, "--seed", str(seed)]
        seeded = [*alone, "--kb-from", SOURCE_STUDY]
        rows.append(_row(NB201, "alone", seed, alone, offline_search(alone, storage)))
        rows.append(_row(NB201, "kb-from", seed, seeded, offline_search(seeded, storage)))
    return rows


def _quant(seeds: int, storage: str) -> list[dict[str, Any]]:
    """The quant pair; each joint run's HV ratio is its pooled one, computed once every joint run's front is known."""
    from coevo.search.bench import pooled_scorer
    from coevo.search.deploy_cnn.problem import DeployCnnProblem

    source = [*QUANT_SOURCE, "--seed", "0", "--study", QUANT_STUDY]
    rows = [_row(QUANT, "source", 0, source, offline_search(source, storage))]
    fronts: list[list[dict[str, Any]]] = []
    for seed in range(seeds):
        alone = [*DEPLOY, "--seed", str(seed)]
        seeded = [*alone, "--kb-from", QUANT_STUDY]
        for arm, args in (("alone", alone), ("kb-from", seeded)):
            result = offline_search(args, storage)
            fronts.append(result["front"])
            rows.append(_row(QUANT, arm, seed, args, result, _verdicts(storage, result["study"]) if arm == "kb-from" else ""))
    score = pooled_scorer(DeployCnnProblem(), fronts)
    assert score is not None  # deploy-cnn has acquisition bounds, and a front of paid designs has HV above them
    for row, front in zip(rows[1:], fronts, strict=True):
        row["hv_ratio"] = score(front)
    return rows


def _verdicts(storage: str, study: str) -> str:
    """What became of the heuristics a seeded search imported (:func:`knowledge.imported.imported_heuristics`), counted by verdict."""
    from coevo.knowledge.imported import VERDICTS, imported_heuristics
    from coevo.knowledge.store import KnowledgeStore

    items = imported_heuristics(KnowledgeStore.for_storage(storage), study)
    tally = Counter(i.verdict for i in items)
    return f"{len(items)} imported: " + ", ".join(f"{tally[v]} {v}" for v in VERDICTS if tally[v])


def render(rows: list[dict[str, Any]]) -> str:
    """The markdown, from the saved rows (rows without a pair are of the nb201 pair: the page's first version)."""
    out = ["# `--kb-from` a single-family study into a joint search (issue 32, item 5)", ""]
    for pair in (NB201, QUANT):
        mine = [r for r in rows if r.get("pair", NB201) == pair]
        if mine:
            out += _section(pair, mine)
    return "\n".join(out)


def _section(pair: str, rows: list[dict[str, Any]]) -> list[str]:
    """One pair's table: the HV ratio alone and seeded per seed, and the differences' interval."""
    source = next(r for r in rows if r["arm"] == "source")
    alone = {int(r["seed"]): float(r["hv_ratio"]) for r in rows if r["arm"] == "alone"}
    seeded = {int(r["seed"]): r for r in rows if r["arm"] == "kb-from"}
    seeds = sorted(set(alone) & set(seeded))
    diffs = [float(seeded[s]["hv_ratio"]) - alone[s] for s in seeds]
    verdict = "the interval excludes 0" if excludes_zero(diffs) else "the interval includes 0"
    study = str(source["command"]).rsplit("--study ", 1)[-1]
    scored = f"HV ratio {float(source['hv_ratio']):.4f}" if source["hv_ratio"] not in ("", None) else "no exact front"
    first = next(r for r in rows if r["arm"] == "alone")
    out = [
        f"## {pair}",
        "",
        f"Source: `{source['command']}` ({scored}). Each joint search `{first['command']}` ran alone and with "
        f"`--kb-from {study}`; {SCORES[pair]}"
        + (
            " (its found (accuracy, energy_uj) front's HV over the HV of every joint run's fronts pooled; reference point "
            "deploy-cnn's acquisition bounds)."
            if pair == QUANT
            else "."
        ),
        "",
        "| seed | alone | with --kb-from | difference |",
        "|---:|---:|---:|---:|",
    ]
    for s, d in zip(seeds, diffs, strict=True):
        out.append(f"| {s} | {alone[s]:.4f} | {float(seeded[s]['hv_ratio']):.4f} | {d:+.4f} |")
    out += [
        "",
        f"Same-seed difference (with minus alone), mean ± 95 % t half-width over {len(seeds)} seeds: "
        f"**{format_interval(diffs)}** ({verdict}).",
        "",
        f"What the seeded searches used from the source: {seeded[seeds[0]]['transferred'] or 'its heuristics only (no evaluations)'}.",
        "",
    ]
    imported = [f"seed {s}: {seeded[s]['imported']}" for s in seeds if seeded[s].get("imported")]
    if imported:
        said = "; ".join(imported)
        out += [f"What became of the imported heuristics in each seeded search (`coevo kb report`'s verdicts): {said}.", ""]
    return out


def main(argv: list[str] | None = None) -> int:
    p = figure_parser(NAME, __doc__)
    p.add_argument("--seeds", type=int, default=3, help="seeds of each joint search, each run alone and seeded (default: 3)")
    args = p.parse_args(argv)
    out: Path = args.out
    command = command_line(NAME, argv)
    if not args.report_only:
        write_csv(out / CSV, measure(args.seeds), command=command)
    print(write_markdown(out / MD, render(read_numbers(out / CSV)), command))
    return 0
