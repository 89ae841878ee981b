"""The on-disk feature cache: lossy codecs for feature maps, checksummed files, atomic writes.

A cached tensor ``[N, C, H, W]`` (the frozen prefix's outputs) is stored with one of these codecs:

* ``float32``: the raw values (the reference, no loss).
* ``quant``: per-channel uniform quantization to ``bits`` (4, 6 or 8) between the channel's min
  and max over the whole tensor, bit-packed (``N*C*H*W*bits/8`` bytes plus two floats a channel).
* ``zstd``: ``quant``'s packed bytes compressed with Zstandard (lossless on top of the quantization).
* ``jpeg`` / ``webp``: per-channel quantization to 8 bits, then each channel's maps of all samples
  tiled into greyscale images (at most 4096 px a side) and encoded by Pillow at ``quality``.

File format: ``b"COEVOFC1"``, a 4-byte little-endian header length, a JSON header, the payload.
The header holds the shape, codec, scales and a SHA-256 over the header's fields and the
payload, so a truncated or altered file is detected (:class:`CacheCorruptError`) and the caller
rebuilds it. Files are written to a temporary name in the same directory and renamed into place
only when complete, so a killed run or a full disk never leaves a half-written file under the
real name; a directory that cannot be written or fills up is a :class:`CacheWriteError` that says
which directory and what to do.
"""

from __future__ import annotations

import errno
import hashlib
import io
import json
import math
import os
import struct
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import numpy as np

from coevo.sim.errors import CoevoError, UserInputError

MAGIC = b"COEVOFC1"
CodecKind = Literal["float32", "quant", "zstd", "jpeg", "webp"]
CODECS: tuple[str, ...] = ("float32", "quant", "zstd", "jpeg", "webp")
BITS = (4, 6, 8)
MAX_SIDE = 4096
"""Largest side of a tiled image (WebP allows 16383; smaller images keep Pillow's memory low)."""


class CacheCorruptError(CoevoError):
    """A cache file is truncated, altered or not a cache file (its checksum or format does not match)."""


class CacheWriteError(UserInputError):
    """The cache directory cannot be written (not a directory, no permission, read-only, full)."""


@dataclass(frozen=True)
class Codec:
    """How one cached tensor is compressed: ``kind``, ``bits`` (quant, zstd) and ``quality`` (jpeg, webp, 1-100)."""

    kind: CodecKind = "zstd"
    bits: int = 8
    quality: int = 90

    def __post_init__(self) -> None:
        if self.kind not in CODECS:
            raise UserInputError(f"cache codec {self.kind!r}: use one of {', '.join(CODECS)}")
        if self.kind in ("quant", "zstd") and self.bits not in BITS:
            raise UserInputError(f"{self.bits} bits: per-channel quantization takes {', '.join(map(str, BITS))} bits")
        if self.kind in ("jpeg", "webp") and not 1 <= self.quality <= 100:
            raise UserInputError(f"{self.kind} quality {self.quality}: use 1 to 100")

    def label(self) -> str:
        """Short text, e.g. ``zstd-6b`` or ``jpeg-q75``."""
        if self.kind == "float32":
            return "float32"
        return f"{self.kind}-q{self.quality}" if self.kind in ("jpeg", "webp") else f"{self.kind}-{self.bits}b"


# ---- per-channel quantization and bit packing


