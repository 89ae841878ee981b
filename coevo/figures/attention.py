"""Sparse attention on the zoo LM: perplexity and top-k recall vs k and bits, CPU time and MACs vs length (issue 20, item 1).

Three measurements, each saved to a CSV the report is rendered from:

* ``attention.csv``: perplexity (whole val split, no retraining) of ``lm-pydoc-tiny`` (training
  seeds 0, 1, 2) and ``lm-pydoc`` (seed 0) with every attention layer replaced by top-k with
  quantized Q/K pre-scoring (k x bits grid) or local+global (window x global grid); recall of the
  exact top-k; softmax mass kept. The cheapest setting within 1 % of the dense val perplexity is
  chosen on val and measured once on test.
* ``attention-length.csv``: perplexity vs context length (the first L = 16 ... 128 tokens of each val
  block) of ``lm-pydoc-tiny`` (seeds 0, 1, 2), dense vs sparse.
* ``attention-time.csv``: operator-level CPU time (1 thread, batch 1, d_model 256, 4 heads: lm-pydoc's
  attention) for n = 128 ... 8192, methods interleaved in every repeat, medians; MACs from the formulas.

    nice -n 10 python -m coevo.figures attention              # everything (~30-60 min on 2 busy cores)
    nice -n 10 python -m coevo.figures attention --only time
    python -m coevo.figures attention --report-only           # re-render attention.md from the CSVs
"""

from __future__ import annotations

import argparse
import math
import os
import statistics
import subprocess
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import torch

from coevo.figures._common import (
    command_line,
    figure_parser,
    mean_std,
    read_csv,
    record_provenance,
    write_csv,
    write_markdown,
)
from coevo.sim.attention.config import ATTENTION

NAME = "attention"

QUALITY = "attention.csv"
LENGTH = "attention-length.csv"
TIMING = "attention-time.csv"
FINETUNE = "attention-finetune.csv"
F_FIELDS = ["model", "train_seed", "method", "setting", "steps", "sparse_before", "sparse_after", "dense_before", "dense_after"]
Q_FIELDS = [
    "model", "train_seed", "split", "length", "method", "top_k", "key_bits", "window", "n_global", "perplexity",
    "dense_perplexity", "ppl_change_pct", "recall", "attention_mass", "keys_per_query", "mac_ratio", "lowbit_per_dense_mac", "chosen",
]  # fmt: skip
T_FIELDS = ["length", "method", "repeat", "seconds", "wall_seconds", "mac_full", "lowbit_ops"]
TOPK_GRID = {"lm-pydoc-tiny": ((4, 8, 16, 32, 64), (1, 2, 4, 16)), "lm-pydoc": ((8, 16, 32), (2, 4, 16))}
LG_GRID = ((4, 8, 16, 32, 64), (0, 4))
LG_GRID_SMALL = ((8, 16, 32), (0, 4))
WITHIN = 1.01  # a chosen setting keeps val perplexity within 1 % of dense


def _row(model: str, seed: int, split: str, cfg: Any, r: dict[str, float], d_model: int, n_heads: int, chosen: str = "") -> dict[str, Any]:
    from coevo.sim.attention import attention_flops

    length = int(r["length"])
    f = attention_flops(cfg.method, length, d_model, n_heads, cfg.top_k, cfg.key_bits, cfg.window, cfg.n_global)
    topk, lg = cfg.method == "topk-quantized-keys", cfg.method == "local-global"
    return {
        "model": model, "train_seed": seed, "split": split, "length": length, "method": cfg.method,
        "top_k": cfg.top_k if topk else "", "key_bits": cfg.key_bits if topk else "",
        "window": cfg.window if lg else "", "n_global": cfg.n_global if lg else "",
        "perplexity": round(r["perplexity"], 5), "dense_perplexity": round(r["dense_perplexity"], 5),
        "ppl_change_pct": round(100 * (r["perplexity"] / r["dense_perplexity"] - 1), 4),
        "recall": "" if math.isnan(r["recall"]) else round(r["recall"], 5), "attention_mass": round(r["attention_mass"], 5),
        "keys_per_query": round(r["keys_per_query"], 3), "mac_ratio": round(f["mac_ratio"], 4),
        "lowbit_per_dense_mac": round(f["lowbit_ops"] / f["mac_dense"], 4), "chosen": chosen,
    }  # fmt: skip


