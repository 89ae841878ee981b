"""Zeroth-order quantization-aware training of a zoo model (``quant.zo_qat``)."""

from __future__ import annotations

from typing import Any, ClassVar, Literal

from pydantic import Field

from coevo.search.errors import UserInputError
from coevo.search.problem import config_field
from coevo.search.stats import effect_verdict, paired_log_ratio
from coevo.search.work_progress import report
from coevo.sim.zoo import ZooError
from coevo.sim.zoqat.config import DEFAULT_LR, ZoQatConfig
from coevo.sim.zoqat.job import Spec, run, run_isolated
from coevo.tools._base import Tool, ToolArgs, ToolResult


class ZoQatArgs(ToolArgs):
    """Arguments of ``quant.zo_qat``: the zoo model, the weight and activation bits, the zeroth-order estimator and its budget."""

    model: str = config_field(
        ZoQatConfig, "model", description="zoo model: lm-pydoc, lm-pydoc-tiny (byte LMs) or cnn-digits (its Linear layers)"
    )
    w_bits: int = config_field(ZoQatConfig, "w_bits")
    a_bits: int | None = config_field(
        ZoQatConfig, "a_bits", description="bits of every Linear layer's input, per tensor; null: float activations"
    )
    steps: int = config_field(ZoQatConfig, "steps", description="training steps, one batch each (rtn and gptq ignore them)")
    method: Literal["spsa", "pgap", "ste", "rtn", "gptq"] = config_field(
        ZoQatConfig,
        "method",
        description="spsa: two-point zeroth-order (MeZO-style, seeds only, no backprop); pgap: P-GAP, perturbations "
        "aligned with the projected gradient inside each weight matrix's low-rank gradient space (re-estimated every "
        "refresh steps from probes full-space probes, charged to the steps; needs train_weights to differ from spsa); "
        "ste: backprop QAT with the straight-through "
        "estimator (Adam); rtn: round-to-nearest, no training; gptq: GPTQ post-training quantization (Hessian "
        "error compensation on RTN's grid), no training",
    )
    lr: float | None = Field(None, gt=0, description="learning rate; null: the method's default chosen on the validation split")
    eps: float = config_field(ZoQatConfig, "eps")
    seed: int = config_field(ZoQatConfig, "seed")
    batch_size: int = config_field(ZoQatConfig, "batch_size")
    train_weights: bool = config_field(ZoQatConfig, "train_weights")
    rank: int = config_field(ZoQatConfig, "rank")
    probes: int = config_field(ZoQatConfig, "probes")
    refresh: int = config_field(ZoQatConfig, "refresh")
    smooth_alpha: float | None = config_field(ZoQatConfig, "smooth_alpha")
    eval_batches: int | None = config_field(
        ZoQatConfig, "eval_batches", description="batches (of 64) of val and test to evaluate; null: the whole split"
    )
    isolate: bool = Field(True, description="run in a fresh process so the peak memory measured is this run's alone")