def quantize(x: np.ndarray, bits: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per-channel (axis 1) uniform quantization: integer levels (uint8), channel minima and maxima (float32)."""
    levels = (1 << bits) - 1
    axes = tuple(i for i in range(x.ndim) if i != 1)
    lo = x.min(axis=axes).astype(np.float32)
    hi = x.max(axis=axes).astype(np.float32)
    shape = [1] * x.ndim
    shape[1] = -1
    span = np.where(hi > lo, hi - lo, 1.0).reshape(shape)
    q = np.rint((x - lo.reshape(shape)) / span * levels)
    return np.clip(q, 0, levels).astype(np.uint8), lo, hi


def dequantize(q: np.ndarray, lo: np.ndarray, hi: np.ndarray, bits: int) -> np.ndarray:
    """Inverse of :func:`quantize` (float32); the error is at most half a step, ``(hi - lo) / (2^bits - 1) / 2``."""
    levels = (1 << bits) - 1
    shape = [1] * q.ndim
    shape[1] = -1
    span = np.where(hi > lo, hi - lo, 0.0).reshape(shape)
    return (lo.reshape(shape) + q.astype(np.float32) * (span / levels)).astype(np.float32)


def _group(bits: int) -> tuple[int, int]:
    """(values, bytes) of the smallest run of ``bits``-bit values that fills whole bytes: 4 bits 2 in 1, 6 bits 4 in 3."""
    g = 8 // math.gcd(bits, 8)
    return g, bits * g // 8


def pack_bits(q: np.ndarray, bits: int) -> bytes:
    """The low ``bits`` bits of every uint8 value, concatenated most significant first, zero-padded to whole bytes.

    Vectorised by groups of values that fill whole bytes (the same bit stream as ``np.packbits``
    of every value's low bits, which the tests use as the reference).
    """
    flat = q.reshape(-1)
    if bits == 8:
        return flat.tobytes()
    g, nb = _group(bits)
    vals = np.zeros(math.ceil(len(flat) / g) * g, dtype=np.uint64)
    vals[: len(flat)] = flat & ((1 << bits) - 1)
    rows = vals.reshape(-1, g)
    acc = np.zeros(len(rows), dtype=np.uint64)
    for j in range(g):
        acc |= rows[:, j] << np.uint64(bits * (g - 1 - j))
    out = np.stack([(acc >> np.uint64(8 * (nb - 1 - i))) & np.uint64(255) for i in range(nb)], axis=1).astype(np.uint8)
    return out.reshape(-1)[: math.ceil(len(flat) * bits / 8)].tobytes()


def unpack_bits(data: bytes, bits: int, count: int) -> np.ndarray:
    """Inverse of :func:`pack_bits`: ``count`` uint8 values."""
    raw = np.frombuffer(data, dtype=np.uint8)
    if bits == 8:
        return raw[:count].copy()
    g, nb = _group(bits)
    groups = math.ceil(count / g)
    padded = np.zeros(groups * nb, dtype=np.uint64)
    padded[: len(raw)] = raw[: groups * nb]
    grouped = padded.reshape(-1, nb)
    acc = np.zeros(groups, dtype=np.uint64)
    for i in range(nb):
        acc |= grouped[:, i] << np.uint64(8 * (nb - 1 - i))
    mask = np.uint64((1 << bits) - 1)
    vals = np.stack([(acc >> np.uint64(bits * (g - 1 - j))) & mask for j in range(g)], axis=1).astype(np.uint8)
    return vals.reshape(-1)[:count]


# ---- tiling channel maps into images for JPEG / WebP


def _grid(n: int, h: int, w: int) -> tuple[int, int, int]:
    """(samples per image, columns, rows) of the tiling of ``n`` maps of ``h x w``."""
    cols = max(1, min(math.ceil(math.sqrt(n)), MAX_SIDE // w))
    rows_max = max(1, MAX_SIDE // h)
    per_image = min(n, cols * rows_max)
    return per_image, cols, math.ceil(per_image / cols)


def _tile(maps: np.ndarray, cols: int, rows: int) -> np.ndarray:
    n, h, w = maps.shape
    canvas = np.zeros((rows * h, cols * w), dtype=np.uint8)
    for i in range(n):
        r, c = divmod(i, cols)
        canvas[r * h : (r + 1) * h, c * w : (c + 1) * w] = maps[i]
    return canvas


def _untile(canvas: np.ndarray, n: int, h: int, w: int, cols: int) -> np.ndarray:
    out = np.empty((n, h, w), dtype=np.uint8)
    for i in range(n):
        r, c = divmod(i, cols)
        out[i] = canvas[r * h : (r + 1) * h, c * w : (c + 1) * w]
    return out


def _image_encode(q: np.ndarray, kind: str, quality: int) -> tuple[bytes, list[int]]:
    from PIL import Image

    n, ch, h, w = q.shape
    per_image, cols, _ = _grid(n, h, w)
    parts, sizes = [], []
    for c in range(ch):
        for start in range(0, n, per_image):
            chunk = q[start : start + per_image, c]
            buf = io.BytesIO()
            img = Image.fromarray(_tile(chunk, cols, math.ceil(len(chunk) / cols)), mode="L")
            if kind == "jpeg":
                img.save(buf, format="JPEG", quality=quality)
            else:
                img.save(buf, format="WEBP", quality=quality, method=1)  # fast encoder settings: the cache is written during training
            parts.append(buf.getvalue())
            sizes.append(len(parts[-1]))
    return b"".join(parts), sizes


def _image_decode(payload: bytes, sizes: list[int], shape: tuple[int, ...]) -> np.ndarray:
    from PIL import Image

    n, ch, h, w = shape
    per_image, cols, _ = _grid(n, h, w)
    out = np.empty(shape, dtype=np.uint8)
    pos, k = 0, 0
    for c in range(ch):
        for start in range(0, n, per_image):
            count = min(per_image, n - start)
            with Image.open(io.BytesIO(payload[pos : pos + sizes[k]])) as img:
                canvas = np.asarray(img.convert("L"))
            out[start : start + count, c] = _untile(canvas, count, h, w, cols)
            pos += sizes[k]
            k += 1
    return out


# ---- encode / decode one tensor


def encode(x: np.ndarray, codec: Codec) -> tuple[dict[str, Any], bytes]:
    """A ``[N, C, H, W]`` float array as (header fields, payload bytes)."""
    if x.ndim != 4:
        raise ValueError(f"the cache stores [N, C, H, W] feature maps, got shape {x.shape}")
    x = np.ascontiguousarray(x, dtype=np.float32)
    meta: dict[str, Any] = {"shape": list(x.shape), "codec": codec.kind, "bits": codec.bits, "quality": codec.quality}
    if codec.kind == "float32":
        return meta, x.tobytes()
    bits = 8 if codec.kind in ("jpeg", "webp") else codec.bits
    q, lo, hi = quantize(x, bits)
    meta.update(bits=bits, lo=lo.tolist(), hi=hi.tolist())
    if codec.kind == "quant":
        return meta, pack_bits(q, bits)
    if codec.kind == "zstd":
        import zstandard

        return meta, zstandard.ZstdCompressor(level=3).compress(pack_bits(q, bits))
    payload, sizes = _image_encode(q, codec.kind, codec.quality)
    meta["sizes"] = sizes
    return meta, payload


def decode(meta: dict[str, Any], payload: bytes) -> np.ndarray:
    """Inverse of :func:`encode` (float32; lossy codecs give the dequantized values)."""
    shape = tuple(int(s) for s in meta["shape"])
    count = int(np.prod(shape))
    kind = meta["codec"]
    if kind == "float32":
        return np.frombuffer(payload, dtype=np.float32).reshape(shape).copy()
    bits = int(meta["bits"])
    if kind == "quant":
        q = unpack_bits(payload, bits, count).reshape(shape)
    elif kind == "zstd":
        import zstandard

        q = unpack_bits(zstandard.ZstdDecompressor().decompress(payload), bits, count).reshape(shape)
    else:
        q = _image_decode(payload, list(meta["sizes"]), shape)
    lo = np.asarray(meta["lo"], dtype=np.float32)
    hi = np.asarray(meta["hi"], dtype=np.float32)
    return dequantize(q, lo, hi, bits)


# ---- files


def _digest(meta: dict[str, Any], payload: bytes) -> str:
    return hashlib.sha256(json.dumps(meta, sort_keys=True).encode() + payload).hexdigest()


def check_writable(directory: Path) -> None:
    """Create ``directory`` if needed and write and remove a probe file in it.

    Raises:
        CacheWriteError: it cannot be created or written (the message names it and what to do).
    """
    try:
        directory.mkdir(parents=True, exist_ok=True)
        probe = directory / f".probe.{os.getpid()}.tmp"
        probe.write_bytes(b"ok")
        probe.unlink()
    except OSError as exc:
        raise _write_error(directory, "", exc) from None


def _write_error(directory: Path, name: str, exc: OSError) -> CacheWriteError:
    what = f"writing {name} in " if name else ""
    if exc.errno in (errno.ENOSPC, errno.EDQUOT):
        return CacheWriteError(
            f"{what}the feature cache directory {directory} failed: the disk is full ({exc.strerror}); "
            "free space there or give a cache_dir on a disk with room (nothing half-written was kept)"
        )
    return CacheWriteError(
        f"{what}the feature cache directory {directory} failed: it is not writable ({type(exc).__name__}: {exc.strerror or exc}); "
        "give a cache_dir you can write"
    )


def _write_bytes(path: Path, data: bytes) -> None:
    with open(path, "wb") as f:
        f.write(data)
        f.flush()
        os.fsync(f.fileno())


def write_file(path: Path, x: np.ndarray, codec: Codec, extra: dict[str, Any] | None = None) -> int:
    """Encode ``x`` and write it to ``path`` atomically (temporary name, then rename); the file's size in bytes.

    Raises:
        CacheWriteError: the directory is not writable or full; no file is left under either name.
    """
    meta, payload = encode(x, codec)
    meta.update(extra or {})
    header = json.dumps({"meta": meta, "sha256": _digest(meta, payload)}).encode()
    data = MAGIC + struct.pack("<I", len(header)) + header + payload
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        _write_bytes(tmp, data)
        os.replace(tmp, path)
    except OSError as exc:
        tmp.unlink(missing_ok=True)
        raise _write_error(path.parent, path.name, exc) from None
    return len(data)


def read_verified(path: Path) -> tuple[dict[str, Any], bytes, str]:
    """Header fields, payload and checksum of a cache file, after checking its format and checksum (nothing decoded).

    Raises:
        CacheCorruptError: missing, truncated, altered, or not a cache file.
    """
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise CacheCorruptError(f"cache file {path} cannot be read: {exc}") from None
    if len(data) < len(MAGIC) + 4 or not data.startswith(MAGIC):
        raise CacheCorruptError(f"{path} is not a feature cache file (bad magic)")
    (n,) = struct.unpack("<I", data[len(MAGIC) : len(MAGIC) + 4])
    start = len(MAGIC) + 4
    try:
        head = json.loads(data[start : start + n])
        meta, digest = head["meta"], head["sha256"]
    except (ValueError, KeyError, TypeError) as exc:
        raise CacheCorruptError(f"{path}: the header does not read ({exc})") from None
    payload = data[start + n :]
    if not isinstance(meta, dict) or _digest(meta, payload) != digest:
        raise CacheCorruptError(f"{path}: checksum mismatch (the file was truncated or altered)")
    return meta, payload, str(digest)


def read_file(path: Path) -> tuple[np.ndarray, dict[str, Any]]:
    """The tensor and header fields of a cache file, after checking its format and checksum.

    Raises:
        CacheCorruptError: missing, truncated, altered, or not a cache file.
    """
    meta, payload, _ = read_verified(path)
    return decode(meta, payload), meta
