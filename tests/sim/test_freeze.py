"""sim.freeze: blocks, the MAC counter (vs torch's FlopCounterMode and a hand-derived formula), codecs, cache files
(checksums, atomic writes, full or unwritable directories), CKA and channel sensitivity, and the training loop."""

from __future__ import annotations

import errno
import os
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from torch.utils.flop_counter import FlopCounterMode

import coevo.sim.freeze.cache as cache_mod
from coevo.sim.errors import UserInputError
from coevo.sim.freeze import (
    CacheCorruptError,
    CacheWriteError,
    Codec,
    FreezeConfig,
    MacCounter,
    augment,
    channel_sensitivity,
    linear_cka,
    pick_channels,
    read_file,
    split,
    train,
    write_file,
)
from coevo.sim.freeze.cache import dequantize, pack_bits, quantize, unpack_bits
from coevo.sim.freeze.stages import run_blocks
from coevo.sim.freeze.train import expected_macs, layer_forward_macs
from coevo.sim.zoo import DigitsCNN, MnistCNN, recipe
from coevo.sim.zoo.registry import splits_of


@pytest.fixture(scope="module")
def digits() -> tuple[dict, dict]:
    rec = recipe("cnn-digits")
    splits, _ = splits_of(rec)
    return rec, splits


def _features(seed: int = 0, shape: tuple[int, ...] = (40, 6, 7, 7)) -> np.ndarray:
    """Feature-map-like data: smooth positive blobs after a ReLU, a different scale per channel."""
    rng = np.random.default_rng(seed)
    n, c, h, w = shape
    yy, xx = np.mgrid[0:h, 0:w]
    cy, cx = rng.uniform(0, h, (n, c, 1, 1)), rng.uniform(0, w, (n, c, 1, 1))
    blob = np.exp(-((yy - cy) ** 2 + (xx - cx) ** 2) / 6.0) * rng.uniform(0.5, 3.0, (1, c, 1, 1))
    return np.maximum(blob + 0.05 * rng.standard_normal(shape), 0).astype(np.float32)


# ---- blocks and MACs


@pytest.mark.parametrize(("cls", "side"), [(DigitsCNN, 8), (MnistCNN, 28)])
def test_blocks_then_head_is_the_models_forward(cls: type, side: int) -> None:
    torch.manual_seed(0)
    model = cls()
    blocks, head = split(model)
    x = torch.randn(5, 1, side, side)
    assert torch.allclose(head(run_blocks(blocks, x)), model(x), atol=1e-6)
    assert sum(p.numel() for b in blocks for p in b.parameters()) + sum(p.numel() for p in head.parameters()) == sum(
        p.numel() for p in model.parameters()
    )


def test_split_refuses_a_model_it_does_not_know() -> None:
    with pytest.raises(UserInputError, match="cnn-digits or cnn-mnist5k"):
        split(torch.nn.Linear(2, 2))


def test_layer_macs_are_the_hand_counts() -> None:
    # DigitsCNN(16, 64) on 8x8: conv1 16 maps 8x8 of 1x3x3, conv2 32 maps 8x8 of 16x3x3, conv3 64 maps 4x4 of 32x3x3,
    # fc1 256 -> 64, fc2 64 -> 10
    assert layer_forward_macs(DigitsCNN(), torch.zeros(1, 1, 8, 8)) == [
        16 * 64 * 9, 32 * 64 * 16 * 9, 64 * 16 * 32 * 9, 256 * 64, 64 * 10,
    ]  # fmt: skip
    # MnistCNN: 28 -> pool 14 -> pool 7 -> pool 3; conv1 16 x 28x28 x 9, conv2 32 x 14x14 x 16x9, conv3 64 x 7x7 x 32x9
    assert layer_forward_macs(MnistCNN(), torch.zeros(1, 1, 28, 28))[:4] == [16 * 784 * 9, 32 * 196 * 144, 64 * 49 * 288, 576 * 64]


@pytest.mark.parametrize("frozen", [0, 1, 2, 3])
def test_mac_counter_agrees_with_torch_flop_counter(frozen: int) -> None:
    # FlopCounterMode counts the aten convolution / matmul calls of forward and backward (2 FLOPs per MAC)
    torch.manual_seed(0)
    model = DigitsCNN()
    blocks, head = split(model)
    for b in blocks[:frozen]:
        b.requires_grad_(False)
    x, y = torch.randn(7, 1, 8, 8), torch.randint(0, 10, (7,))
    counter = MacCounter()
    with counter.counting(model), FlopCounterMode(display=False) as ref:
        with torch.no_grad():
            h = run_blocks(blocks, x, 0, frozen)
        F.cross_entropy(head(run_blocks(blocks, h, frozen)), y).backward()
    assert 2 * counter.total == ref.get_total_flops()
    assert counter.backward > 0 and counter.forward == 7 * sum(layer_forward_macs(model, x))


