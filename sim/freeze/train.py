"""Layer freezing with a compressed on-disk feature cache, against full training and naive freezing.

A zoo CNN is trained from scratch (its recipe's data split, optimiser, batch and learning-rate
schedule; seeds fixed) while its blocks (:mod:`sim.freeze.stages`) freeze from the input on:

* ``full``: every layer trains every step (the reference).
* ``naive``: frozen blocks stop training but still run forward on every step (under ``no_grad``).
* ``cache``: when blocks freeze, the frozen prefix runs once over the training set (clean inputs and
  ``versions`` augmented copies), its outputs are written to an on-disk cache (:mod:`sim.freeze.cache`),
  and the rest trains from the cache: no forward or backward through the frozen prefix any more.

Freezing schedule: ``fixed`` (block ``k`` freezes after ``freeze_at[k]`` epochs) or ``auto``: at
the end of every epoch the next block freezes once its output has stopped moving, measured by
``cka`` (linear CKA of the block's output on a fixed probe batch between consecutive epochs at least
``threshold``) or ``gradnorm`` (relative change of the block's mean gradient norm between epochs at
most ``threshold``). A block never freezes before ``min_epochs`` epochs (default: the end of the learning-rate
warm-up, 30 % of the epochs), and at most one a epoch.

Augmentation: the recipe's input augmentation (random shift and noise) runs on every step of full
training, of naive freezing and before the first freeze. From the cache, ``augment`` decides:
``none`` (clean features only), ``full`` (``versions`` augmented copies of every channel) or
``similarity-aware`` (augmented copies only of the ``share`` of channels most sensitive to the
augmentation, :func:`sim.freeze.similarity.channel_sensitivity`; the others cached clean). Each
training sample drawn from the cache takes a random version (0 = clean); the sensitive channels take
that version, the rest the clean one.

Compression rises as more blocks freeze (progressive): the cache of the ``f``-block prefix uses
``bits[f-1]`` (quant, zstd) or ``quality[f-1]`` (jpeg, webp). Each cache is built from the raw
inputs through the whole frozen prefix (forward MACs counted), so compression errors never
compound, and the previous stage's files are deleted first: the disk holds one stage at a time.
Every epoch reads the cache back from disk and checks its checksum; a corrupt file is rebuilt.

Reported: validation and test accuracy of the final model (the real network, uncompressed inputs;
test measured once, at the end), wall time of training (cache building, encoding, disk I/O and
decoding included; final evaluation excluded), MACs executed (forward + backward, counted by
:class:`sim.freeze.stages.MacCounter`), cache bytes on disk.
"""

from __future__ import annotations

import math
import shutil
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from coevo.sim.errors import UserInputError
from coevo.sim.freeze.cache import CacheCorruptError, Codec, check_writable, decode, read_verified, write_file
from coevo.sim.freeze.settings import (  # noqa: F401  # defined there without torch, re-exported here
    AUGMENTS,
    METHODS,
    N_BLOCKS,
    PROGRESSIVE_BITS,
    PROGRESSIVE_QUALITY,
    Augment,
    FreezeConfig,
    Method,
)
from coevo.sim.freeze.similarity import augment, channel_sensitivity, linear_cka, pick_channels
from coevo.sim.freeze.stages import Block, MacCounter, run_blocks, split

Progress = Callable[[str, float], None]
SHIFT = {"DigitsCNN": 1, "MnistCNN": 2}
"""Default random shift (pixels) of the input augmentation: 1 on 8x8 digits, 2 on 28x28 MNIST."""


@dataclass
class FreezeResult:
    """What one run measured (accuracies in %, MACs counted, bytes on disk)."""

    method: str
    val_accuracy: float
    test_accuracy: float
    wall_s: float
    cpu_s: float
    """CPU seconds of this process over the same span (less sensitive than wall time to other jobs on a shared box)."""
    macs: int
    """Forward + backward MACs executed in training (steps, cache building, schedule monitoring)."""
    macs_steps: int
    macs_cache_build: int
    macs_monitor: int
    cache_bytes: int
    """The largest cache held on disk at once (one stage at a time)."""
    cache_io_s: float
    """Seconds spent encoding, writing, reading and decoding the cache (inside ``wall_s``)."""
    freeze_epochs: list[int | None]
    """Epochs trained before each block froze (None: never)."""
    stages: list[dict[str, Any]] = field(default_factory=list)
    epochs: list[dict[str, Any]] = field(default_factory=list)
    rebuilt: int = 0
    events: list[str] = field(default_factory=list)


