"""Quantization tools: class-based mixed-precision weight quantization of a zoo model, with its baselines."""

from __future__ import annotations

import time
from typing import Any, ClassVar, Literal

from coevo.search.errors import UserInputError
from coevo.search.problem import config_field
from coevo.search.stats import effect_verdict
from coevo.search.work_progress import report
from coevo.sim.quant import CANDIDATES, greedy_search, quant_layers, quantize
from coevo.sim.quant.config import Method, QuantConfig
from coevo.sim.quant.mixed import check_target
from coevo.sim.zoo import RECIPES
from coevo.tools._base import Tool, ToolArgs, ToolResult
from coevo.tools._zoo import model_field, zoo_model


class QuantArgs(ToolArgs):
    """Arguments of ``quant.class_based``: the zoo classifier, the average bits, the allocation method, fine-tuning."""

    model: str = model_field(QuantConfig.model)
    # avg_bits' range is left to check_target, which runs before the model loads and names the candidate widths
    avg_bits: float = config_field(
        QuantConfig,
        "avg_bits",
        description=(
            f"average weight bits (weighted by weight count) every method gets, between {min(CANDIDATES)} and {max(CANDIDATES)}; "
            "ignored by 'greedy'"
        ),
        bounds=False,
    )
    method: Literal[Method, "greedy"] = config_field(
        QuantConfig,
        "method",
        description=(
            "class-based: more bits for units (filters/neurons) important to more classes (per-class Taylor scores), "
            "weighted by each unit's quantization error scale (max|w|^2); "
            "class-count: the class count alone, no error scale (ablation: the priority before issue 31); "
            "taylor: the same scores pooled over classes, same error scale (ablation); "
            "uniform: the same bits everywhere; hawq: per-layer Hessian trace x quantization error; magnitude: per-unit "
            "weight range; greedy: lower bits group by group (class-important vs rest per layer) while val accuracy stays "
            "within accuracy_drop_max of the float model"
        ),
    )
    finetune_epochs: int = config_field(QuantConfig, "finetune_epochs")
    accuracy_drop_max: float = config_field(QuantConfig, "accuracy_drop_max")
    seed: int = config_field(QuantConfig, "seed", description="seed of fine-tuning (and the Hutchinson probes of hawq)")


class QuantClassBased(Tool):
    """Class-based mixed-precision quantization of a zoo classifier, or one of its baselines at the same average bits."""

    name = "quant.class_based"
    measured_fields = frozenset({"wall_s"})
    description = (
        "Quantize the weights of a zoo classifier (per output filter/neuron, symmetric) to a mixed precision at a given "
        "average bit width and fine-tune briefly (straight-through estimator, epoch chosen on the val split). Methods: "
        "class-based (units important to more classes and with a larger rounding error get more bits), uniform, "
        "hawq (Hessian trace), magnitude, or greedy (lowest bits within an accuracy drop). Returns val/test accuracy "
        "before and after, bits per layer, model bits."
    )
    Args = QuantArgs
    example: ClassVar[dict[str, Any]] = {"model": "cnn-digits", "avg_bits": 4.0, "method": "class-based", "finetune_epochs": 1}
    long_running = True
    loads_code = ("model",)

    def run(self, args: QuantArgs) -> ToolResult:
        start = time.perf_counter()
        check_target(args.avg_bits, CANDIDATES)  # before the model loads: a bad target fails at once (greedy's too)
        ignored = args.method == "greedy" and "avg_bits" in args.model_fields_set
        if args.model in RECIPES and RECIPES[args.model]["task"] != "classify":  # refuse before training an LM for nothing
            raise UserInputError(f"model {args.model!r} is a {RECIPES[args.model]['task']} model; this tool needs a classify model")
        zm, notes = zoo_model(args.model, task="classify")
        train = zm.loader("train", shuffle=True, seed=args.seed)
        val, test = zm.loader("val"), zm.loader("test")

        def say(what: str, fraction: float) -> None:
            report(what, 0.3 + 0.7 * fraction)

        try:
            if args.method == "greedy":
                found = greedy_search(
                    zm.model, train, val, max_drop=args.accuracy_drop_max, test=test, finetune_epochs=args.finetune_epochs,
                    seed=args.seed, progress=say,
                )  # fmt: skip
                result = found.result
                extra: dict[str, Any] = {"groups": {g.name: b for g, b in zip(found.groups, found.widths, strict=True)}}
            else:
                result = quantize(
                    zm.model, train, val, avg_bits=args.avg_bits, method=args.method, test=test,
                    finetune_epochs=args.finetune_epochs, seed=args.seed, progress=say,
                )  # fmt: skip
                extra = {}
        except KeyboardInterrupt:
            raise UserInputError("quantization stopped by the user (Ctrl-C); nothing was kept") from None
        alloc = result.allocation
        n_test = len(test.dataset)  # type: ignore[arg-type]  # a Dataset is not Sized to mypy; the zoo gives a TensorDataset
        value: dict[str, Any] = {
            "model": args.model,
            "method": args.method,
            "target_avg_bits": None if args.method == "greedy" else args.avg_bits,
            "avg_bits": round(alloc.avg_bits, 4),
            "val_accuracy_float": result.val_before,
            "val_accuracy_rtn": result.val_ptq,
            "val_accuracy_after": result.val_after,
            "test_accuracy_float": result.test_before,
            "test_accuracy_after": result.test_after,
            "finetune_epoch_kept": result.best_epoch,
            "model_bits": result.model_bits,
            "float32_bits": result.float_bits,
            "compression_x": round(result.float_bits / result.model_bits, 3),
            "layers": result.layer_summary(quant_layers(zm.model)),
            **extra,
            "n_test": n_test,
            "verdict": _verdict(args.method, alloc.avg_bits, result.test_after, result.test_before, n_test),
            "wall_s": round(time.perf_counter() - start, 3),
        }
        return ToolResult(
            value=value,
            messages=[
                *notes,
                *(["avg_bits ignored: greedy picks the bits itself (the lowest within accuracy_drop_max)"] if ignored else []),
                "weights fake-quantized per output filter/neuron (symmetric); biases and activations stay float32; "
                "model_bits counts a 32-bit scale per unit. Accuracy in %, val chose the epoch, test measured once.",
                value["verdict"],
            ],
        )


def _verdict(method: str, bits: float, after: float | None, before: float | None, n_test: int) -> str:
    """The quantized model's test accuracy judged against the float model's in the same result (``search.stats``' rule)."""
    if after is None or before is None:  # the tool always passes a test loader; kept for the types
        return "verdict: no test accuracy measured"
    return effect_verdict(f"{method} at {bits:.2f} average bits vs the float model, test", after, before, metric="accuracy", n=n_test)
