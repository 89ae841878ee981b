"""Encrypted GCN inference under CKKS (TenSEAL), its multiplicative depth, and its cost.

Packing (CryptoNets-style, batch in slots): one CKKS ciphertext per node and channel; its
slots hold that value for a batch of up to ``N/2`` samples. No ciphertext rotation is ever
needed (no Galois keys), every node's activation is its own ciphertext (so a kept ReLU costs
at that node only), and one pass classifies the whole batch: the latency of one query equals
the latency of a pass, and the amortised cost per sample is the pass over the batch size.

The client encrypts the 64 pixel intensities; the coordinates and all weights are plaintext
on the server. The network is compiled to an :class:`HEPlan`:

* Each graph convolution ``z = A_hat (h W) + b`` and the previous layer's activation
  coefficients are fused into one plaintext-scalar x ciphertext linear combination per output
  ciphertext (``z_jo = sum_i sum_f sum_k A_ji W_fo c_ifk t_if^k + const``): 1 level.
  The layer's outputs are scaled by ``1/r_l`` (``r_l``: the largest |pre-activation| on the
  training split, folded into ``W`` and ``b``) so that powers stay within [-1, 1].
* Activation per node: the powers ``t^2..t^d`` (ct x ct, relinearised), ``t^k`` from
  ``t^(2^m) * t^(k - 2^m)``: ``ceil(log2 d)`` levels. Polynomial nodes: the trainable degree-2
  polynomial (1 level). **Kept ReLUs cannot be evaluated exactly under CKKS**; they are
  replaced by the Chebyshev least-squares polynomial of ReLU on [-1, 1] (near-minimax) of
  degree ``relu_degree`` (default 7: 3 levels), which is what makes keeping a ReLU expensive.
* The head (flatten or mean) fuses the last activation's coefficients too: 1 level.

Depth is counted analytically by running the same evaluation on a level-counting backend
(:class:`LevelBackend`), checked against the TenSEAL ciphertexts' remaining modulus chain
after a real run, and the coefficient-modulus chain is chosen from it (:func:`params_for_depth`).
"""

from __future__ import annotations

import json
import math
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Generic, Protocol, TypeVar

import numpy as np

from coevo.sim.errors import UserInputError

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

    def check(self, depth: int) -> None:
        """Raise :class:`UserInputError` unless these parameters are valid, secure and hold ``depth`` levels.

        The message names the parameter to raise.
        """
        n = self.poly_modulus_degree
        if n not in SEAL_MAX_BITS:
            raise UserInputError(f"poly_modulus_degree must be one of {sorted(SEAL_MAX_BITS)}, got {n}")
        if len(self.coeff_mod_bit_sizes) < 2 or any(not 20 <= b <= 60 for b in self.coeff_mod_bit_sizes):
            raise UserInputError(f"coeff_mod_bit_sizes needs at least 2 primes of 20..60 bits, got {list(self.coeff_mod_bit_sizes)}")
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
                    "; no ring dimension holds that chain: lower the scale bits or the depth (fewer kept ReLUs, lower relu_degree)"
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