@dataclass
class _StageCache:
    frozen: int
    files: list[Path]
    bytes: int
    channels: torch.Tensor
    sensitivity: list[float]


def _accuracy(model: nn.Module, x: torch.Tensor, y: torch.Tensor, batch: int = 256) -> float:
    model.eval()
    right = 0
    with torch.no_grad():
        for i in range(0, len(y), batch):
            right += int((model(x[i : i + batch]).argmax(-1) == y[i : i + batch]).sum())
    model.train()
    return 100.0 * right / len(y)


def _batched(blocks: list[Block], x: torch.Tensor, stop: int, batch: int = 512) -> torch.Tensor:
    with torch.no_grad():
        return torch.cat([run_blocks(blocks, x[i : i + batch], 0, stop) for i in range(0, len(x), batch)])


class _Trainer:
    """One run (module doc); state shared by the step, the monitor and the cache."""

    def __init__(self, rec: dict[str, Any], splits: dict[str, Any], cfg: FreezeConfig, cache_root: Path, progress: Progress | None):
        from coevo.sim.zoo import build

        self.rec, self.cfg, self.progress = rec, cfg, progress
        self.epochs = int(cfg.epochs if cfg.epochs is not None else rec["train"]["epochs"])
        cfg.check(self.epochs)
        rec = dict(rec, train=dict(rec["train"], seed=cfg.seed))
        self.model = build(rec)  # from scratch, initialised with the run's seed
        self.blocks, self.head = split(self.model)
        self.train_split, self.val, self.test = splits["train"], splits["val"], splits["test"]
        self.shift = cfg.shift if cfg.shift is not None else SHIFT[type(self.model).__name__]
        self.gen = torch.Generator().manual_seed(cfg.seed)
        self.counter = MacCounter()
        self.frozen = 0
        self.freeze_epochs: list[int | None] = [None] * N_BLOCKS
        self.root = cache_root
        self.stage: _StageCache | None = None
        self.features: tuple[torch.Tensor, torch.Tensor | None] | None = None
        self._digests: list[str] = []
        self.result_stages: list[dict[str, Any]] = []
        self.events: list[str] = []
        self.rebuilt = 0
        self.io_s = 0.0
        self.max_bytes = 0
        self.macs_build = 0
        self.macs_monitor = 0

    # ---- freezing and the cache

    def _freeze(self, upto: int, epoch: int) -> None:
        """Freeze blocks ``[frozen, upto)`` after ``epoch`` epochs; the cache method builds the new prefix's cache."""
        for k in range(self.frozen, upto):
            for p in self.blocks[k].parameters():
                p.requires_grad_(False)
                p.grad = None
            self.freeze_epochs[k] = epoch
        self.frozen = upto
        self.events.append(f"epoch {epoch}: blocks 1..{upto} frozen")
        if self.cfg.method == "cache":
            self._build_cache()

    def _codec(self) -> Codec:
        f = self.frozen - 1
        return Codec(self.cfg.codec, self.cfg.bits[f], self.cfg.quality[f])

    def _build_cache(self) -> None:
        cfg, f = self.cfg, self.frozen
        before = self.counter.total
        if self.stage is not None:  # one stage on disk at a time: the new cache comes from the raw inputs
            for path in self.stage.files:
                path.unlink(missing_ok=True)
        x = self.train_split.x
        clean = _batched(self.blocks, x, f)
        versions = cfg.versions if cfg.augment != "none" else 0
        gen = torch.Generator().manual_seed(cfg.seed * 7919 + f)  # the same versions when a corrupt cache is rebuilt
        sens, channels = torch.zeros(clean.shape[1]), torch.zeros(0, dtype=torch.long)
        augmented: list[torch.Tensor] = []
        if versions:
            # sensitivity on a probe of the training set, then augmented versions of the chosen channels only: the
            # last frozen conv computes just those output channels (its MACs shrink by the share), earlier blocks all
            probe = x[: cfg.probe]
            views = torch.stack([_batched(self.blocks, augment(probe, self.shift, cfg.noise, gen), f) for _ in range(versions)])
            sens = channel_sensitivity(clean[: cfg.probe], views)
            channels = pick_channels(sens, cfg.share if cfg.augment == "similarity-aware" else 1.0)
            if len(channels):
                augmented = [self._prefix_channels(augment(x, self.shift, cfg.noise, gen), f, channels) for _ in range(versions)]
        self.macs_build += self.counter.total - before
        started = time.perf_counter()
        codec = self._codec()
        files = [self.root / f"stage{f}-clean.fcache"]
        size = write_file(files[0], clean.numpy(), codec, {"stage": f, "version": 0})
        if len(channels):
            for v, aug in enumerate(augmented, start=1):
                files.append(self.root / f"stage{f}-aug{v}.fcache")
                size += write_file(files[-1], aug.numpy(), codec, {"stage": f, "version": v, "channels": channels.tolist()})
        self.io_s += time.perf_counter() - started
        self.max_bytes = max(self.max_bytes, size)
        self.stage = _StageCache(f, files, size, channels, [round(float(s), 4) for s in sens])
        self.result_stages.append(
            {
                "frozen_blocks": f,
                "codec": codec.label(),
                "shape": list(clean.shape[1:]),
                "channels_augmented": channels.tolist(),
                "versions": versions if len(channels) else 0,
                "bytes": size,
                "float32_bytes": int(clean.numel() * 4 * (1 + (versions * len(channels) / clean.shape[1] if len(channels) else 0))),
                "sensitivity": self.stage.sensitivity,
            }
        )

    def _prefix_channels(self, x: torch.Tensor, f: int, channels: torch.Tensor, batch: int = 512) -> torch.Tensor:
        """Output channels ``channels`` of the ``f``-block prefix on ``x``: the last block's conv computes only those."""
        last = self.blocks[f - 1]
        weight, bias = last.conv.weight[channels], last.conv.bias[channels] if last.conv.bias is not None else None
        outs = []
        with torch.no_grad():
            for i in range(0, len(x), batch):
                h = run_blocks(self.blocks, x[i : i + batch], 0, f - 1)
                y = F.relu(F.conv2d(h, weight, bias, last.conv.stride, last.conv.padding))
                # a functional call the hooks do not see: book its MACs by hand (output elements x in-channels x kernel area)
                self.counter.forward += int(y.numel()) * last.conv.in_channels * last.conv.kernel_size[0] * last.conv.kernel_size[1]
                outs.append(F.max_pool2d(y, 2) if last.pool else y)
        return torch.cat(outs)

    def _load_cache(self) -> None:
        """Read the stage's files back and check their checksums; decode them when they changed (a new or rebuilt stage).

        The decoded features stay in memory for the stage (they fit: a few MB); every epoch still
        reads and verifies the files, so a file corrupted on disk is caught and the stage rebuilt.
        """
        assert self.stage is not None
        started = time.perf_counter()
        try:
            raw = [read_verified(p) for p in self.stage.files]
        except CacheCorruptError as exc:
            self.io_s += time.perf_counter() - started
            self.events.append(f"corrupt cache detected ({exc}); rebuilt")
            self.rebuilt += 1
            self._build_cache()
            started = time.perf_counter()
            raw = [read_verified(p) for p in self.stage.files]
        digests = [d for _, _, d in raw]
        if self.features is None or digests != self._digests:
            arrays = [decode(meta, payload) for meta, payload, _ in raw]
            clean = torch.from_numpy(arrays[0])
            aug = torch.from_numpy(np.stack(arrays[1:])) if len(arrays) > 1 else None
            self.features, self._digests = (clean, aug), digests
        self.io_s += time.perf_counter() - started

    def _cached_batch(self, idx: torch.Tensor) -> torch.Tensor:
        assert self.features is not None and self.stage is not None
        clean, aug = self.features
        h = clean[idx].clone()
        if aug is not None:
            v = torch.randint(0, aug.shape[0] + 1, (len(idx),), generator=self.gen)
            rows = (v > 0).nonzero().squeeze(1)
            if len(rows):
                h[rows[:, None], self.stage.channels[None, :]] = aug[v[rows] - 1, idx[rows]]
        return h

    # ---- schedule monitoring

    def _probe_outputs(self) -> list[torch.Tensor]:
        before = self.counter.total
        with torch.no_grad():
            h, outs = self.train_split.x[: self.cfg.probe], []
            for block in self.blocks:
                h = block(h)
                outs.append(h)
        self.macs_monitor += self.counter.total - before
        return outs

    # ---- the loop

    def run(self) -> FreezeResult:
        """Train for ``epochs`` epochs under the config: per epoch, freeze on schedule, train, record, maybe freeze (auto)."""
        cfg, rec = self.cfg, self.rec
        batch = int(rec["train"]["batch"])
        per_epoch = math.ceil(len(self.train_split) / batch)
        opt = torch.optim.AdamW(self.model.parameters(), lr=rec["train"]["lr"], weight_decay=rec["train"]["weight_decay"])
        sched = torch.optim.lr_scheduler.OneCycleLR(opt, max_lr=rec["train"]["lr"], total_steps=self.epochs * per_epoch)
        history: list[dict[str, Any]] = []
        prev: list[torch.Tensor] | None = None
        prev_grad: list[float] | None = None
        auto = cfg.method != "full" and cfg.schedule == "auto"
        watch_grad = auto and cfg.criterion == "gradnorm"
        started, cpu_started = time.perf_counter(), time.process_time()
        with self.counter.counting(self.model):
            if auto and cfg.criterion == "cka":
                prev = self._probe_outputs()
            for epoch in range(self.epochs):
                self._begin_epoch(epoch)
                losses, grad_sq = self._train_epoch(opt, sched, batch, watch_grad)
                row: dict[str, Any] = {"epoch": epoch + 1, "loss": round(float(np.mean(losses)), 4), "frozen": self.frozen}
                grad = [math.sqrt(g / per_epoch) for g in grad_sq]
                if auto:
                    prev, prev_grad = self._auto(epoch + 1, row, prev, prev_grad, grad)
                history.append(row)
                if self.progress is not None:
                    self.progress(
                        f"{cfg.method}: epoch {epoch + 1} of {self.epochs}, loss {row['loss']:.3f}, {self.frozen} blocks frozen",
                        (epoch + 1) / self.epochs,
                    )
        return self._result(history, time.perf_counter() - started, time.process_time() - cpu_started)

    def _begin_epoch(self, epoch: int) -> None:
        """Before epoch ``epoch`` (0-based): the fixed schedule's freezes due now; the cache method reads its cache."""
        cfg = self.cfg
        if cfg.method != "full" and cfg.schedule == "fixed":
            upto = sum(1 for f in cfg.freeze_at if f is not None and f <= epoch)
            if upto > self.frozen:
                self._freeze(upto, epoch)
        if self.frozen and cfg.method == "cache":
            self._load_cache()

    def _train_epoch(
        self, opt: torch.optim.Optimizer, sched: torch.optim.lr_scheduler.LRScheduler, batch: int, watch_grad: bool
    ) -> tuple[list[float], list[float]]:
        """One pass over the shuffled training set; the batch losses and, with ``watch_grad``, each block's summed squared gradients."""
        train = self.train_split
        grad_sq = [0.0] * N_BLOCKS
        losses = []
        order = torch.randperm(len(train), generator=self.gen)
        for i in range(0, len(train), batch):
            idx = order[i : i + batch]
            out = self._forward(idx)
            loss = F.cross_entropy(out, train.y[idx])
            opt.zero_grad(set_to_none=True)
            loss.backward()
            for k in range(self.frozen, N_BLOCKS) if watch_grad else ():
                grad_sq[k] += sum(float(p.grad.pow(2).sum()) for p in self.blocks[k].parameters() if p.grad is not None)
            torch.nn.utils.clip_grad_norm_([p for p in self.model.parameters() if p.requires_grad], 1.0)
            opt.step()
            sched.step()
            losses.append(float(loss.detach()))
        return losses, grad_sq

    def _result(self, history: list[dict[str, Any]], wall: float, cpu: float) -> FreezeResult:
        total = self.counter.total
        return FreezeResult(
            method=self.cfg.method,
            val_accuracy=_accuracy(self.model, self.val.x, self.val.y),
            test_accuracy=_accuracy(self.model, self.test.x, self.test.y),
            wall_s=wall,
            cpu_s=cpu,
            macs=total,
            macs_steps=total - self.macs_build - self.macs_monitor,
            macs_cache_build=self.macs_build,
            macs_monitor=self.macs_monitor,
            cache_bytes=self.max_bytes,
            cache_io_s=self.io_s,
            freeze_epochs=list(self.freeze_epochs),
            stages=self.result_stages,
            epochs=history,
            rebuilt=self.rebuilt,
            events=self.events,
        )

    def _forward(self, idx: torch.Tensor) -> torch.Tensor:
        cfg, f = self.cfg, self.frozen
        if f and cfg.method == "cache":
            h = self._cached_batch(idx)
        else:
            h = augment(self.train_split.x[idx], self.shift, cfg.noise, self.gen)
            if f:  # naive freezing: the frozen prefix still runs, only without autograd
                with torch.no_grad():
                    h = run_blocks(self.blocks, h, 0, f)
        return self.head(run_blocks(self.blocks, h, f))

    def _auto(
        self, done: int, row: dict[str, Any], prev: list[torch.Tensor] | None, prev_grad: list[float] | None, grad: list[float]
    ) -> tuple[list[torch.Tensor] | None, list[float]]:
        """Record the criterion after ``done`` epochs and freeze the next block when it has plateaued."""
        cfg, k = self.cfg, self.frozen
        plateau = False
        if cfg.criterion == "cka":
            outs = self._probe_outputs()
            assert prev is not None
            ckas = [linear_cka(a, b) for a, b in zip(prev, outs, strict=True)]
            row["cka"] = [round(c, 5) for c in ckas]
            plateau = k < N_BLOCKS and ckas[k] >= cfg.cut
            prev = outs
        else:
            row["grad_norm"] = [round(g, 5) for g in grad]
            if prev_grad is not None and k < N_BLOCKS and prev_grad[k] > 0:
                change = abs(grad[k] - prev_grad[k]) / prev_grad[k]
                row["grad_change"] = round(change, 5)
                plateau = change <= cfg.cut
        if plateau and k < cfg.max_frozen and done >= cfg.earliest(self.epochs) and done < self.epochs:
            self._freeze(k + 1, done)
        return prev, grad