def _configs(model: str) -> list[Any]:
    from coevo.sim.attention import SparseConfig

    ks, bits = TOPK_GRID.get(model, TOPK_GRID["lm-pydoc"])
    out = [SparseConfig("dense")]
    out += [SparseConfig("topk-quantized-keys", top_k=k, key_bits=b) for k in ks for b in bits]
    lg = LG_GRID if model == "lm-pydoc-tiny" else LG_GRID_SMALL
    out += [SparseConfig("local-global", window=w, n_global=g) for w in lg[0] for g in lg[1]]
    return out


def measure_quality(out: Path, models: list[str], seeds: dict[str, list[int]]) -> None:
    from coevo.sim.attention import evaluate_sparse_model
    from coevo.sim.zoo import load

    rows: list[dict[str, Any]] = []
    for model in models:
        for seed in seeds.get(model, [0]):
            zm = load(model, train_seed=seed, progress=lambda w, f: print(f"  {w} ({100 * f:.0f} %)", end="\r", flush=True))
            attn = zm.model.blocks[0].attn  # type: ignore[union-attr,index]
            d_model, n_heads = int(attn.q.in_features), int(attn.n_heads)
            val: list[tuple[Any, dict[str, float]]] = []
            dense = {split: zm.evaluate(zm.model, split) for split in ("val", "test")}
            for cfg in _configs(model):
                t = time.perf_counter()
                r = evaluate_sparse_model(zm, cfg, "val", None, dense_perplexity=dense["val"])
                val.append((cfg, r))
                rows.append(_row(model, seed, "val", cfg, r, d_model, n_heads))
                _write(out / QUALITY, Q_FIELDS, rows, append_models=True)  # after every setting: a stopped run keeps what it measured
                print(f"{model} seed {seed} val {cfg}: ppl {r['perplexity']:.4f} (dense {r['dense_perplexity']:.4f}) "
                      f"recall {r['recall']:.3f} mass {r['attention_mass']:.3f} [{time.perf_counter() - t:.1f} s]", flush=True)  # fmt: skip
            # choose on val, test once: the fewest full-precision keys per query within 1 % of dense (then the fewest bits)
            for method in ("topk-quantized-keys", "local-global"):
                ok = [(cfg, r) for cfg, r in val if cfg.method == method and r["perplexity"] <= WITHIN * r["dense_perplexity"]]
                if not ok:
                    continue
                cfg, _ = min(ok, key=lambda cr: (cr[1]["keys_per_query"], cr[0].key_bits, cr[0].n_global))
                r = evaluate_sparse_model(zm, cfg, "test", None, dense_perplexity=dense["test"])
                rows.append(_row(model, seed, "test", cfg, r, d_model, n_heads, chosen="within 1% on val"))
                print(f"{model} seed {seed} TEST {cfg}: ppl {r['perplexity']:.4f} (dense {r['dense_perplexity']:.4f})", flush=True)
            _write(out / QUALITY, Q_FIELDS, rows, append_models=True)


def measure_length(out: Path, model: str, seeds: list[int]) -> None:
    from coevo.sim.attention import SparseConfig, evaluate_sparse_model
    from coevo.sim.zoo import load

    cfgs = [
        SparseConfig("dense"),
        SparseConfig("topk-quantized-keys", top_k=16, key_bits=4),
        SparseConfig("topk-quantized-keys", top_k=ATTENTION.top_k, key_bits=ATTENTION.key_bits),
        SparseConfig("topk-quantized-keys", top_k=32, key_bits=2),
        SparseConfig("local-global", window=ATTENTION.window, n_global=ATTENTION.n_global),
        SparseConfig("local-global", window=16, n_global=4),
    ]
    rows: list[dict[str, Any]] = []
    for seed in seeds:
        zm = load(model, train_seed=seed, progress=lambda w, f: print(f"  {w} ({100 * f:.0f} %)", end="\r", flush=True))
        attn = zm.model.blocks[0].attn  # type: ignore[union-attr,index]
        d_model, n_heads = int(attn.q.in_features), int(attn.n_heads)
        block = int(zm.splits["val"].x.shape[1])
        for length in [n for n in (16, 32, 64, 128, 256, 512) if n <= block]:
            dense = evaluate_sparse_model(zm, cfgs[0], "val", None, length=length)["dense_perplexity"]
            for cfg in cfgs:
                r = evaluate_sparse_model(zm, cfg, "val", None, length=length, dense_perplexity=dense)
                rows.append(_row(model, seed, "val", cfg, r, d_model, n_heads))
                _write(out / LENGTH, Q_FIELDS, rows)
                print(f"{model} seed {seed} L={length} {cfg}: ppl {r['perplexity']:.4f} recall {r['recall']:.3f}", flush=True)
    _write(out / LENGTH, Q_FIELDS, rows)


