"""Layer-freezing tools: train a zoo CNN from scratch with freezing and a compressed feature cache, against its baselines."""

from __future__ import annotations

from pathlib import Path
from typing import Any, ClassVar, Literal

from pydantic import Field

from coevo.search.errors import UserInputError
from coevo.search.problem import config_field
from coevo.search.work_progress import report
from coevo.sim.freeze import FreezeConfig, FreezeResult, train_zoo
from coevo.sim.freeze.config import FreezeFamilyConfig
from coevo.sim.freeze.settings import THRESHOLDS, Augment, Criterion, Method, Schedule
from coevo.sim.zoo import RECIPES
from coevo.tools._base import Tool, ToolArgs, ToolResult
from coevo.tools._zoo import resolve_alias


class FreezeArgs(ToolArgs):
    """Arguments of ``freeze.train``: the zoo CNN, when blocks freeze, the feature cache's codec and augmentation, the baselines run."""

    model: Literal["cnn-mnist", "cnn-mnist5k", "cnn-digits"] = config_field(
        FreezeFamilyConfig, "model", description="zoo CNN trained from scratch: cnn-mnist5k (cnn-mnist maps to it) or cnn-digits"
    )
    method: Method = config_field(FreezeFamilyConfig, "method")
    schedule: Schedule = config_field(FreezeFamilyConfig, "schedule")
    criterion: Criterion = config_field(FreezeFamilyConfig, "criterion")
    threshold: float | None = Field(
        None,
        gt=0,
        le=1,
        description="auto: the criterion's threshold (default " + ", ".join(f"{c} {t}" for c, t in THRESHOLDS.items()) + ")",
    )
    freeze_at: list[int | None] | None = Field(
        None, description="fixed: epochs trained before blocks 1, 2, 3 freeze (rising; null: never), e.g. [3, 6, null]"
    )
    cache: Literal["float32", "quant", "zstd", "jpeg", "webp"] = config_field(
        FreezeFamilyConfig,
        "codec",
        description="cache codec: float32 (none), quant (per-channel bits), zstd (quant + zstd), jpeg / webp (8-bit tiles)",
    )
    bits: list[int] = Field(
        list(FreezeFamilyConfig.bits), description="quant/zstd: bits of the cache when 1, 2, 3 blocks are frozen (4, 6 or 8 each)"
    )
    quality: list[int] = Field(
        list(FreezeFamilyConfig.quality), description="jpeg/webp: quality of the cache when 1, 2, 3 blocks are frozen (1-100)"
    )
    augment: Augment = config_field(FreezeFamilyConfig, "augment")
    share: float = config_field(FreezeFamilyConfig, "share")
    versions: int = config_field(FreezeFamilyConfig, "versions")
    epochs: int | None = Field(
        None,
        ge=1,
        le=200,
        description=f"training epochs (default: the zoo recipe's, {RECIPES[FreezeFamilyConfig.model]['train']['epochs']} for "
        f"{FreezeFamilyConfig.model})",
    )
    max_frozen: int = config_field(FreezeFamilyConfig, "max_frozen")
    baselines: bool = Field(True, description="also run full training and naive freezing with the same settings and seed")
    seed: int = config_field(FreezeFamilyConfig, "seed")
    cache_dir: str | None = Field(None, description="folder for the cache files (a fresh sub-folder, removed at the end); default temp")