def train(
    rec: dict[str, Any], splits: dict[str, Any], cfg: FreezeConfig, cache_dir: Path | None = None, progress: Progress | None = None
) -> FreezeResult:
    """Train the recipe's CNN from scratch under ``cfg`` (module doc).

    Args:
        rec: a zoo recipe (:func:`sim.zoo.recipe`) of a CNN classifier (cnn-digits, cnn-mnist5k).
        splits: its data splits (train, val, test).
        cfg: the method, schedule, cache and augmentation settings.
        cache_dir: where the cache files go (a fresh folder inside it, removed at the end); None: a temporary folder.
        progress: called with ``(what, fraction)`` after each epoch.

    Raises:
        UserInputError: a setting that cannot run, or a cache directory that is not writable or is full.
    """
    if cache_dir is None:
        root = Path(tempfile.mkdtemp(prefix="coevo-freeze-"))
    else:
        check_writable(Path(cache_dir))
        root = Path(tempfile.mkdtemp(prefix="run-", dir=cache_dir))
    threads = torch.get_num_threads()
    try:
        # these CNNs are far too small to gain from intra-op threads; on a shared box extra threads only spin
        # (the tool's CLI run took 20x the CPU time with the default thread count)
        torch.set_num_threads(1)
        torch.manual_seed(cfg.seed)
        return _Trainer(rec, splits, cfg, root, progress).run()
    finally:
        torch.set_num_threads(threads)
        shutil.rmtree(root, ignore_errors=True)