def measure_finetune(out: Path, model: str, seeds: list[int], steps: int) -> None:
    from coevo.sim.attention import SparseConfig, finetune_sparse
    from coevo.sim.zoo import load

    cfgs = {
        "k=8, 2 bits": SparseConfig("topk-quantized-keys", top_k=8, key_bits=2),
        "window 8, 0 global": SparseConfig("local-global", window=8, n_global=0),
    }
    rows: list[dict[str, Any]] = []
    for seed in seeds:
        zm = load(model, train_seed=seed)
        for setting, cfg in cfgs.items():
            r = finetune_sparse(zm, cfg, steps=steps, seed=seed)
            rows.append(
                {
                    "model": model,
                    "train_seed": seed,
                    "method": cfg.method,
                    "setting": setting,
                    "steps": steps,
                    **{k: round(v, 5) for k, v in r.items()},
                }
            )
            print(f"finetune {model} seed {seed} {setting}: {r}", flush=True)
            _write(out / FINETUNE, F_FIELDS, rows)


def _timers(d_model: int, n_heads: int, top_k: int, bits: int, window: int, n_global: int) -> dict[str, Callable[..., Any]]:
    from coevo.sim.attention import dense_attention, local_global_attention, topk_quantized_attention

    return {
        "dense-sdpa": lambda q, k, v: torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True),
        "dense-materialised": dense_attention,
        f"topk-q{bits}-fp32gemm": lambda q, k, v: topk_quantized_attention(q, k, v, top_k, bits),
        f"topk-q{bits}-int8gemm": lambda q, k, v: topk_quantized_attention(q, k, v, top_k, bits, int8_gemm=True),
        "local-global": lambda q, k, v: local_global_attention(q, k, v, window, n_global),
    }


