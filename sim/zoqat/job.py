"""One measured QAT run of a zoo model, optionally in a fresh process so its peak memory is its own.

:func:`run` loads the zoo model, evaluates it in float and at round-to-nearest, trains a quantized copy with one
method inside :class:`sim.zoqat.memory.PeakMemory`, and evaluates the result on the validation and test splits.
:func:`run_isolated` does the same in a new interpreter (``spawn``): nothing another method allocated earlier in
the caller's process can hide in (or inflate) the high-water mark, which is what the bench and the tool use.
"""

from __future__ import annotations

import multiprocessing
import time
from dataclasses import asdict, dataclass
from typing import Any

import torch

from coevo.sim.errors import UserInputError
from coevo.sim.zoqat.config import ZOQAT
from coevo.sim.zoqat.fakequant import check_bits, check_smoothing, quantize
from coevo.sim.zoqat.gptq import gptq
from coevo.sim.zoqat.memory import PeakMemory
from coevo.sim.zoqat.train import METHODS, check_pgap, train


@dataclass(frozen=True)
class Spec:
    """What to run.

    Attributes:
        model: zoo name (``lm-pydoc``, ``lm-pydoc-tiny``, ``cnn-digits``).
        method: spsa, pgap, ste, rtn or gptq.
        train_weights: full ZeroQAT (the Linear weights trained too) instead of the light variant (scales only).
        lr: learning rate (ignored by rtn).
        eval_batches: batches of each split to evaluate (None: the whole split).
        threads: torch threads in the run (None: leave torch's default).
        splits: the splits reported after training (``test`` only when reporting, per the fair-comparison rules).
        train_seed: the zoo model's training seed (None: the recipe's): a seed that varies the trained model too.
    """

    model: str = ZOQAT.model
    w_bits: int = ZOQAT.w_bits
    a_bits: int | None = ZOQAT.a_bits
    method: str = ZOQAT.method
    steps: int = ZOQAT.steps
    lr: float = ZOQAT.spec_lr
    eps: float = ZOQAT.eps
    seed: int = ZOQAT.seed
    batch_size: int = ZOQAT.batch_size
    train_weights: bool = ZOQAT.train_weights
    clip: float | None = None
    eval_batches: int | None = ZOQAT.eval_batches
    threads: int | None = None
    splits: tuple[str, ...] = ("val", "test")
    rank: int = ZOQAT.rank
    refresh: int = ZOQAT.refresh
    probes: int = ZOQAT.probes
    delta: float = 1.0
    train_seed: int | None = None
    smooth_alpha: float | None = ZOQAT.smooth_alpha
    """SmoothQuant-style smoothing factors at this migration strength, trained with the scales (ZeroQAT's
    equivalent transformation); None: none (the default, so earlier results stay reproducible)."""
    untrained: bool = False
    """Use the recipe's architecture at its initial weights on the real data (no zoo training): for memory and
    time per step only, where the trained model is not cached yet; its perplexities mean nothing."""

    def check(self) -> None:
        """Raise :class:`UserInputError` on out-of-domain values."""
        check_bits(self.w_bits, "w_bits")
        check_bits(self.a_bits, "a_bits", allow_none=True)
        if self.method not in METHODS:
            raise UserInputError(f"unknown method {self.method!r}; valid methods: {', '.join(METHODS)}")
        if self.steps < 0 or self.batch_size < 1:
            raise UserInputError(f"steps must be >= 0 and batch_size >= 1, got {self.steps}, {self.batch_size}")
        check_smoothing(self.smooth_alpha, self.method)
        if self.method == "pgap":
            check_pgap(self.rank, self.probes, self.refresh, self.delta)
        bad = set(self.splits) - {"val", "test"}
        if bad:
            raise UserInputError(f"splits must be val and/or test, got {sorted(bad)}")


