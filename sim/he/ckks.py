"""Encrypted LinGCN inference under CKKS (TenSEAL), its multiplicative depth, and its cost.

Packing (CryptoNets-style, batch in slots): one CKKS ciphertext per node and channel; its
slots hold that value for a batch of up to ``N/2`` samples. No ciphertext rotation is ever
needed (no Galois keys), every node's activation is its own ciphertext (so a non-linearity
costs at its node only), and one pass classifies the whole batch: the latency of one query
equals the latency of a pass, and the amortised cost per sample is the pass over the batch size.

The client encrypts the pixel intensities; the coordinates and all weights are plaintext on
the server. The network (:mod:`sim.he.model`: blocks of graph conv -> act -> node-wise linear
-> act) is compiled to an :class:`HEPlan`, one :class:`PlanLayer` per linear operation and
the activation after it (a node-wise linear is a layer whose adjacency is the identity):

* A **kept** non-linearity is the node's trainable degree-2 polynomial in ``t = z / r_l``
  (``r_l``: the layer's largest |pre-activation| on the training split, folded into ``W`` and
  ``b`` so that powers stay within [-1, 1]). Its pre-activation ``t`` is materialised by one
  plaintext-scalar x ciphertext linear combination (1 level) and squared (ct x ct,
  relinearised, 1 level); the coefficients enter the next linear combination (fused, no level).
* A **removed** (linear) node is never computed: its value stays a plaintext linear combination
  of materialised values (:class:`Lazy`) and is expanded into the next linear operation, so the
  linear operations before and after it compose into one (LinGCN's fusion of linear nodes).
* The head (flatten or mean) is one more linear combination: 1 level.

So a path costs 2 levels per kept non-linearity on it, plus 1. Depth is counted analytically
by running the same evaluation on a level-counting backend (:class:`LevelBackend`), checked
against the TenSEAL ciphertexts' remaining modulus chain after a real run, and the
coefficient-modulus chain is chosen from it (:func:`params_for_depth`).
"""

from __future__ import annotations

import itertools
import json
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Generic, Protocol, TypeVar

import numpy as np

from coevo.sim.errors import UserInputError
from coevo.sim.zoo.cache_files import DamagedCache, atomic_write, exclusive, note, rebuilt_note

SEAL_MAX_BITS: dict[int, int] = {1024: 27, 2048: 54, 4096: 109, 8192: 218, 16384: 438, 32768: 881}
"""Largest total coefficient-modulus bits per polynomial modulus degree at 128-bit classical security (SEAL's table)."""
SKIP = 1e-7
"""Plaintext coefficients below this magnitude are left out of a linear combination (their term is below CKKS noise;
multiplying by an encoding of zero would also make SEAL refuse a transparent ciphertext)."""

V = TypeVar("V")


