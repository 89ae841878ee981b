"""The measuring half of the lm-wide figure: train byte-level LMs of several widths, track their outliers, prune them.

Runs where a GPU is (``--device cuda``) or, at toy sizes, on a CPU (the tests). It imports only
``torch`` and :mod:`coevo.sim` (no optuna, no search engine), so it runs under a bare PyTorch image
from a copy of the checkout. Every stage appends its rows to the CSVs in the output folder as soon
as it ends, so a run stopped by its deadline or by a fault keeps what it measured.

What one run does, for each training seed and, within it, each width, widest first (the same settings
for every width and seed):

1. Build :class:`sim.zoo.models.ByteGPT` (``d`` = the width, ``d / 64`` heads, the given depth and
   block) and train it from the seed on the exported corpus's training split with the zoo's own
   training (:func:`sim.zoo.registry.train_lm`: AdamW on a one-cycle schedule with 10 % warm-up,
   gradient clipping at 1, random windows), under bf16 autocast on CUDA.
2. At ``checkpoints`` evenly spaced steps, in float32 and eval mode: the validation perplexity and
   :func:`sim.prune.outliers.activation_outliers` over ``tokens`` validation tokens (LLM.int8's rules).
3. Right after its training, prune the final model with each score and pattern
   (:func:`sim.prune.core.prune`, sequential, calibration windows drawn from the training split with
   each calibration seed) and measure the test perplexity of the dense and every pruned model.

Each model is trained and pruned before the next is started, so a run stopped by its deadline keeps
whole models. The widest model comes first because it is the one the figure is for, and the seeds in
the order given: a model whose training and pruning would not end before the deadline (estimated from
the last model's time, scaled by parameters) is skipped, and ``wide-run.json`` says so; the pruning of
a started model stops at the deadline.
"""

from __future__ import annotations

import gzip
import json
import math
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import torch
from torch import nn

from coevo.figures._outlier_rows import LAYER_FIELDS
from coevo.sim.prune.core import prune
from coevo.sim.prune.masks import parse_pattern
from coevo.sim.prune.outliers import activation_outliers
from coevo.sim.zoo.data import Split, byte_blocks, byte_tensor, random_windows
from coevo.sim.zoo.models import ByteGPT
from coevo.sim.zoo.registry import LMTraining, checkpoint_steps, lm_perplexity, parameter_count, train_lm

TRAJECTORY, PRUNE, RUN = "wide-trajectory.csv", "wide-prune.csv", "wide-run.json"
"""The files a run writes (the page, :mod:`coevo.figures.lm_wide`, reads them by these names)."""
SPLIT_FILES = {"train": "train.bin.gz", "val": "val.bin.gz", "test": "test.bin.gz"}
"""The exported corpus: one gzip file of raw bytes per split."""
MIN_STEPS = 20
"""The fewest training steps: torch's one-cycle schedule divides by its warm-up length (10 %) less one."""
HEAD_DIM = 64
"""Every width gets ``d / 64`` heads (GPT-2's head size), so only the width changes between runs."""

TRAJECTORY_FIELDS = [
    "width",
    "seed",
    "layers",
    "params",
    "step",
    "tokens_seen",
    "train_s",
    "val_ppl",
    *LAYER_FIELDS,
    "top_share",
    "systematic",
]
PRUNE_FIELDS = [
    "width",
    "seed",
    "score",
    "pattern",
    "target_sparsity",
    "sparsity",
    "calib_seed",
    "calib_tokens",
    "test_ppl",
    "dense_test_ppl",
    "prune_s",
]