class FreezeTrain(Tool):
    """Train a zoo CNN with layer freezing and a compressed on-disk feature cache; compare with full training and naive freezing."""

    name = "freeze.train"
    measured_fields = frozenset({"wall_s", "cpu_s", "cache_io_s"})
    description = (
        "Train a zoo CNN (cnn-mnist5k, cnn-digits) from scratch while freezing early blocks on a schedule (fixed epochs, or "
        "auto: CKA / gradient-norm plateau). With method=cache the frozen prefix's outputs go to an on-disk cache "
        "(checksummed; codec float32, quant, zstd, jpeg or webp with compression rising as more blocks freeze) and the rest "
        "trains from it, with similarity-aware channel augmentation. Returns val/test accuracy, wall and CPU time, MACs "
        "executed (forward+backward), cache bytes, and the same for full training and naive freezing."
    )
    Args = FreezeArgs
    example: ClassVar[dict[str, Any]] = {
        "model": "cnn-digits",
        "epochs": 3,
        "schedule": "fixed",
        "freeze_at": [1, 2, None],
        "baselines": False,
    }
    long_running = True
    writes: ClassVar[dict[str, Literal["file", "storage"]]] = {"cache_dir": "file"}

    def run(self, args: FreezeArgs) -> ToolResult:
        notes: list[str] = []
        model = resolve_alias(args.model, notes)
        cfg = FreezeConfig(
            method=args.method, schedule=args.schedule, criterion=args.criterion, threshold=args.threshold,
            freeze_at=tuple(args.freeze_at) if args.freeze_at is not None else (None, None, None),
            codec=args.cache, bits=tuple(args.bits), quality=tuple(args.quality), augment=args.augment, share=args.share,
            versions=args.versions, epochs=args.epochs, max_frozen=args.max_frozen, seed=args.seed,
        )  # fmt: skip
        if args.schedule == "fixed" and args.freeze_at is None:
            raise UserInputError("schedule 'fixed' needs freeze_at, e.g. [3, 6, null] (epochs before blocks 1, 2, 3 freeze)")
        methods = [args.method] + ([m for m in ("full", "naive") if m != args.method] if args.baselines else [])
        runs: dict[str, FreezeResult] = {}
        cache_dir = Path(args.cache_dir) if args.cache_dir else None
        for i, method in enumerate(methods):

            def say(what: str, fraction: float, i: int = i) -> None:
                report(what, (i + fraction) / len(methods))

            try:
                runs[method] = train_zoo(model, _with(cfg, method), cache_dir, say)
            except KeyboardInterrupt:
                raise UserInputError("training stopped by the user (Ctrl-C); nothing was kept") from None
        main = runs[args.method]
        value: dict[str, Any] = {"model": model, **_summary(main), "freeze_epochs": main.freeze_epochs, "stages": _stages(main)}
        value["epochs_log"] = main.epochs
        if len(runs) > 1:
            value["baselines"] = {m: _summary(r) | {"freeze_epochs": r.freeze_epochs} for m, r in runs.items() if m != args.method}
            ref = runs.get("full")
            if ref is not None and ref.macs:
                value["macs_vs_full"] = round(main.macs / ref.macs, 4)
        if main.events:
            notes += main.events
        return ToolResult(
            value=value,
            messages=[
                *notes,
                "accuracy in % of the final model (real network, uncompressed inputs); val for choices, test measured once. "
                "MACs are counted from the layer calls executed (forward, and backward where gradients flow), cache building "
                "and schedule monitoring included. Wall time is measured on this machine (noisy if it is shared); cpu_s is "
                "this process's CPU time.",
            ],
        )


def _with(cfg: FreezeConfig, method: str) -> FreezeConfig:
    from dataclasses import replace

    return replace(cfg, method=method)  # type: ignore[arg-type]


def _summary(r: FreezeResult) -> dict[str, Any]:
    return {
        "method": r.method,
        "val_accuracy": round(r.val_accuracy, 3),
        "test_accuracy": round(r.test_accuracy, 3),
        "wall_s": round(r.wall_s, 3),
        "cpu_s": round(r.cpu_s, 3),
        "train_gmac": round(r.macs / 1e9, 4),
        "cache_build_gmac": round(r.macs_cache_build / 1e9, 4),
        "cache_bytes": r.cache_bytes,
        "cache_io_s": round(r.cache_io_s, 3),
        "cache_rebuilt": r.rebuilt,
    }


def _stages(r: FreezeResult) -> list[dict[str, Any]]:
    return [{k: v for k, v in s.items() if k != "sensitivity"} for s in r.stages]