def train_zoo(name: str, cfg: FreezeConfig, cache_dir: Path | None = None, progress: Progress | None = None) -> FreezeResult:
    """:func:`train` on the zoo recipe ``name`` and its splits (``cnn-digits`` or ``cnn-mnist5k``).

    Raises:
        UserInputError: an unknown name or one that is not a CNN classifier (the message lists the zoo).
    """
    from coevo.sim.zoo import ZooError, recipe
    from coevo.sim.zoo.registry import splits_of

    try:
        rec = recipe(name)
    except ZooError as exc:
        raise UserInputError(str(exc)) from None
    if rec["arch"]["kind"] not in SHIFT:
        raise UserInputError(f"{name} is a {rec['arch']['kind']}; layer freezing takes the zoo CNNs cnn-digits and cnn-mnist5k")
    splits, _ = splits_of(rec)
    return train(rec, splits, cfg, cache_dir, progress)


def layer_forward_macs(model: nn.Module, sample: torch.Tensor) -> list[int]:
    """Forward MACs of one sample in conv1, conv2, conv3, fc1, fc2 of a zoo CNN (counted on one call)."""
    counter = MacCounter()
    with torch.no_grad(), counter.counting(model):
        model(sample[:1])
    return [counter.by_layer[name] for name in ("conv1", "conv2", "conv3", "fc1", "fc2")]