@dataclass(frozen=True)
class WideSettings:
    """One lm-wide run's options (the command line's)."""

    widths: tuple[int, ...] = (256, 512, 1024)
    layers: int = 6
    block: int = 256
    batch: int = 64
    steps: int = 3000
    lr: float = 6e-4
    weight_decay: float = 0.1
    checkpoints: int = 6
    tokens: int = 16384
    seeds: tuple[int, ...] = (0,)
    """Training seeds: each width is trained once per seed (the pruning intervals are then over these)."""
    scores: tuple[str, ...] = ("magnitude", "wanda", "cos+var", "sparsegpt")
    patterns: tuple[str, ...] = ("unstructured", "2:4")
    sparsities: tuple[float, ...] = (0.5,)
    """The unstructured pattern's sparsities (an N:M pattern has its own, 1 - N/M)."""
    calib_seeds: int = 3
    calib_windows: int = 128
    deadline_s: float = 420.0

    def check(self) -> None:
        """Raise ValueError naming the first option out of its bounds."""
        bad = [w for w in self.widths if w < HEAD_DIM // 2 or w % min(w, HEAD_DIM)]
        if not self.widths or bad:
            raise ValueError(f"--widths {bad or '(none)'}: each width must be >= {HEAD_DIM // 2} and a multiple of {HEAD_DIM} above it")
        for name in ("layers", "block", "batch", "steps", "checkpoints", "tokens", "calib_seeds", "calib_windows"):
            if getattr(self, name) < 1:
                raise ValueError(f"--{name.replace('_', '-')} {getattr(self, name)}: must be >= 1")
        if self.steps < MIN_STEPS:
            raise ValueError(f"--steps {self.steps}: at least {MIN_STEPS} (the one-cycle schedule's 10 % warm-up needs 2 steps)")
        if self.checkpoints > self.steps:
            raise ValueError(f"--checkpoints {self.checkpoints}: at most one per step ({self.steps} steps)")
        if not (math.isfinite(self.lr) and self.lr > 0) or not (math.isfinite(self.weight_decay) and self.weight_decay >= 0):
            raise ValueError(f"--lr {self.lr} must be > 0 and --weight-decay {self.weight_decay} >= 0")
        if not self.seeds or min(self.seeds) < 0 or len(set(self.seeds)) < len(self.seeds):
            raise ValueError(f"--seeds {','.join(map(str, self.seeds)) or '(none)'}: distinct seeds >= 0, at least one")
        bad_sparsity = [x for x in self.sparsities if not 0 < x < 1]
        if not self.sparsities or bad_sparsity:
            raise ValueError(f"--sparsities {bad_sparsity or '(none)'}: each must be in (0, 1)")
        for pattern in self.patterns:
            try:
                parse_pattern(pattern)  # the pruning's own reading of a pattern
            except ValueError:
                raise ValueError(f"--patterns {pattern!r}: 'unstructured' or N:M with 0 < N < M") from None


def heads(width: int) -> int:
    """Attention heads of a model of ``width``: one per 64 channels, at least one."""
    return max(1, width // HEAD_DIM)


# ---------------------------------------------------------------- the corpus


def export_corpus(folder: Path, model: str = "lm-pystdlib") -> dict[str, int]:
    """Write zoo model ``model``'s text splits (train / val / test bytes) to ``folder``; returns each split's size.

    The corpus is the one the CPU runs train on (this interpreter's standard library, split by file),
    carried to the GPU machine as data: its own Python's library would be another corpus.
    """
    from coevo.sim.zoo.recipes import recipe
    from coevo.sim.zoo.registry import lm_text

    rec = recipe(model)
    text = lm_text(rec)
    folder.mkdir(parents=True, exist_ok=True)
    for split, name in SPLIT_FILES.items():
        with gzip.open(folder / name, "wb", compresslevel=6) as f:
            f.write(text[split])
    sizes = {k: len(v) for k, v in text.items()}
    (folder / "corpus.json").write_text(json.dumps({"model": model, "data": rec["data"], "bytes": sizes}, indent=1))
    return sizes


def read_corpus(folder: Path) -> dict[str, bytes]:
    """The splits :func:`export_corpus` wrote; FileNotFoundError naming the missing file."""
    out = {}
    for split, name in SPLIT_FILES.items():
        path = folder / name
        if not path.is_file():
            raise FileNotFoundError(f"{path}: no exported corpus here (python -m coevo.figures lm-wide --export-corpus {folder})")
        with gzip.open(path, "rb") as f:
            out[split] = f.read()
    return out


# ---------------------------------------------------------------- training and measuring


@dataclass(frozen=True)
class DeviceCorpus:
    """The corpus where the models run, moved there once: the training bytes and the val / test blocks."""

    train: torch.Tensor
    val: Split
    test: Split

    @classmethod
    def of(cls, corpus: dict[str, bytes], block: int, device: torch.device) -> DeviceCorpus:
        """``corpus``'s splits on ``device``: training bytes for random windows, the others as non-overlapping blocks."""

        def blocks(text: bytes) -> Split:
            split = byte_blocks(text, block)
            return Split(split.x.to(device), split.y.to(device))

        return cls(byte_tensor(corpus["train"]).to(device), blocks(corpus["val"]), blocks(corpus["test"]))


@dataclass(frozen=True)
class Trained:
    """A width's final model from one training seed, and what its training cost."""

    width: int
    seed: int
    model: nn.Module
    params: int
    train_s: float
    val_ppl: float
    """At the last training step (the last checkpoint)."""


def _measure_rows(model: nn.Module, settings: WideSettings, val: Split, meta: dict[str, Any]) -> list[dict[str, Any]]:
    """One checkpoint's rows: the model's outlier measures per layer input, with the validation perplexity.

    Both measures run in eval mode without gradients and give the model back in the mode it had.
    """
    report = activation_outliers(model, [val.x[i : i + 16] for i in range(0, len(val.x), 16)], tokens=settings.tokens)
    ppl = lm_perplexity(model, val)
    systematic = " ".join(map(str, report.systematic))  # the model's, on every row, as the trajectory CSV keeps it
    return [{**meta, "val_ppl": ppl, **row, "systematic": systematic} for row in report.as_rows()]


def train_width(
    width: int,
    seed: int,
    settings: WideSettings,
    data: DeviceCorpus,
    device: torch.device,
    on_rows: Callable[[list[dict[str, Any]]], None],
) -> Trained:
    """Train the model of ``width`` from ``seed`` (module doc, step 1) and measure it at the checkpoints (step 2), rows to ``on_rows``.

    The training is the zoo's (:func:`sim.zoo.registry.train_lm`), with bf16 autocast on CUDA.
    """
    torch.manual_seed(seed)  # the initial weights
    model = ByteGPT(width, settings.layers, heads(width), settings.block).to(device)
    params = parameter_count(model)
    gen = torch.Generator(device=device).manual_seed(seed)  # the training windows
    hyper = LMTraining(settings.steps, settings.batch, settings.block, settings.lr, settings.weight_decay)
    clock = {"started": time.perf_counter(), "measuring": 0.0}  # training time: the wall time less the measurements
    rows: list[dict[str, Any]] = []

    def sync() -> float:
        if device.type == "cuda":
            torch.cuda.synchronize()  # the steps run asynchronously: settle them before reading the clock
        return time.perf_counter()

    def checkpoint(step: int, trained: nn.Module) -> None:
        nonlocal rows
        begun = sync()
        spent = begun - clock["started"] - clock["measuring"]
        meta = {"width": width, "seed": seed, "layers": settings.layers, "params": params, "step": step,
                "tokens_seen": step * settings.batch * settings.block, "train_s": round(spent, 1)}  # fmt: skip
        rows = _measure_rows(trained, settings, data.val, meta)
        on_rows(rows)
        print(f"width {width}, seed {seed}: step {step} of {settings.steps}, {spent:.0f} s training", flush=True)
        clock["measuring"] += time.perf_counter() - begun

    at = checkpoint_steps(settings.steps, settings.checkpoints)
    train_lm(model, data.train, hyper, gen, on_step=checkpoint, at=at, bf16=device.type == "cuda")
    model.eval()
    spent = float(rows[0]["train_s"])  # the last checkpoint is the last step
    return Trained(width, seed, model, params, spent, float(rows[0]["val_ppl"]))


def prune_width(
    trained: Trained,
    settings: WideSettings,
    data: DeviceCorpus,
    device: torch.device,
    deadline: float,
    on_row: Callable[[dict[str, Any]], None],
) -> bool:
    """Prune ``trained``'s model with every score, pattern and calibration seed (module doc, step 3) until ``deadline``.

    Returns whether every pruning was done (False: the deadline cut it short).
    """
    dense = lm_perplexity(trained.model, data.test)
    for seed in range(settings.calib_seeds):
        gen = torch.Generator(device=device).manual_seed(1000 + seed)
        calib = random_windows(data.train, settings.block, settings.calib_windows, gen).x
        batches = [calib[i : i + 16] for i in range(0, len(calib), 16)]
        for pattern, sparsity in _targets(settings):
            for score in settings.scores:
                if time.monotonic() > deadline:
                    return False
                started = time.perf_counter()
                result = prune(trained.model, batches, sparsity, pattern=pattern, score=score, calib_tokens=calib.numel())
                target = sparsity if sparsity is not None else round(parse_pattern(pattern).sparsity or 0.0, 4)  # N:M: 1 - N/M
                on_row({
                    "width": trained.width, "seed": trained.seed, "score": score, "pattern": pattern,
                    "target_sparsity": target, "sparsity": round(result.sparsity, 4),
                    "calib_seed": seed, "calib_tokens": result.calib_tokens, "test_ppl": lm_perplexity(result.model, data.test),
                    "dense_test_ppl": dense, "prune_s": round(time.perf_counter() - started, 2),
                })  # fmt: skip
                del result
    return True


def _targets(settings: WideSettings) -> list[tuple[str, float | None]]:
    """(pattern, sparsity) pairs to prune to: the unstructured pattern at each sparsity, an N:M pattern at its own."""
    return [(p, x) for p in settings.patterns for x in (settings.sparsities if p == "unstructured" else (None,))]


def estimate_s(width: int, measured: Sequence[tuple[int, float]]) -> float:
    """Seconds a model of ``width`` should take, from the (width, seconds) of the models done: the last one of the same
    width, else the last one scaled by parameters (12 d^2 per layer; small widths, which do not fill a GPU, overestimate)."""
    same = [s for w, s in measured if w == width]
    if same:
        return same[-1]
    if not measured:
        return 0.0
    w0, s0 = measured[-1]
    return s0 * (width / w0) ** 2


def run(settings: WideSettings, corpus_dir: Path, out: Path, device_name: str, commit: str) -> dict[str, Any]:
    """The whole measurement (module doc); writes ``wide-trajectory.csv``, ``wide-prune.csv`` and ``wide-run.json`` to ``out``."""
    from coevo.figures._common import write_csv

    settings.check()
    started = time.monotonic()
    deadline = started + settings.deadline_s
    device = torch.device(device_name)
    if device.type == "cuda":
        torch.backends.cuda.matmul.allow_tf32 = True  # float32 measuring passes; the statistics themselves are float64
    data = DeviceCorpus.of(read_corpus(corpus_dir), settings.block, device)
    out.mkdir(parents=True, exist_ok=True)
    trajectory: list[dict[str, Any]] = []
    info: dict[str, Any] = {
        "settings": asdict(settings), "commit": commit, "device": _device_label(device), "torch": torch.__version__,
        "corpus": json.loads((corpus_dir / "corpus.json").read_text()) if (corpus_dir / "corpus.json").is_file() else None,
        "models": [], "skipped": [],
    }  # fmt: skip

    def save_rows(rows: list[dict[str, Any]]) -> None:
        trajectory.extend(rows)
        write_csv(out / TRAJECTORY, trajectory, TRAJECTORY_FIELDS)

    pruned: list[dict[str, Any]] = []

    def save_row(row: dict[str, Any]) -> None:
        pruned.append(row)
        write_csv(out / PRUNE, pruned, PRUNE_FIELDS)

    spent: list[tuple[int, float]] = []  # (width, seconds to train and prune) per model done
    for seed in settings.seeds:
        for width in sorted(settings.widths, reverse=True):
            need = estimate_s(width, spent)
            if time.monotonic() + need > deadline:
                why = f"training and pruning would take about {need:.0f} s, past the deadline"
                info["skipped"].append({"width": width, "seed": seed, "why": why})
                continue
            begun = time.monotonic()
            t = train_width(width, seed, settings, data, device, save_rows)
            model = {"width": width, "seed": seed, "params": t.params, "train_s": round(t.train_s, 1), "val_ppl": t.val_ppl}
            info["models"].append(model)
            _write_info(out, info, started)
            trained_at = time.monotonic()
            model["pruning_cut"] = not prune_width(t, settings, data, device, deadline, save_row)
            model["prune_s"] = round(time.monotonic() - trained_at, 1)
            spent.append((width, time.monotonic() - begun))
            del t
    _write_info(out, info, started)  # also when every model was skipped: the run file says why
    return info


def _device_label(device: torch.device) -> str:
    if device.type == "cuda":
        return f"{torch.cuda.get_device_name(device)} (CUDA {torch.version.cuda})"
    return f"cpu ({torch.get_num_threads()} threads)"


def _write_info(out: Path, info: dict[str, Any], started: float) -> None:
    info["wall_s"] = round(time.monotonic() - started, 1)
    (out / RUN).write_text(json.dumps(info, indent=1, sort_keys=True) + "\n")