def measure_time(out: Path, lengths: list[int], repeats: int, d_model: int = 256, n_heads: int = 4) -> None:
    from coevo.sim.attention import attention_flops

    torch.set_num_threads(1)
    top_k, bits, window, n_global = ATTENTION.top_k, ATTENTION.key_bits, ATTENTION.window, ATTENTION.n_global
    timers = _timers(d_model, n_heads, top_k, bits, window, n_global)
    rows: list[dict[str, Any]] = []
    gen = torch.Generator().manual_seed(0)
    for n in lengths:
        q, k, v = torch.randn(3, 1, n_heads, n, d_model // n_heads, generator=gen).unbind(0)
        names = [m for m in timers if not (m == "dense-materialised" and n > 4096)]  # 4 x n^2 floats: 1 GiB at 8192, skipped
        with torch.no_grad():
            for name in names:  # warm-up, and a check that every operator agrees with dense where it should
                timers[name](q, k, v)
            for rep in range(repeats):
                order = names[rep % len(names) :] + names[: rep % len(names)]  # rotate: no method always runs first
                for name in order:
                    # CPU time of this process, not wall time: on a shared, oversubscribed box the wall clock also
                    # counts the time other jobs held the core (tens of ms per time slice)
                    t, w = time.process_time(), time.perf_counter()
                    timers[name](q, k, v)
                    sec, wall = time.process_time() - t, time.perf_counter() - w
                    method = "dense" if name.startswith("dense") else "local-global" if name == "local-global" else "topk-quantized-keys"
                    f = attention_flops(method, n, d_model, n_heads, top_k, bits, window, n_global)
                    rows.append(
                        {
                            "length": n,
                            "method": name,
                            "repeat": rep,
                            "seconds": sec,
                            "wall_seconds": wall,
                            "mac_full": f["mac_sparse"],
                            "lowbit_ops": f["lowbit_ops"],
                        }
                    )
        med = {m: statistics.median(r["seconds"] for r in rows if r["length"] == n and r["method"] == m) for m in names}
        print(f"n={n}: " + ", ".join(f"{m} {1e3 * s:.1f} ms" for m, s in med.items()), flush=True)
        _write(out / TIMING, T_FIELDS, rows)


def _write(path: Path, fields: list[str], rows: list[dict[str, Any]], append_models: bool = False) -> None:
    if append_models and path.exists():  # keep rows of models not measured in this run
        mine = {r["model"] for r in rows}
        rows = [r for r in read_csv(path) if r["model"] not in mine] + rows
    tmp = path.with_suffix(".tmp")  # written whole, then renamed: an interrupted run never leaves half a table
    write_csv(tmp, rows, fields)
    os.replace(tmp, path)


def _read(path: Path) -> list[dict[str, str]]:
    if not path.exists():
        return []
    return read_csv(path)


def fit_exponent(ns: list[int], ts: list[float]) -> float:
    """Slope of log(time) vs log(length): ~1 linear, ~2 quadratic."""
    return float(np.polyfit(np.log(ns), np.log(ts), 1)[0])


def report(out: Path, command: str) -> None:
    """attention.md and its plots from the CSVs in ``out``."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    quality, timing, lengths, tuned = _read(out / QUALITY), _read(out / TIMING), _read(out / LENGTH), _read(out / FINETUNE)
    md = ["# Sparse attention on the zoo LM (issue 20, item 1)", ""]
    md += [
        f"Written by `{command}` from {QUALITY}, {LENGTH}, {FINETUNE} and {TIMING} (beside this file), measured with "
        "`nice -n 10 python -m coevo.figures attention` and `--only time`, `--only quality --models "
        "lm-pydoc-tiny` (training seeds 0 1 2), `--only length --length-seeds 0 1 2`, `--only finetune --tiny-seeds 0`. "
        "Machine: a 2-core CPU shared with ~8 other engineers' jobs (load average 10 to 28 while measuring; "
        f"when this report was written: `{_uptime()}`), 1 torch thread. Training seeds as listed; "
        "evaluation is deterministic (no sampling). No retraining: the trained weights run with the sparse operator in every "
        "attention layer. See docs/attention.md for the operators.",
        "",
    ]
    if quality:
        md += _quality_tables(quality, plt, out)
    if "lm-pydoc" not in {r["model"] for r in quality}:
        md += [
            "## lm-pydoc: not measured in this run",
            "",
            "The 3.3 M-parameter `lm-pydoc` trains on first use; on the shared box of this run its training got about 5 "
            "CPU-minutes in 50 minutes of wall time and was stopped, so the k x bits grid is on `lm-pydoc-tiny` only. "
            "`python -m coevo.figures attention --only quality --models lm-pydoc` adds it (the tool serves it too).",
            "",
        ]
    if lengths:
        md += _length_table(lengths, plt, out)
    if tuned:
        md += _finetune_table(tuned)
    if timing:
        md += _timing_tables(timing, plt, out)
    md += [
        "## Where the published gains do not appear",
        "",
        "- The paper's 80.2x over CPU, 2.6x over GPU and 4x energy efficiency are FPGA measurements of a whole accelerator "
        "(pipelined PEs, on-chip buffers, length-aware scheduling). None of that hardware exists here, so none of those "
        "numbers is reproduced or claimed. What is measured here is the algorithmic side: how much accuracy the sparse "
        "operators cost on a real (small) LM, and how their operation counts and CPU time scale.",
        "- On this CPU the top-k method is **not** faster than torch's fused dense attention (dense-sdpa) at any "
        "measured length; it only beats the materialised dense reference at long lengths, where that one writes n^2 "
        "scores to memory. Its pre-scoring still computes every (query, key) product, in 4-bit integers that the CPU "
        "runs as a float32 GEMM (or an int8 GEMM, which is not faster "
        "here either), and then pays for the top-k selection and a gather. Its saving is in full-precision MACs (linear in "
        "n) and would need a low-bit datapath (FPGA LUTs/DSP packing) to become time; the quadratic low-bit part stays.",
        "- Local+global is linear in everything and does get faster than dense as n grows on this CPU; at the zoo model's "
        "own length (128 tokens) the saving is small, and dense SDPA (a fused kernel) is faster than any of the gather-based "
        "sparse operators below a few hundred tokens.",
        "- The models are small (byte-level, 128-token blocks): perplexity costs at the lengths (thousands of tokens) "
        "where sparse attention pays off are not measured on a trained model here; the time/MAC curves are "
        "operator-level with lm-pydoc's dimensions on random inputs.",
        "",
    ]
    write_markdown(out / "attention.md", "\n".join(md), command)
    print(f"wrote {out / 'attention.md'}")


def _uptime() -> str:
    try:
        return subprocess.run(["uptime"], capture_output=True, text=True, check=False).stdout.strip()
    except OSError:
        return "unknown"


def _f(x: str, nd: int = 3) -> str:
    return "" if x == "" else f"{float(x):.{nd}f}"


def _quality_tables(rows: list[dict[str, str]], plt: Any, out: Path) -> list[str]:
    md: list[str] = []
    for model in sorted({r["model"] for r in rows}, key=lambda m: (m != "lm-pydoc", m)):
        val = [r for r in rows if r["model"] == model and r["split"] == "val"]
        per_seed = {seed: sum(r["train_seed"] == seed for r in val) for seed in {r["train_seed"] for r in val}}
        partial = sorted(seed for seed, count in per_seed.items() if count < max(per_seed.values()))
        val = [r for r in val if r["train_seed"] not in partial]  # a seed whose grid was stopped would mix 1- and 2-seed cells
        seeds = sorted({r["train_seed"] for r in val})
        dense = [float(r["dense_perplexity"]) for r in val if r["method"] == "dense"]
        length = val[0]["length"]
        md += [f"## {model}: perplexity and recall vs k and bits (val split, length {length})", ""]
        md += [f"Training seeds {', '.join(seeds)} ({'mean ± std over seeds' if len(seeds) > 1 else 'one seed'}). "
               f"Dense val perplexity {mean_std(dense, 3)}. `Δppl %` = perplexity change vs dense; recall = share of the exact "
        "top-k keys kept (over queries that see more than k keys); mass = exact softmax mass on the kept keys; "
        "`dense/sparse full MACs` = full-precision attention MACs of dense over sparse at this length. The top-k "
        "method also pays d_model low-bit MACs per visible (query, key) pair for the pre-scoring, whatever k: half "
        "the dense full-precision MAC count, in key_bits-bit operations.", ""]  # fmt: skip
        if partial:
            md += [f"(Training seed(s) {', '.join(partial)} were stopped part-way through the grid and are left out.)", ""]
        md += ["| k | bits | perplexity | Δppl % | recall | mass | dense/sparse full MACs |", "|---|---|---|---|---|---|---|"]
        ks = sorted({int(r["top_k"]) for r in val if r["method"] == "topk-quantized-keys"})
        bits = sorted({int(r["key_bits"]) for r in val if r["method"] == "topk-quantized-keys"})
        fig, axes = plt.subplots(1, 2, figsize=(10, 4))
        for b in bits:
            ys, rs = [], []
            for k in ks:
                sel = [r for r in val if r["method"] == "topk-quantized-keys" and int(r["top_k"]) == k and int(r["key_bits"]) == b]
                if not sel:
                    continue
                p = [float(r["perplexity"]) for r in sel]
                d = [float(r["ppl_change_pct"]) for r in sel]
                rc = [float(r["recall"]) for r in sel]
                ms = [float(r["attention_mass"]) for r in sel]
                md.append(
                    f"| {k} | {b} | {mean_std(p, 3)} | {mean_std(d, 3)} | {mean_std(rc, 3)} | {mean_std(ms, 3)} | "
                    f"{float(sel[0]['mac_ratio']):.2f}x |"
                )
                ys.append(statistics.mean(p))
                rs.append(statistics.mean(rc))
            axes[0].plot(ks[: len(ys)], ys, marker="o", label=f"{b}-bit pre-scores")
            axes[1].plot(ks[: len(rs)], rs, marker="o", label=f"{b}-bit")
        axes[0].axhline(statistics.mean(dense), color="k", ls="--", label="dense")
        md += ["", "| window | global | perplexity | Δppl % | mass | dense/sparse full MACs |", "|---|---|---|---|---|---|"]
        for g in sorted({int(r["n_global"]) for r in val if r["method"] == "local-global"}):
            xs, ys = [], []
            for w in sorted({int(r["window"]) for r in val if r["method"] == "local-global"}):
                sel = [r for r in val if r["method"] == "local-global" and int(r["window"]) == w and int(r["n_global"]) == g]
                p = [float(r["perplexity"]) for r in sel]
                md.append(f"| {w} | {g} | {mean_std(p, 3)} | {mean_std([float(r['ppl_change_pct']) for r in sel], 3)} | "
                          f"{mean_std([float(r['attention_mass']) for r in sel], 3)} | {float(sel[0]['mac_ratio']):.2f}x |")  # fmt: skip
                xs.append(w)
                ys.append(statistics.mean(p))
            axes[0].plot(xs, ys, marker="s", ls=":", label=f"local window (+{g} global)")
        axes[0].set(xscale="log", xlabel="keys kept per query (k or window)", ylabel="val perplexity", title=model)
        axes[1].set(xscale="log", xlabel="k", ylabel="recall of exact top-k", title=f"{model}: recall")
        axes[0].legend(fontsize=7)
        axes[1].legend(fontsize=7)
        fig.tight_layout()
        png = f"attention-ppl-{model}.png"
        fig.savefig(out / png, dpi=110)
        plt.close(fig)
        md += ["", f"![perplexity and recall vs k]({png})", ""]
        md += _reading(val)
        test = [r for r in rows if r["model"] == model and r["split"] == "test"]
        if test:
            md += ["Chosen on val (fewest full-precision keys per query within 1 % of dense val perplexity), measured once on test:", ""]
            md += [
                "| seed | method | setting | test ppl | dense test ppl | Δppl % | keys/query | dense/sparse full MACs |",
                "|---|---|---|---|---|---|---|---|",
            ]
            for r in test:
                setting = (
                    f"k={r['top_k']}, {r['key_bits']} bits"
                    if r["method"] == "topk-quantized-keys"
                    else f"window {r['window']}, {r['n_global']} global"
                )
                md.append(f"| {r['train_seed']} | {r['method']} | {setting} | {_f(r['perplexity'])} | {_f(r['dense_perplexity'])} | "
                          f"{_f(r['ppl_change_pct'], 2)} | {_f(r['keys_per_query'], 1)} | {_f(r['mac_ratio'], 2)}x |")  # fmt: skip
            md.append("")
    return md


def _reading(val: list[dict[str, str]]) -> list[str]:
    """A few plain sentences read off the table (the numbers come from the rows, not from hand)."""

    def cell(k: int, b: int) -> dict[str, float] | None:
        sel = [r for r in val if r["method"] == "topk-quantized-keys" and int(r["top_k"]) == k and int(r["key_bits"]) == b]
        if not sel:
            return None
        return {f: statistics.mean(float(r[f]) for r in sel) for f in ("ppl_change_pct", "recall", "attention_mass")}

    bits = sorted({int(r["key_bits"]) for r in val if r["method"] == "topk-quantized-keys"})
    lo, hi = cell(32, bits[0]), cell(32, bits[-1])
    lg = [r for r in val if r["method"] == "local-global"]
    out = ["Reading:", ""]
    if lo and hi:
        out.append(
            f"- At k = 32, {bits[0]}-bit pre-scores find {100 * lo['recall']:.0f} % of the exact top-32 and {bits[-1]}-bit ones "
            f"{100 * hi['recall']:.0f} %, yet perplexity moves by {lo['ppl_change_pct']:+.2f} % vs {hi['ppl_change_pct']:+.2f} %: "
            "the keys low-bit pre-scores miss carry little softmax mass. Perplexity follows k (the mass kept) far more than bits."
        )
    if lg:
        groups: dict[tuple[str, str], list[dict[str, str]]] = {}
        for r in lg:
            groups.setdefault((r["window"], r["n_global"]), []).append(r)
        (w, g), sel = min(groups.items(), key=lambda kv: statistics.mean(float(r["ppl_change_pct"]) for r in kv[1]))
        change = statistics.mean(float(r["ppl_change_pct"]) for r in sel)
        mass = statistics.mean(float(r["attention_mass"]) for r in sel)
        out.append(
            f"- A fixed local window is as good as dense on this model (best on average over seeds: window {w}, {g} global, "
            f"{change:+.2f} %) although it keeps only {100 * mass:.0f} % of the exact "
            "softmax mass: a byte-level LM on 128-token blocks predicts mostly from the last few bytes, so this test cannot "
            "separate content-based selection (top-k) from a fixed pattern; longer-range models would."
        )
    return [*out, ""]


def _length_table(rows: list[dict[str, str]], plt: Any, out: Path) -> list[str]:
    model = rows[0]["model"]
    seeds = sorted({r["train_seed"] for r in rows})
    md = [f"## {model}: perplexity vs context length (val, first L tokens of each block)", ""]
    md += [f"Training seeds {', '.join(seeds)}. The same text at every length; longer contexts keep a smaller share of keys.", ""]
    lengths = sorted({int(r["length"]) for r in rows})

    def label(r: dict[str, str]) -> str:
        if r["method"] == "dense":
            return "dense"
        if r["method"] == "topk-quantized-keys":
            return f"top-{r['top_k']}, {r['key_bits']}-bit"
        return f"window {r['window']} + {r['n_global']} global"

    labels = list(dict.fromkeys(label(r) for r in rows))
    md += ["| method | " + " | ".join(f"L={n}" for n in lengths) + " |", "|---|" + "---|" * len(lengths)]
    fig, ax = plt.subplots(figsize=(6, 4))
    for lab in labels:
        cells, ys = [], []
        for n in lengths:
            p = [float(r["perplexity"]) for r in rows if label(r) == lab and int(r["length"]) == n]
            cells.append(mean_std(p, 3))
            ys.append(statistics.mean(p))
        md.append(f"| {lab} | " + " | ".join(cells) + " |")
        ax.plot(lengths, ys, marker="o", label=lab, ls="--" if lab == "dense" else "-")
    ax.set(xscale="log", xlabel="context length (tokens)", ylabel="val perplexity", title=f"{model}: dense vs sparse")
    ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(out / "attention-ppl-length.png", dpi=110)
    plt.close(fig)
    return [*md, "", "![perplexity vs length](attention-ppl-length.png)", ""]


def _finetune_table(rows: list[dict[str, str]]) -> list[str]:
    steps = rows[0]["steps"]
    md = [f"## {rows[0]['model']}: a short fine-tune ({steps} steps) with the sparse operator in place (val)", ""]
    md += ["Everything else in this note is without retraining. Here the sparse model and, as the fair baseline, the dense "
           f"model get the same {steps} AdamW steps (lr 3e-4, batch 16, the same batches and seed). `recovered` = share of the "
           "sparse model's perplexity gap to the (fine-tuned) dense model closed by fine-tuning.", ""]  # fmt: skip
    md += ["| seed | setting | sparse before | sparse after | dense before | dense after | recovered |", "|---|---|---|---|---|---|---|"]
    for r in rows:
        sb, sa, db, da = (float(r[k]) for k in ("sparse_before", "sparse_after", "dense_before", "dense_after"))
        gap0, gap1 = sb - db, sa - da
        rec = f"{100 * (1 - gap1 / gap0):.0f} %" if gap0 > 0 else "no gap"
        md.append(f"| {r['train_seed']} | {r['setting']} | {sb:.3f} | {sa:.3f} | {db:.3f} | {da:.3f} | {rec} |")
    return [*md, ""]


def _timing_tables(rows: list[dict[str, str]], plt: Any, out: Path) -> list[str]:
    methods = list(dict.fromkeys(r["method"] for r in rows))
    lengths = sorted({int(r["length"]) for r in rows})
    reps = len({r["repeat"] for r in rows})
    med = {
        (m, n): statistics.median(float(r["seconds"]) for r in rows if r["method"] == m and int(r["length"]) == n)
        for m in methods
        for n in lengths
        if any(r["method"] == m and int(r["length"]) == n for r in rows)
    }
    macs = {(r["method"], int(r["length"])): (float(r["mac_full"]), float(r["lowbit_ops"])) for r in rows}
    md = ["## CPU time and operation counts vs length (one attention layer, d_model 256, 4 heads, batch 1)", ""]
    md += [f"Median of {reps} repeats per cell, methods interleaved (rotated order) in every repeat on random q, k, v; "
           "1 torch thread; time = CPU time of the process (time.process_time), not wall time, because the box is oversubscribed. "
           "top-k: k = 32, 4-bit pre-scores (fp32 GEMM on the integer codes, or int8 GEMM via "
           "torch._int_mm); local-global: window 32 + 4 global tokens. `dense-sdpa` is torch's fused causal attention, "
           "`dense-materialised` builds the n x n scores (skipped above 4,096: 1 GiB). Exponent = slope of log time vs "
           "log n over n >= 1024 (1 = linear, 2 = quadratic).", ""]  # fmt: skip
    md += [
        "| n | "
        + " | ".join(f"{m} ms" for m in methods)
        + " | full MACs dense | full MACs top-k | low-bit MACs top-k | full MACs local-global |"
    ]
    md.append("|---|" + "---|" * (len(methods) + 4))
    for n in lengths:
        cells = [f"{1e3 * med[(m, n)]:.2f}" if (m, n) in med else "–" for m in methods]
        d = macs.get(("dense-sdpa", n), (math.nan, 0))[0]
        t = next((macs[(m, n)] for m in methods if m.startswith("topk") and (m, n) in macs), (math.nan, math.nan))
        lg = macs.get(("local-global", n), (math.nan, 0))[0]
        md.append(f"| {n} | " + " | ".join(cells) + f" | {d:.3g} | {t[0]:.3g} | {t[1]:.3g} | {lg:.3g} |")
    md += ["", "| method | fitted exponent (time, n >= 1024) | slope of the last doubling | time ratio to dense-sdpa at the longest n |"]
    md.append("|---|---|---|---|")
    fig, axes = plt.subplots(1, 2, figsize=(10, 4))
    longest = max(lengths)
    for m in methods:
        ns = [n for n in lengths if (m, n) in med and n >= 1024]
        exp = fit_exponent(ns, [med[(m, n)] for n in ns]) if len(ns) >= 2 else math.nan
        top = max(n for n in lengths if (m, n) in med)
        ratio = med[(m, top)] / med[("dense-sdpa", top)] if ("dense-sdpa", top) in med else math.nan
        half = top // 2
        last = math.log2(med[(m, top)] / med[(m, half)]) if (m, half) in med else math.nan
        md.append(
            f"| {m} | {exp:.2f} | {last:.2f} ({half} -> {top}) | {ratio:.2f}x at n={top}{'' if top == longest else ' (longest measured)'} |"
        )
        xs = [n for n in lengths if (m, n) in med]
        axes[0].plot(xs, [1e3 * med[(m, n)] for n in xs], marker="o", label=f"{m} (slope {exp:.2f})")
    axes[0].set(xscale="log", yscale="log", xlabel="sequence length n", ylabel="median CPU time (ms)", title="time, 1 thread")
    axes[0].legend(fontsize=7)
    for key, lab, idx in (("dense-sdpa", "dense (full precision)", 0), ("local-global", "local-global (full precision)", 0)):
        xs = [n for n in lengths if (key, n) in macs]
        axes[1].plot(xs, [macs[(key, n)][idx] for n in xs], marker="o", label=lab)
    tk = next((m for m in methods if m.startswith("topk")), None)
    if tk:
        xs = [n for n in lengths if (tk, n) in macs]
        axes[1].plot(xs, [macs[(tk, n)][0] for n in xs], marker="o", label="top-k (full precision)")
        axes[1].plot(xs, [macs[(tk, n)][1] for n in xs], marker="x", ls=":", label="top-k pre-scoring (4-bit MACs)")
    axes[1].set(xscale="log", yscale="log", xlabel="sequence length n", ylabel="MACs per layer", title="operation counts")
    axes[1].legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(out / "attention-time.png", dpi=110)
    plt.close(fig)
    return [*md, "", "![time and MACs vs length](attention-time.png)", ""]


def parser() -> argparse.ArgumentParser:
    """The figure's options; the first model and the length model are the family's (``ATTENTION.model``)."""
    ap = figure_parser(NAME, __doc__)
    ap.add_argument("--only", choices=["quality", "length", "time", "finetune"], action="append", help="run only these parts (repeatable)")
    ap.add_argument("--models", nargs="+", default=[ATTENTION.model, "lm-pydoc"])
    ap.add_argument("--tiny-seeds", nargs="+", type=int, default=[0, 1, 2])
    ap.add_argument("--length-model", default=ATTENTION.model)
    ap.add_argument("--length-seeds", nargs="+", type=int, default=[0, 1, 2])
    ap.add_argument("--lengths", nargs="+", type=int, default=[128, 256, 512, 1024, 2048, 4096, 8192])
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--finetune-steps", type=int, default=100)
    return ap


def main(argv: list[str] | None = None) -> None:
    """Measure the parts asked for (unless ``--report-only``), then write attention.md."""
    args = parser().parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    command = command_line(NAME, argv)
    if not args.report_only:
        torch.set_num_threads(1)
        parts = args.only or ["quality", "length", "time", "finetune"]
        if "time" in parts:
            measure_time(args.out, args.lengths, args.repeats)
        if "quality" in parts:
            measure_quality(args.out, args.models, {"lm-pydoc-tiny": args.tiny_seeds})
        if "length" in parts:
            measure_length(args.out, args.length_model, args.length_seeds)
        if "finetune" in parts:
            measure_finetune(args.out, "lm-pydoc-tiny", args.tiny_seeds, args.finetune_steps)
        files = {"time": TIMING, "quality": QUALITY, "length": LENGTH, "finetune": FINETUNE}
        for part in parts:
            record_provenance(args.out / files[part], command)
    report(args.out, command)