def run(spec: Spec) -> dict[str, Any]:
    """Run ``spec`` in this process; a flat dict of settings and measurements (JSON-ready)."""
    from coevo.sim.zoo import ZooModel, build, load, recipe  # the zoo trains on first use: import it only when needed
    from coevo.sim.zoo.registry import splits_of

    spec.check()
    if spec.threads:
        torch.set_num_threads(spec.threads)
    if spec.untrained:
        rec = recipe(spec.model)
        zm = ZooModel.from_module(build(rec).eval(), rec["task"], splits_of(rec)[0], spec.model)
    else:
        zm = load(spec.model, train_seed=spec.train_seed)
    quality = zm.metric  # perplexity or accuracy

    def score(model: torch.nn.Module, split: str) -> float:
        return round(float(zm.evaluate(model, split, max_batches=spec.eval_batches)), 4)

    out: dict[str, Any] = {**asdict(spec), "splits": list(spec.splits), "metric": quality, "weights": zm.fingerprint}
    # how many examples each split's score counts (batches of 64, as zm.evaluate scores them): an accuracy's noise needs it
    cap = None if spec.eval_batches is None else 64 * spec.eval_batches
    out["n_scored"] = {s: len(zm.splits[s]) if cap is None else min(len(zm.splits[s]), cap) for s in spec.splits}
    for split in spec.splits:
        out[f"float_{split}"] = score(zm.model, split)
    # a language model's test sequences scored one by one: the tool's verdict pairs them for the test set's noise
    per_sequence = quality == "perplexity" and "test" in spec.splits and not spec.untrained

    def sequences(stage: str, model: torch.nn.Module) -> None:
        if per_sequence:
            out[f"{stage}_test_nll"] = zm.sequence_nll(model, "test", max_batches=spec.eval_batches)

    sequences("float", zm.model)
    calib = []
    for i, (x, _) in enumerate(zm.loader("train", batch_size=spec.batch_size, shuffle=True, seed=spec.seed)):
        if i >= 4:
            break
        calib.append(x)
    torch.manual_seed(spec.seed)
    qmodel = quantize(zm.model, spec.w_bits, spec.a_bits, calib, smooth_alpha=spec.smooth_alpha)
    qmodel.eval()
    for split in spec.splits:
        out[f"rtn_{split}"] = score(qmodel, split)
    sequences("rtn", qmodel)
    loader = zm.loader("train", batch_size=spec.batch_size, shuffle=True, seed=spec.seed)
    with PeakMemory() as memory:
        ptq_started = time.perf_counter()
        if spec.method == "gptq":  # post-training: the weights moved on RTN's grid, from the same calibration batches
            gptq(qmodel, calib)
        ptq_s = time.perf_counter() - ptq_started
        log = train(
            qmodel,
            loader,
            spec.method,
            spec.steps,
            lr=spec.lr,
            eps=spec.eps,
            seed=spec.seed,
            train_weights=spec.train_weights,
            loss_fn=zm.loss,
            clip=spec.clip,
            rank=spec.rank,
            refresh=spec.refresh,
            probes=spec.probes,
            delta=spec.delta,
        )
    started = time.perf_counter()
    for split in spec.splits:
        out[f"after_{split}"] = score(qmodel, split)
    out.update(
        {
            "eval_s": round(time.perf_counter() - started, 2),
            "s_per_step": round(log.s_per_step, 4),
            "train_s": round(log.seconds, 2),
            "ptq_s": round(ptq_s, 2),
            "trainable_values": log.trainable_values,
            "rss_before_train_mb": round(memory.before_mb, 1),
            "peak_rss_train_mb": round(memory.peak_mb, 1),
            "train_peak_added_mb": round(memory.added_mb, 1),
            "peak_reset": memory.resettable,
            "first_loss": round(log.losses[0], 4) if log.losses else None,
            "last_loss": round(sum(log.losses[-10:]) / len(log.losses[-10:]), 4) if log.losses else None,
        }
    )
    sequences("after", qmodel)  # after eval_s was taken: the per-sequence pass is not part of the timed evaluation
    return out


def run_isolated(spec: Spec) -> dict[str, Any]:
    """:func:`run` in a fresh ``spawn``ed interpreter (its peak memory is this run's alone); errors come back raised."""
    spec.check()
    ctx = multiprocessing.get_context("spawn")
    with ctx.Pool(1) as pool:
        return pool.apply(run, (spec,))