def expected_macs(layers: list[int], out_channels: list[int], cfg: FreezeConfig, epochs: int, n_train: int) -> int:
    """The MACs a ``fixed``-schedule run executes, from the schedule alone (what :class:`MacCounter` counts, derived by hand).

    Per training sample with ``f`` blocks frozen, layer ``l >= f`` costs its forward ``F_l``, its weight gradient
    ``F_l`` and, when a trainable layer lies before it (``l > f``), its input gradient ``F_l``; naive freezing adds the
    frozen layers' forward. Each freeze of the cache method runs the new prefix forward on the clean training set, on
    ``versions`` augmented probes of ``probe`` samples (sensitivity), and on ``versions`` augmented copies of the set
    where the prefix's last conv computes only the chosen channels.

    Args:
        layers: per-sample forward MACs of conv1, conv2, conv3, fc1, fc2 (:func:`layer_forward_macs`).
        out_channels: output channels of conv1, conv2, conv3.
        cfg: a ``fixed``-schedule config.
        epochs: epochs trained.
        n_train: training samples.
    """
    if cfg.schedule != "fixed":
        raise ValueError("only a fixed schedule's MACs follow from the config; the auto schedule's depend on training")
    total, frozen = 0, 0
    for epoch in range(epochs):
        f = sum(1 for at in cfg.freeze_at if at is not None and at <= epoch) if cfg.method != "full" else 0
        if f > frozen and cfg.method == "cache":
            prefix = sum(layers[:f])
            total += n_train * prefix
            versions = cfg.versions if cfg.augment != "none" else 0
            if versions:
                total += versions * min(cfg.probe, n_train) * prefix
                share = cfg.share if cfg.augment == "similarity-aware" else 1.0
                k = len(pick_channels(torch.zeros(out_channels[f - 1]), share))
                if k:
                    total += versions * n_train * (sum(layers[: f - 1]) + layers[f - 1] // out_channels[f - 1] * k)
        frozen = f
        step = sum(3 * layers[i] for i in range(f, len(layers))) - layers[f]
        if cfg.method == "naive":
            step += sum(layers[:f])
        total += n_train * step
    return total