@dataclass(frozen=True)
class HEParams:
    """CKKS parameters.

    Attributes:
        poly_modulus_degree: ring dimension ``N`` (slots: ``N/2``).
        coeff_mod_bit_sizes: the modulus chain: first prime (decryption precision), one prime per
            multiplicative level (their size is the scale), last (special) prime.
    """

    poly_modulus_degree: int
    coeff_mod_bit_sizes: tuple[int, ...]

    @property
    def levels(self) -> int:
        """Multiplicative levels the chain holds (rescales before the first prime is reached)."""
        return len(self.coeff_mod_bit_sizes) - 2

    @property
    def scale_bits(self) -> int:
        """log2 of the CKKS scale (the size of the middle primes)."""
        return self.coeff_mod_bit_sizes[1] if len(self.coeff_mod_bit_sizes) > 2 else self.coeff_mod_bit_sizes[0]

    @property
    def total_bits(self) -> int:
        """Total coefficient-modulus bits."""
        return sum(self.coeff_mod_bit_sizes)

    def check_domain(self) -> None:
        """Raise :class:`UserInputError` unless the ring dimension is one SEAL offers and the primes have 20..60 bits.

        What does not depend on the network: callers check it before training one (:func:`sim.he.run.he_gcn`).
        """
        n = self.poly_modulus_degree
        if n not in SEAL_MAX_BITS:
            raise UserInputError(f"poly_modulus_degree must be one of {sorted(SEAL_MAX_BITS)}, got {n}")
        if len(self.coeff_mod_bit_sizes) < 2 or any(not 20 <= b <= 60 for b in self.coeff_mod_bit_sizes):
            raise UserInputError(f"coeff_mod_bit_sizes needs at least 2 primes of 20..60 bits, got {list(self.coeff_mod_bit_sizes)}")

    def check(self, depth: int) -> None:
        """Raise :class:`UserInputError` unless these parameters are valid, secure and hold ``depth`` levels.

        The message names the parameter to raise.
        """
        self.check_domain()
        n = self.poly_modulus_degree
        need_n = next((m for m in sorted(SEAL_MAX_BITS) if SEAL_MAX_BITS[m] >= self.total_bits), None)
        if self.levels < depth:
            bits = self.coeff_mod_bit_sizes
            longer = [bits[0]] + [self.scale_bits] * depth + [bits[-1]]
            fit = next((m for m in sorted(SEAL_MAX_BITS) if SEAL_MAX_BITS[m] >= sum(longer)), None)
            raise UserInputError(
                f"the network needs multiplicative depth {depth} but coeff_mod_bit_sizes {list(bits)} holds {self.levels} levels: "
                f"raise the length of coeff_mod_bit_sizes to {depth + 2} (e.g. {longer}, {sum(longer)} bits)"
                + (f" and poly_modulus_degree to at least {fit} for 128-bit security" if fit and fit > n else "")
                + (
                    "; no ring dimension holds that chain: lower the scale bits or the depth (a lower linearization budget)"
                    if fit is None
                    else ""
                )
            )
        if self.total_bits > SEAL_MAX_BITS[n]:
            raise UserInputError(
                f"coeff_mod_bit_sizes total {self.total_bits} bits, over the 128-bit-security limit {SEAL_MAX_BITS[n]} of "
                f"poly_modulus_degree {n}: raise poly_modulus_degree to {need_n}"
                + ("" if need_n else " (none is large enough: shorten the chain)")
            )


MAX_SCALE_BITS = 40
"""The largest scale :func:`params_for_depth` grows to: scaled values (|v| < 2^headroom) stay well inside a double's
53-bit mantissa when they are encoded."""