def test_expected_macs_is_what_the_counter_counts(digits: tuple[dict, dict]) -> None:
    rec, splits = digits
    layers = layer_forward_macs(DigitsCNN(), splits["train"].x)
    base = FreezeConfig(schedule="fixed", freeze_at=(1, 1, 2), epochs=3)
    for cfg in (
        replace(base, method="full"),
        replace(base, method="naive"),
        replace(base, augment="none"),
        base,
        replace(base, augment="full", versions=2),
        replace(base, freeze_at=(1, 2, None), share=0.3),
    ):
        r = train(rec, splits, cfg)
        assert r.macs == expected_macs(layers, [16, 32, 64], cfg, 3, len(splits["train"])), cfg
    n, total = len(splits["train"]), sum(layers)
    # full training by hand: every layer forward + weight gradient, every layer but conv1 its input gradient
    assert expected_macs(layers, [16, 32, 64], replace(base, method="full"), 3, n) == 3 * n * (3 * total - layers[0])


# ---- codecs and files


def test_bit_packing_matches_numpy_packbits() -> None:
    rng = np.random.default_rng(1)
    for bits in (4, 6, 8):
        for n in (1, 3, 7, 1001):
            q = rng.integers(0, 1 << bits, n).astype(np.uint8)
            ref = np.packbits(np.unpackbits(q[:, None], axis=1)[:, 8 - bits :]).tobytes()
            assert pack_bits(q, bits) == ref and len(ref) == -(-n * bits // 8)
            assert np.array_equal(unpack_bits(ref, bits, n), q)


@pytest.mark.parametrize("bits", [4, 6, 8])
def test_per_channel_quantization_error_is_at_most_half_a_step(bits: int) -> None:
    x = _features()
    q, lo, hi = quantize(x, bits)
    back = dequantize(q, lo, hi, bits)
    step = (hi - lo) / ((1 << bits) - 1)
    assert np.all(np.abs(back - x) <= step[None, :, None, None] / 2 + 1e-5)
    assert np.allclose(lo, x.min(axis=(0, 2, 3))) and np.allclose(hi, x.max(axis=(0, 2, 3)))


def test_codecs_round_trip_and_trade_bytes_for_error(tmp_path: Path) -> None:
    x = _features(shape=(120, 4, 7, 7))
    sizes, errors = {}, {}
    for codec in (Codec("float32"), Codec("quant", 8), Codec("quant", 4), Codec("zstd", 8), Codec("zstd", 4),
                  Codec("jpeg", quality=95), Codec("jpeg", quality=30), Codec("webp", quality=90)):  # fmt: skip
        size = write_file(tmp_path / "a.fcache", x, codec)
        back, meta = read_file(tmp_path / "a.fcache")
        assert back.shape == x.shape and meta["codec"] == codec.kind and size == (tmp_path / "a.fcache").stat().st_size
        sizes[codec.label()], errors[codec.label()] = size, float(np.abs(back - x).mean())
    assert errors["float32"] == 0
    assert errors["zstd-8b"] == errors["quant-8b"] and errors["zstd-4b"] == errors["quant-4b"]  # zstd is lossless on top
    assert sizes["zstd-4b"] < sizes["quant-4b"] < sizes["quant-8b"] < sizes["float32"]
    assert errors["jpeg-q95"] < errors["jpeg-q30"] < 0.1 * float(x.max()) and sizes["jpeg-q30"] < sizes["jpeg-q95"]
    assert errors["webp-q90"] < 0.05 * float(x.max())
    # quant payload: exactly N*C*H*W*bits/8 bytes (the headers of the two files have the same length)
    assert sizes["quant-8b"] - sizes["quant-4b"] == x.size // 2


def test_a_corrupt_or_truncated_file_is_detected(tmp_path: Path) -> None:
    path = tmp_path / "f.fcache"
    write_file(path, _features(), Codec("zstd", 6))
    data = bytearray(path.read_bytes())
    data[-10] ^= 0x01
    path.write_bytes(bytes(data))
    with pytest.raises(CacheCorruptError, match="checksum"):
        read_file(path)
    path.write_bytes(bytes(data[: len(data) // 2]))
    with pytest.raises(CacheCorruptError):
        read_file(path)
    path.write_bytes(b"not a cache")
    with pytest.raises(CacheCorruptError, match="magic"):
        read_file(path)


def test_an_unwritable_cache_dir_is_a_clear_error(tmp_path: Path, digits: tuple[dict, dict]) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("x")  # a folder below a regular file cannot exist, even for root
    with pytest.raises(CacheWriteError, match="not writable"):
        train(*digits, FreezeConfig(epochs=1), cache_dir=blocker / "cache")


def test_a_full_disk_leaves_no_half_written_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    def full(path: Path, data: bytes) -> None:
        with open(path, "wb") as f:
            f.write(data[: len(data) // 3])  # part of the file reaches the disk, then the disk is full
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(cache_mod, "_write_bytes", full)
    with pytest.raises(CacheWriteError, match="full"):
        write_file(tmp_path / "f.fcache", _features(), Codec("quant", 8))
    assert list(tmp_path.iterdir()) == []


# ---- similarity


def test_linear_cka_matches_the_feature_space_formula_and_its_invariances() -> None:
    g = torch.Generator().manual_seed(0)
    x = torch.randn(50, 8, generator=g, dtype=torch.float64)
    y = torch.randn(50, 5, generator=g, dtype=torch.float64) + x[:, :5]
    xc, yc = x - x.mean(0), y - y.mean(0)
    ref = float(torch.linalg.norm(yc.T @ xc) ** 2 / (torch.linalg.norm(xc.T @ xc) * torch.linalg.norm(yc.T @ yc)))
    assert linear_cka(x, y) == pytest.approx(ref, rel=1e-9)
    q, _ = torch.linalg.qr(torch.randn(8, 8, generator=g, dtype=torch.float64))
    assert linear_cka(x, 3.0 * x @ q + 1.0) == pytest.approx(1.0, abs=1e-9)  # rotation, scale and shift
    assert linear_cka(x, torch.randn(50, 8, generator=g, dtype=torch.float64)) < 0.5


def test_channel_sensitivity_by_hand() -> None:
    clean = torch.tensor([[[[1.0, 0.0]], [[1.0, 0.0]], [[0.0, 0.0]]]])  # 1 sample, 3 channels of 1x2
    aug = torch.tensor([[[[[2.0, 0.0]], [[0.0, 1.0]], [[0.0, 0.0]]]]])  # scaled; orthogonal; dead in both
    sens = channel_sensitivity(clean, aug)
    assert torch.allclose(sens, torch.tensor([0.0, 1.0, 0.0]))
    assert pick_channels(sens, 1 / 3).tolist() == [1]
    assert pick_channels(torch.tensor([0.1, 0.5, 0.3, 0.9]), 0.5).tolist() == [1, 3]
    assert pick_channels(sens, 0.0).numel() == 0


def test_augment_shifts_by_at_most_the_shift() -> None:
    x = torch.zeros(20, 1, 9, 9)
    x[:, 0, 4, 4] = 1.0
    g = torch.Generator().manual_seed(0)
    assert torch.equal(augment(x, 0, 0.0, g), x)
    out = augment(x, 2, 0.0, g)
    assert out.shape == x.shape and torch.all(out.sum(dim=(1, 2, 3)) == 1.0)
    where = out[:, 0].flatten(1).argmax(1)
    rows, cols = where // 9, where % 9
    assert torch.all((rows - 4).abs() <= 2) and torch.all((cols - 4).abs() <= 2) and len(set(where.tolist())) > 1


# ---- the training loop


def test_float32_cache_without_augmentation_trains_like_naive_freezing(digits: tuple[dict, dict]) -> None:
    # no input augmentation: the cached features are the frozen prefix's outputs exactly, so the two runs agree
    # (up to float rounding of batch size), while the cache skips the prefix's forward every step
    cfg = FreezeConfig(schedule="fixed", freeze_at=(1, 2, None), epochs=4, codec="float32", augment="none", shift=0, noise=0.0)
    naive, cached = train(*digits, replace(cfg, method="naive")), train(*digits, cfg)
    assert [e["loss"] for e in naive.epochs] == pytest.approx([e["loss"] for e in cached.epochs], abs=2e-3)
    assert abs(naive.val_accuracy - cached.val_accuracy) <= 1.0
    full = train(*digits, replace(cfg, method="full"))
    assert cached.macs < naive.macs < full.macs and full.cache_bytes == naive.cache_bytes == 0
    assert cached.cache_bytes == max(s["bytes"] for s in cached.stages)  # one stage on disk at a time


def test_similarity_aware_cache_stores_only_the_chosen_channels(digits: tuple[dict, dict]) -> None:
    cfg = FreezeConfig(schedule="fixed", freeze_at=(1, 2, None), epochs=3, codec="float32", share=0.25, versions=2)
    sim = train(*digits, cfg)
    full = train(*digits, replace(cfg, augment="full"))
    none = train(*digits, replace(cfg, augment="none"))
    n = len(digits[1]["train"])
    for r, channels in ((sim, 8), (full, 32), (none, 0)):  # conv2's 32 channels of 4x4 at the second stage
        stage = r.stages[-1]
        assert len(stage["channels_augmented"]) == channels
        payload = n * 4 * 16 * (32 + 2 * channels)  # float32: clean maps of all channels, 2 versions of the chosen ones
        files = 1 + (2 if channels else 0)
        assert payload < stage["bytes"] < payload + files * 1000  # each file adds magic, length and a short JSON header
    sens = torch.tensor(sim.stages[-1]["sensitivity"])
    chosen = sim.stages[-1]["channels_augmented"]
    assert float(sens[chosen].min()) >= float(sens[[c for c in range(32) if c not in chosen]].max())


def test_a_corrupt_cache_file_is_detected_and_rebuilt(digits: tuple[dict, dict], tmp_path: Path) -> None:
    cfg = FreezeConfig(schedule="fixed", freeze_at=(1, None, None), epochs=3, codec="zstd", versions=1)
    clean = train(*digits, cfg, cache_dir=tmp_path)

    def corrupt(what: str, fraction: float) -> None:
        if fraction == pytest.approx(2 / 3):  # after epoch 2, before epoch 3 reads the cache
            (path,) = tmp_path.glob("run-*/stage1-clean.fcache")
            data = bytearray(path.read_bytes())
            data[-5] ^= 0xFF
            path.write_bytes(bytes(data))

    hit = train(*digits, cfg, cache_dir=tmp_path, progress=corrupt)
    assert hit.rebuilt == 1 and any("corrupt" in e for e in hit.events)
    assert hit.val_accuracy == clean.val_accuracy  # the rebuilt cache holds the same features (seeded)
    assert hit.macs - clean.macs == clean.macs_cache_build  # one more build, counted
    assert list(tmp_path.iterdir()) == []  # the run folder is removed at the end


def test_auto_schedules_freeze_prefixes_in_order(digits: tuple[dict, dict]) -> None:
    for criterion, threshold in (("cka", 0.99), ("gradnorm", 0.5)):
        r = train(*digits, FreezeConfig(method="naive", schedule="auto", criterion=criterion, threshold=threshold, epochs=8, min_epochs=2))
        frozen = [f for f in r.freeze_epochs if f is not None]
        assert frozen and frozen == sorted(frozen) and len(set(frozen)) == len(frozen) and frozen[0] >= 2
        assert r.freeze_epochs[2] is None  # max_frozen 2: conv3 keeps training
        assert all("cka" in e if criterion == "cka" else "grad_norm" in e for e in r.epochs)
        k = 0  # the first block froze at the first epoch its criterion crossed the threshold (after min_epochs)
        e = r.epochs[frozen[0] - 1]
        assert e["cka"][k] >= threshold if criterion == "cka" else e["grad_change"] <= threshold


@pytest.mark.parametrize(
    ("cfg", "match"),
    [
        (FreezeConfig(schedule="fixed", freeze_at=(3, 2, None)), "must rise"),
        (FreezeConfig(schedule="fixed", freeze_at=(None, 2, None)), "no epoch may follow a None"),
        (FreezeConfig(schedule="fixed", freeze_at=(1, 2)), "3 entries"),
        (FreezeConfig(codec="zstd", bits=(8, 5, 4)), "5 bits"),
        (FreezeConfig(codec="jpeg", quality=(90, 0, 50)), "quality 0"),
        (FreezeConfig(share=1.5), "share"),
        (FreezeConfig(codec="png"), "codec"),  # type: ignore[arg-type]
    ],
)
def test_bad_settings_are_refused(cfg: FreezeConfig, match: str, digits: tuple[dict, dict]) -> None:
    with pytest.raises(UserInputError, match=match):
        train(*digits, replace(cfg, epochs=4))