def params_for_depth(depth: int, scale_bits: int = 28, headroom_bits: int = 7, poly_modulus_degree: int | None = None) -> HEParams:
    """The smallest secure CKKS parameters holding ``depth`` levels at the given scale.

    The chain is ``[scale + headroom] + [scale] * depth + [scale + headroom]``: the first prime keeps
    ``headroom_bits`` of integer part for decrypted values (|v| < 2^headroom), the special prime matches it.

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
            return HEParams(n, bits)
    params = HEParams(poly_modulus_degree or 32768, bits)
    params.check(depth)  # raises with the parameter to raise
    return params


# ---- the compiled network -------------------------------------------------------------------


@dataclass
class PlanLayer:
    """One graph convolution and the activation after it, in the scaled variable ``t = z / r``.

    Attributes:
        w: ``(F_in, F_out)`` weights applied to the encrypted input channels (already divided by ``r``).
        const: ``(n, F_out)`` plaintext part of ``t`` (public features, bias), already divided by ``r``.
        coef: ``(n, D+1)`` activation coefficients per node in powers of ``t`` (``c_0..c_D``), the same for every channel.
        degree: ``(n,)`` polynomial degree per node.
        kept: ``(n,)`` True where the node keeps its (approximated) ReLU.
    """

    w: np.ndarray
    const: np.ndarray
    coef: np.ndarray
    degree: np.ndarray
    kept: np.ndarray


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


def chebyshev_relu(degree: int, points: int = 4001) -> np.ndarray:
    """Power-basis coefficients on [-1, 1] of the least-squares fit of ReLU on Chebyshev nodes (near-minimax)."""
    if degree < 1:
        raise UserInputError(f"relu_degree must be >= 1, got {degree}")
    x = np.cos(np.pi * (np.arange(points) + 0.5) / points)
    cheb = np.polynomial.chebyshev.chebfit(x, np.maximum(x, 0.0), degree)
    return np.asarray(np.polynomial.chebyshev.cheb2poly(cheb), dtype=np.float64)


def compile_plan(
    adj: np.ndarray,
    coords: np.ndarray,
    convs: list[tuple[np.ndarray, np.ndarray]],
    coef: np.ndarray,
    mask: np.ndarray,
    ranges: list[float],
    head: tuple[np.ndarray, np.ndarray],
    readout: str,
    relu_degree: int = 7,
) -> HEPlan:
    """Compile trained weights into an :class:`HEPlan`.

    Args:
        adj: ``(n, n)`` normalised adjacency.
        coords: ``(n, P)`` public node features (the first input channel, the intensity, is the encrypted one).
        convs: per layer ``(W, b)`` with ``W`` of shape ``(F_in, F_out)`` (layer 0: ``F_in = 1 + P``).
        coef: ``(layers, n, d+1)`` trainable polynomial coefficients in powers of ``z``.
        mask: ``(layers, n)`` 1 where the node keeps its ReLU.
        ranges: per layer the interval radius ``r_l`` (the ReLU approximation holds on [-r_l, r_l]).
        head: ``(W, b)`` of the head, ``W`` of shape ``(inputs, C)``.
        readout: ``flatten`` or ``mean``.
        relu_degree: degree of the ReLU approximation at kept nodes.
    """
    relu = chebyshev_relu(relu_degree)
    layers = []
    for layer, ((w, b), r) in enumerate(zip(convs, ranges, strict=True)):
        r = max(float(r), 1e-6)
        public = (adj @ coords @ w[1:]) if layer == 0 else 0.0
        w_enc = w[:1] if layer == 0 else w
        const = (public + b[None, :]) / r
        kept = mask[layer] > 0.5
        d_poly = coef.shape[2] - 1
        width = max(relu_degree if kept.any() else 0, d_poly) + 1
        c = np.zeros((adj.shape[0], width))
        # relu(z) = r * relu(t); p(z) = sum_k a_k r^k t^k
        if kept.any():
            c[kept, : relu_degree + 1] = r * relu[None, :]
        c[~kept, : d_poly + 1] = coef[layer][~kept] * (r ** np.arange(d_poly + 1))[None, :]
        degree = np.where(kept, relu_degree, d_poly)
        layers.append(PlanLayer(w_enc / r, np.broadcast_to(const, (adj.shape[0], w.shape[1])).copy(), c, degree, kept))
    return HEPlan(adj, layers, head[0], head[1], readout)


# ---- evaluation over a backend ------------------------------------------------------------


class Backend(Protocol, Generic[V]):
    """What the evaluation needs from a value type (ciphertext, plaintext array, or a level count)."""

    def encrypt(self, values: np.ndarray) -> V: ...
    def mul_plain(self, v: V, s: float) -> V: ...
    def mul(self, a: V, b: V) -> V: ...
    def add(self, a: V, b: V) -> V: ...
    def add_plain(self, v: V, s: float) -> V: ...


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


def _powers(be: Backend[V], t: V, degree: int) -> dict[int, V]:
    """``{k: t^k}`` for k = 1..degree with depth ceil(log2 k): ``t^k = t^(2^m) * t^(k - 2^m)``, 2^m the largest power of two below k."""
    p = {1: t}
    for k in range(2, degree + 1):
        m = 1 << (k.bit_length() - 1)
        p[k] = be.mul(p[m // 2], p[m // 2]) if m == k else be.mul(p[m], p[k - m])
    return p


def evaluate(plan: HEPlan, be: Backend[V], inputs: list[V]) -> tuple[list[V | None], list[float]]:
    """Run ``plan`` with backend ``be`` on ``inputs``, one (encrypted) value per node (its private feature over the batch).

    Returns:
        per class the output value (None where the whole logit is plaintext) and its plaintext constant part.
    """
    n = plan.nodes
    adj = plan.adj
    # inputs: per node, per encrypted channel, {power: value} with coefficient vector; layer 0 input is x itself
    feats: list[list[dict[int, V]]] = [[{1: v}] for v in inputs]
    coef_in = np.zeros((n, 2))
    coef_in[:, 1] = 1.0
    for layer in plan.layers:
        f_in, f_out = layer.w.shape
        new: list[list[dict[int, V]]] = []
        for j in range(n):
            chans = []
            nbrs = np.nonzero(adj[j])[0]
            for o in range(f_out):
                terms: list[tuple[float, V]] = []
                const = float(layer.const[j, o])
                for i in nbrs:
                    for f in range(f_in):
                        a = adj[j, i] * layer.w[f, o]
                        const += a * coef_in[i, 0]
                        terms.extend((a * coef_in[i, k], v) for k, v in feats[i][f].items())
                t = _lincomb(be, terms, const)
                if t is None:
                    raise UserInputError("a layer output has no encrypted term (all weights zero); nothing to encrypt")
                chans.append(_powers(be, t, int(layer.degree[j])))
            new.append(chans)
        feats, coef_in = new, layer.coef
    outputs: list[V | None] = []
    consts: list[float] = []
    f_last = plan.layers[-1].w.shape[1]
    for c in range(plan.head_w.shape[1]):
        terms = []
        const = float(plan.head_b[c])
        for j in range(n):
            for o in range(f_last):
                w = plan.head_w[j * f_last + o, c] if plan.readout == "flatten" else plan.head_w[o, c] / n
                const += w * coef_in[j, 0]
                terms.extend((w * coef_in[j, k], v) for k, v in feats[j][o].items())
        outputs.append(_lincomb(be, terms, const))
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
    """Analytic multiplicative depth of ``plan`` (max over the outputs), its operation counts, and per-layer depths."""
    be = LevelBackend()
    outs, _ = evaluate(plan, be, [be.encrypt(np.zeros(1)) for _ in range(plan.nodes)])
    per_layer = []
    for layer in plan.layers:
        per_layer.append(1 + max(math.ceil(math.log2(int(d))) if d > 1 else 0 for d in layer.degree))
    return max(o for o in outs if o is not None), be.counts, per_layer


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


def cached_op_costs(params: HEParams, path: Any) -> dict[str, float]:
    """:func:`op_costs` measured once per parameter set and kept in the JSON file ``path`` (a ``pathlib.Path``)."""
    key = f"{params.poly_modulus_degree}:{','.join(map(str, params.coeff_mod_bit_sizes))}"
    table: dict[str, dict[str, float]] = json.loads(path.read_text()) if path.exists() else {}
    if key not in table:
        table[key] = op_costs(params)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(table, indent=1, sort_keys=True))
    return table[key]