def params_for_depth(
    depth: int, scale_bits: int = 28, headroom_bits: int = 7, poly_modulus_degree: int | None = None, *, fill: bool = True
) -> HEParams:
    """The smallest secure CKKS parameters holding ``depth`` levels at the given scale.

    The chain is ``[scale + headroom] + [scale] * depth + [scale + headroom]``: the first prime keeps
    ``headroom_bits`` of integer part for decrypted values (|v| < 2^headroom), the special prime matches it.
    The ring is the smallest that holds the chain at ``scale_bits``; with ``fill`` the scale then
    grows (up to :data:`MAX_SCALE_BITS`) to use the modulus that ring allows at 128-bit security.
    The cost of a pass follows the ring and the number of primes, not their size, so the extra
    precision is free: at depth 9 a 28-bit scale left 116 of N=16384's 438 bits unused and let
    1.5 % of the encrypted predictions differ from plaintext.

    Raises:
        UserInputError: no ring dimension (or not the given one) holds the chain.
    """
    if depth < 0:
        raise UserInputError(f"depth must be >= 0, got {depth}")
    outer = scale_bits + headroom_bits
    bits = (outer, *([scale_bits] * depth), outer)
    choices = [poly_modulus_degree] if poly_modulus_degree else sorted(SEAL_MAX_BITS)
    for n in choices:
        if n in SEAL_MAX_BITS and SEAL_MAX_BITS[n] >= sum(bits) and n >= 2048:
            if fill:
                grown = min(MAX_SCALE_BITS, (SEAL_MAX_BITS[n] - 2 * headroom_bits) // (depth + 2))
                scale = max(scale_bits, grown)
                bits = (scale + headroom_bits, *([scale] * depth), scale + headroom_bits)
            return HEParams(n, bits)
    params = HEParams(poly_modulus_degree or 32768, bits)
    params.check(depth)  # raises with the parameter to raise
    return params


# ---- the compiled network -------------------------------------------------------------------


@dataclass
class PlanLayer:
    """One linear operation and the activation after it, in the scaled variable ``t = z / r``.

    Attributes:
        w: ``(F_in, F_out)`` weights applied to the encrypted input channels (already divided by ``r``).
        const: ``(n, F_out)`` plaintext part of ``t`` (public features, bias), already divided by ``r``.
        coef: ``(n, 3)`` activation coefficients per node in powers of ``t`` (``c_0, c_1, c_2``), the same for every channel.
        kept: ``(n,)`` True where the node keeps its non-linearity (a degree-2 polynomial); False: linear (``c_2 = 0``).
        adj: the node mixing of the linear operation: None for the plan's graph adjacency, the identity for a node-wise one.
    """

    w: np.ndarray
    const: np.ndarray
    coef: np.ndarray
    kept: np.ndarray
    adj: np.ndarray | None = None


@dataclass
class HEPlan:
    """A network compiled for encrypted inference: adjacency, layers and head, all plaintext."""

    adj: np.ndarray
    layers: list[PlanLayer]
    head_w: np.ndarray
    """``(n * F, C)`` (flatten) or ``(F, C)`` (mean) head weights."""
    head_b: np.ndarray
    readout: str

    @property
    def nodes(self) -> int:
        """Number of graph nodes."""
        return int(self.adj.shape[0])


def compile_plan(
    adj: np.ndarray,
    coords: np.ndarray,
    linears: list[tuple[np.ndarray, np.ndarray, bool]],
    coef: np.ndarray,
    mask: np.ndarray,
    ranges: list[float],
    head: tuple[np.ndarray, np.ndarray],
    readout: str,
) -> HEPlan:
    """Compile trained weights into an :class:`HEPlan`.

    Args:
        adj: ``(n, n)`` normalised adjacency.
        coords: ``(n, P)`` public node features (the first input channel, the intensity, is the encrypted one).
        linears: per layer ``(W, b, graph)``: ``W`` of shape ``(F_in, F_out)`` (layer 0: ``F_in = 1 + P``), ``graph``
            True for a graph convolution ``A_hat (h W) + b``, False for a node-wise linear ``h W + b``.
            Layer 0 must be a graph convolution (it carries the public features).
        coef: ``(layers, n, 3)`` trainable polynomial coefficients in powers of ``z``.
        mask: ``(layers, n)`` 1 where the node keeps its non-linearity, 0 where it is linear (passes ``z``).
        ranges: per layer the radius ``r_l`` of its pre-activations (kept polynomials are evaluated in ``t = z / r_l``).
        head: ``(W, b)`` of the head, ``W`` of shape ``(inputs, C)``.
        readout: ``flatten`` or ``mean``.

    Raises:
        UserInputError: layer 0 is not a graph convolution, or the shapes disagree.
    """
    n = adj.shape[0]
    if not linears or not linears[0][2]:
        raise UserInputError("layer 0 must be a graph convolution (it carries the public node features)")
    if coef.shape != (len(linears), n, 3) or mask.shape != (len(linears), n) or len(ranges) != len(linears):
        raise UserInputError(
            f"coef must be (layers, n, 3) = ({len(linears)}, {n}, 3), mask (layers, n), ranges one per layer; "
            f"got {coef.shape}, {mask.shape}, {len(ranges)}"
        )
    layers = []
    for layer, ((w, b, graph), r) in enumerate(zip(linears, ranges, strict=True)):
        r = max(float(r), 1e-6)
        public = (adj @ coords @ w[1:]) if layer == 0 else 0.0
        w_enc = w[:1] if layer == 0 else w
        const = (public + b[None, :]) / r
        kept = mask[layer] > 0.5
        # p(z) = sum_k a_k r^k t^k at kept nodes; a linear node passes z = r t
        c = np.zeros((n, 3))
        c[kept] = coef[layer][kept] * (r ** np.arange(3))[None, :]
        c[~kept, 1] = r
        layers.append(PlanLayer(w_enc / r, np.broadcast_to(const, (n, w.shape[1])).copy(), c, kept, None if graph else np.eye(n)))
    return HEPlan(adj, layers, head[0], head[1], readout)


# ---- evaluation over a backend ------------------------------------------------------------


class Backend(Protocol, Generic[V]):
    """What the evaluation needs from a value type (ciphertext, plaintext array, or a level count)."""

    def encrypt(self, values: np.ndarray) -> V: ...
    def mul_plain(self, v: V, s: float) -> V: ...
    def mul(self, a: V, b: V) -> V: ...
    def add(self, a: V, b: V) -> V: ...
    def add_plain(self, v: V, s: float) -> V: ...


@dataclass
class Lazy(Generic[V]):
    """A value kept as a plaintext linear combination of materialised values, never computed on its own.

    Attributes:
        terms: source id -> (coefficient, materialised value); one entry per source (duplicates merged),
            so the term count stays bounded by the receptive field's materialised values.
        const: plaintext constant.
    """

    terms: dict[int, tuple[float, V]]
    const: float


def _lincomb(be: Backend[V], terms: list[tuple[float, V]], const: float) -> V | None:
    acc: V | None = None
    for c, v in terms:
        if abs(c) < SKIP:
            continue
        term = be.mul_plain(v, c)
        acc = term if acc is None else be.add(acc, term)
    if acc is not None and const != 0.0:
        acc = be.add_plain(acc, const)
    return acc


def _accumulate(terms: dict[int, tuple[float, V]], scale: float, value: Lazy[V]) -> float:
    """Add ``scale * value`` into ``terms`` (merging sources); return ``scale * value.const``."""
    for key, (c, v) in value.terms.items():
        old = terms.get(key)
        terms[key] = (scale * c + (old[0] if old is not None else 0.0), v)
    return scale * value.const


class _Evaluator(Generic[V]):
    """One evaluation: the backend, a source-id counter, and the materialised values of each layer (for tracing)."""

    def __init__(self, be: Backend[V]):
        self.be = be
        self.ids = itertools.count()
        self.materialised: list[V] = []

    def source(self, v: V, coef: float = 1.0) -> tuple[int, tuple[float, V]]:
        self.materialised.append(v)
        return next(self.ids), (coef, v)

    def activate(self, layer: PlanLayer, j: int, terms: dict[int, tuple[float, V]], const: float) -> Lazy[V]:
        """Node ``j``'s activation of the lazy ``t``: linear nodes stay lazy (no level); kept ones materialise ``t`` and ``t^2``."""
        c0, c1, c2 = (float(c) for c in layer.coef[j])
        if not layer.kept[j]:
            return Lazy({k: (c1 * c, v) for k, (c, v) in terms.items()}, c0 + c1 * const)
        t = _lincomb(self.be, list(terms.values()), const)
        if t is None:
            raise UserInputError("a kept non-linearity has no encrypted term (all weights zero); nothing to encrypt")
        t2 = self.be.mul(t, t)
        return Lazy(dict([self.source(t, c1), self.source(t2, c2)]), c0)


def evaluate(plan: HEPlan, be: Backend[V], inputs: list[V], trace: list[list[V]] | None = None) -> tuple[list[V | None], list[float]]:
    """Run ``plan`` with backend ``be`` on ``inputs``, one (encrypted) value per node (its private feature over the batch).

    Linear nodes are never computed: their value stays a :class:`Lazy` linear combination of
    materialised values and is expanded into the next linear operation, so a removed
    non-linearity costs no level (the linear operations before and after it compose). A kept
    node materialises its pre-activation (one plaintext x ciphertext linear combination, 1
    level) and its square (1 level); its polynomial's coefficients enter the next combination.

    Args:
        plan: the compiled network.
        be: the backend.
        inputs: the encrypted input of every node.
        trace: if given, the values materialised by each layer are appended (one list per layer).

    Returns:
        per class the output value (None where the whole logit is plaintext) and its plaintext constant part.
    """
    n = plan.nodes
    ev = _Evaluator(be)
    feats: list[list[Lazy[V]]] = [[Lazy(dict([ev.source(v)]), 0.0)] for v in inputs]
    for layer in plan.layers:
        ev.materialised = []
        adj = plan.adj if layer.adj is None else layer.adj
        f_in, f_out = layer.w.shape
        new: list[list[Lazy[V]]] = []
        for j in range(n):
            nbrs = np.nonzero(adj[j])[0]
            chans = []
            for o in range(f_out):
                terms: dict[int, tuple[float, V]] = {}
                const = float(layer.const[j, o])
                for i in nbrs:
                    for f in range(f_in):
                        const += _accumulate(terms, float(adj[j, i] * layer.w[f, o]), feats[i][f])
                chans.append(ev.activate(layer, j, terms, const))
            new.append(chans)
        feats = new
        if trace is not None:
            trace.append(ev.materialised)
    outputs: list[V | None] = []
    consts: list[float] = []
    f_last = plan.layers[-1].w.shape[1]
    for c in range(plan.head_w.shape[1]):
        terms = {}
        const = float(plan.head_b[c])
        for j in range(n):
            for o in range(f_last):
                w = plan.head_w[j * f_last + o, c] if plan.readout == "flatten" else plan.head_w[o, c] / n
                const += _accumulate(terms, float(w), feats[j][o])
        outputs.append(_lincomb(be, list(terms.values()), const))
        consts.append(const)
    return outputs, consts


class NumpyBackend:
    """Plaintext float64 evaluation of the plan (what CKKS computes, without its noise)."""

    def encrypt(self, values: np.ndarray) -> np.ndarray:
        return np.asarray(values, dtype=np.float64)

    def mul_plain(self, v: np.ndarray, s: float) -> np.ndarray:
        return v * s

    def mul(self, a: np.ndarray, b: np.ndarray) -> np.ndarray:
        return a * b

    def add(self, a: np.ndarray, b: np.ndarray) -> np.ndarray:
        return a + b

    def add_plain(self, v: np.ndarray, s: float) -> np.ndarray:
        return v + s


@dataclass
class LevelBackend:
    """Counts levels and operations instead of computing: a value is its multiplicative depth.

    Each multiplication (plaintext scalar or ciphertext) is followed by a rescale, so it adds one
    level to the deeper operand; additions take the deeper operand's level (after a mod switch).
    """

    counts: dict[str, int] = field(default_factory=lambda: {"encrypt": 0, "mul_plain": 0, "mul": 0, "add": 0, "add_plain": 0})

    def encrypt(self, values: np.ndarray) -> int:
        self.counts["encrypt"] += 1
        return 0

    def mul_plain(self, v: int, s: float) -> int:
        self.counts["mul_plain"] += 1
        return v + 1

    def mul(self, a: int, b: int) -> int:
        self.counts["mul"] += 1
        return max(a, b) + 1

    def add(self, a: int, b: int) -> int:
        self.counts["add"] += 1
        return max(a, b)

    def add_plain(self, v: int, s: float) -> int:
        self.counts["add_plain"] += 1
        return v


def depth_and_counts(plan: HEPlan) -> tuple[int, dict[str, int], list[int]]:
    """Analytic multiplicative depth of ``plan`` (max over the outputs), its operation counts, and the level after each layer.

    The level after a layer is the deepest value it materialised (its kept nodes' squares), or the
    level after the previous layer when every node of the layer is linear (nothing materialised).
    """
    be = LevelBackend()
    trace: list[list[int]] = []
    outs, _ = evaluate(plan, be, [be.encrypt(np.zeros(1)) for _ in range(plan.nodes)], trace)
    per_layer: list[int] = []
    for values in trace:
        per_layer.append(max(values, default=per_layer[-1] if per_layer else 0))
    return max((o for o in outs if o is not None), default=0), be.counts, per_layer


def plain_logits(plan: HEPlan, x: np.ndarray) -> np.ndarray:
    """``(batch, C)`` logits the plan computes in float64 (the encrypted result, noise aside)."""
    be = NumpyBackend()
    outs, consts = evaluate(plan, be, [be.encrypt(x[:, i]) for i in range(plan.nodes)])
    return np.stack([o if o is not None else np.full(len(x), c) for o, c in zip(outs, consts, strict=True)], axis=1)


class TenSEALBackend:
    """CKKS through TenSEAL: ``ct * float`` (plaintext scalar, rescaled), ``ct * ct`` (relinearised, rescaled), additions."""

    def __init__(self, params: HEParams, threads: int = 1):
        import tenseal as ts

        self.ts = ts
        self.context = ts.context(
            ts.SCHEME_TYPE.CKKS, params.poly_modulus_degree, coeff_mod_bit_sizes=list(params.coeff_mod_bit_sizes), n_threads=threads
        )
        self.context.global_scale = 2.0**params.scale_bits
        self.slots = params.poly_modulus_degree // 2

    def encrypt(self, values: np.ndarray) -> Any:
        return self.ts.ckks_vector(self.context, [float(v) for v in values])

    def mul_plain(self, v: Any, s: float) -> Any:
        return v * float(s)

    def mul(self, a: Any, b: Any) -> Any:
        return a * b

    def add(self, a: Any, b: Any) -> Any:
        return a + b

    def add_plain(self, v: Any, s: float) -> Any:
        return v + float(s)


@dataclass
class EncryptedRun:
    """One encrypted pass over a batch.

    Attributes:
        logits: ``(batch, C)`` decrypted logits.
        reference: ``(batch, C)`` float64 logits of the same plan.
        depth: analytic depth; ``levels_used``: the modulus-chain primes the outputs actually consumed.
        encrypt_s, evaluate_s, decrypt_s: wall times of the pass's parts.
    """

    logits: np.ndarray
    reference: np.ndarray
    depth: int
    levels_used: int
    encrypt_s: float
    evaluate_s: float
    decrypt_s: float

    @property
    def max_abs_error(self) -> float:
        """Largest |encrypted - plaintext| logit difference."""
        return float(np.abs(self.logits - self.reference).max())


def encrypted_forward(plan: HEPlan, x: np.ndarray, params: HEParams | None = None, scale_bits: int = 28) -> EncryptedRun:
    """Encrypt ``x`` (``(batch, n)``, batch <= N/2), run ``plan`` under CKKS, decrypt.

    Args:
        plan: the compiled network.
        x: private inputs, one row per sample (the batch shares each ciphertext's slots).
        params: CKKS parameters; None chooses the smallest that hold the plan's depth (:func:`params_for_depth`).
        scale_bits: scale when ``params`` is None.

    Raises:
        UserInputError: parameters that cannot hold the depth (the message names the parameter to raise),
            or a batch larger than the slots.
    """
    depth, _, _ = depth_and_counts(plan)
    params = params or params_for_depth(depth, scale_bits)
    params.check(depth)
    if len(x) > params.poly_modulus_degree // 2:
        raise UserInputError(
            f"a batch of {len(x)} samples exceeds the {params.poly_modulus_degree // 2} slots; split it or raise poly_modulus_degree"
        )
    be = TenSEALBackend(params)
    t0 = time.perf_counter()
    encs = [be.encrypt(x[:, i]) for i in range(plan.nodes)]
    t1 = time.perf_counter()
    outs, consts = evaluate(plan, be, encs)
    t2 = time.perf_counter()
    fresh = encs[0].ciphertext()[0].coeff_modulus_size()
    used = max(fresh - o.ciphertext()[0].coeff_modulus_size() for o in outs if o is not None)
    dec = [np.asarray(o.decrypt()[: len(x)]) if o is not None else np.full(len(x), c) for o, c in zip(outs, consts, strict=True)]
    t3 = time.perf_counter()
    return EncryptedRun(np.stack(dec, axis=1), plain_logits(plan, x), depth, used, t1 - t0, t2 - t1, t3 - t2)


# ---- latency model ----------------------------------------------------------------------------


def op_costs(params: HEParams, repeats: int = 7) -> dict[str, float]:
    """Seconds per operation at the top of the chain, measured on this machine (median of ``repeats``)."""
    be = TenSEALBackend(params)
    rng = np.random.default_rng(0)
    a, b = be.encrypt(rng.uniform(-1, 1, 8)), be.encrypt(rng.uniform(-1, 1, 8))
    ops: dict[str, Callable[[], Any]] = {
        "encrypt": lambda: be.encrypt(rng.uniform(-1, 1, 8)),
        "mul_plain": lambda: be.mul_plain(a, 0.37),
        "mul": lambda: be.mul(a, b),
        "add": lambda: be.add(a, b),
        "add_plain": lambda: be.add_plain(a, 0.5),
    }
    out = {}
    for name, fn in ops.items():
        times = []
        for _ in range(repeats):
            t = time.perf_counter()
            fn()
            times.append(time.perf_counter() - t)
        out[name] = statistics.median(times)
    return out


def predict_seconds(counts: dict[str, int], costs: dict[str, float], depth: int, levels: int) -> float:
    """Predicted pass time: each op count times its top-of-chain cost, times ``(levels - depth/2 + 1)/(levels + 1)``.

    The factor is the mean remaining chain length over a pass that descends ``depth`` of ``levels``
    levels evenly (an op's cost is linear in the number of primes it still carries).
    """
    shrink = (levels - depth / 2 + 1) / (levels + 1)
    return sum(counts.get(k, 0) * v for k, v in costs.items()) * shrink


def cached_op_costs(params: HEParams, path: Path) -> dict[str, float]:
    """:func:`op_costs` measured once per parameter set and kept in the JSON file ``path``.

    A file that does not load, or is not a table of seconds per operation, is measured again with a
    note (:mod:`sim.zoo.cache_files`); locked, so two processes measuring other parameter sets do
    not drop each other's entries.
    """
    key = f"{params.poly_modulus_degree}:{','.join(map(str, params.coeff_mod_bit_sizes))}"
    path = Path(path)
    with exclusive(path):
        table = _op_cost_table(path)
        if key not in table:
            table[key] = op_costs(params)
            text = json.dumps(table, indent=1, sort_keys=True)
            atomic_write(path, lambda tmp: tmp.write_text(text))
    return table[key]


def _op_cost_table(path: Path) -> dict[str, dict[str, float]]:
    """The op-cost table in ``path`` (empty when there is none; when it does not load, empty with a note)."""
    if not path.exists():
        return {}
    try:
        table = json.loads(path.read_text())
        if not isinstance(table, dict) or not all(
            isinstance(row, dict) and all(isinstance(s, int | float) for s in row.values()) for row in table.values()
        ):
            raise DamagedCache("not a table of seconds per operation")
    except (OSError, ValueError) as exc:  # DamagedCache is a ValueError
        note(rebuilt_note(path, exc, "measured again"), stacklevel=4)  # the caller of cached_op_costs()
        return {}
    return table