class ZoQat(Tool):
    """Zeroth-order QAT (SPSA, P-GAP; light or full) vs first-order STE QAT vs RTN and GPTQ on a zoo model: quality, peak memory, s/step."""

    name = "quant.zo_qat"
    measured_fields = frozenset({"s_per_step", "train_s", "peak_rss_mb", "train_peak_added_mb"})
    description = (
        "Quantize a zoo model's Linear layers (weights per channel at w_bits, inputs per tensor at a_bits, learnable "
        "LSQ-style scales starting at round-to-nearest) and train the scales with a zeroth-order two-point SPSA estimator "
        "(no backprop, no optimizer state, perturbations regenerated from seeds), P-GAP (perturbations aligned with "
        "the projected gradient in each weight matrix's low-rank gradient space), or first-order straight-through QAT, "
        "optionally with the weights too (train_weights: full ZeroQAT); rtn and gptq are the untrained post-training "
        "baselines. Returns perplexity (or accuracy) "
        "in float, at RTN and after training on val and test, the measured peak resident memory of training and "
        "seconds per step."
    )
    Args = ZoQatArgs
    example: ClassVar[dict[str, Any]] = {
        "model": "lm-pydoc-tiny",
        "w_bits": 4,
        "a_bits": 8,
        "steps": 4,
        "method": "spsa",
        "eval_batches": 1,
        "isolate": False,
    }
    long_running = True

    def run(self, args: ZoQatArgs) -> ToolResult:
        lr = DEFAULT_LR[args.method] if args.lr is None else args.lr
        spec = Spec(
            model=args.model,
            w_bits=args.w_bits,
            a_bits=args.a_bits,
            method=args.method,
            steps=0 if args.method in ("rtn", "gptq") else args.steps,
            lr=lr,
            eps=args.eps,
            seed=args.seed,
            batch_size=args.batch_size,
            train_weights=args.train_weights,
            eval_batches=args.eval_batches,
            rank=args.rank,
            probes=args.probes,
            refresh=args.refresh,
            smooth_alpha=args.smooth_alpha,
        )
        spec.check()  # the settings no single field's bound expresses (probes >= rank, refresh > probes): one line, before any work
        # an isolated run is a child process (its peak memory measured alone) that cannot report its steps: say so
        what = f"{args.method} W{args.w_bits}A{args.a_bits or 'fp'} on {args.model}" + (
            " (in a fresh process for its memory figure: no progress until it ends)" if args.isolate else ""
        )
        report(what, 0.0)
        try:
            out = run_isolated(spec) if args.isolate else run(spec)
        except ZooError as exc:  # unknown model name and the like: the caller's to fix
            raise UserInputError(str(exc)) from None
        except KeyboardInterrupt:
            raise UserInputError("quantization-aware training stopped by the user (Ctrl-C); nothing was kept") from None
        report(what, 1.0)
        metric = out["metric"]
        value = {
            "model": args.model,
            "method": args.method,
            "w_bits": args.w_bits,
            "a_bits": args.a_bits,
            "steps": spec.steps,
            "lr": lr,
            "eps": args.eps,
            "seed": args.seed,
            "metric": metric,
            metric: {stage: {split: out[f"{stage}_{split}"] for split in ("val", "test")} for stage in ("float", "rtn", "after")},
            "train_weights": args.train_weights,
            "smooth_alpha": args.smooth_alpha,
            "peak_rss_mb": out["peak_rss_train_mb"],
            "train_peak_added_mb": out["train_peak_added_mb"],
            "s_per_step": out["s_per_step"],
            "train_s": out["train_s"],
            "trainable_values": out["trainable_values"],
            "verdict": _verdict(args.method, metric, out),
        }
        messages = [
            f"{metric} on {args.eval_batches or 'all'} batches per split; 'rtn' is before training, 'after' after it",
            "peak memory: the process's resident high-water mark during training (kernel VmHWM, reset at its start); "
            "train_peak_added_mb is that peak minus the RSS when training started",
        ]
        if not out["peak_reset"]:
            messages.append("the kernel did not allow resetting the high-water mark: peak_rss_mb covers the whole run")
        messages.append(value["verdict"])
        return ToolResult(value=value, messages=messages)


def _verdict(method: str, metric: str, out: dict[str, Any]) -> str:
    """Test quality after training judged against round-to-nearest in the same run (``rtn`` itself: against the float model)."""
    base = "float" if method == "rtn" else "rtn"  # rtn is the baseline of the others; its own effect is the quantization's
    what = f"{method} vs {base}, test {metric}"
    if metric == "perplexity":
        if f"{base}_test_nll" not in out:
            return f"verdict: {what}: no per-sequence test scores in this result, so no noise to judge against"
        _, half, n = paired_log_ratio(out["after_test_nll"], out[f"{base}_test_nll"])
        return effect_verdict(what, out["after_test"], out[f"{base}_test"], metric=metric, n=n, ln_half=half)
    return effect_verdict(what, out["after_test"], out[f"{base}_test"], metric=metric, n=out.get("n_scored", {}).get("test"))
