"""Zero-cost proxies on real PyTorch instantiations of NB201 cells, with a storage cache.

The mini-batch (:class:`ProxyConfig` ``batch_source``) is by default 32 natural-image patches:
crops of scikit-learn's two sample photographs (``load_sample_images``: a temple in China and
a flower, 427 x 640, shipped with scikit-learn) area-downscaled by 2, 4 and 8 so a 32 x 32
crop holds object-sized content, as CIFAR images do, and normalised with the CIFAR-10 channel
means and deviations; ``gaussian`` is the synthetic N(0, 1) batch used before. Labels are
random (fixed seed): no proxy here needs true labels.

Proxies (each computed at initialisation, fixed seeds):

* ``synflow``: sum |theta * dR/dtheta| with R the output sum of the BN-free network with
  |weights| on an all-ones input, in double precision (Tanaka et al. 2020);
* ``naswot``: log|det K| of the Hamming kernel of ReLU activation codes (Mellor et al. 2021);
* ``jacob_cov``: -sum(log(v + k) + 1/(v + k)) over eigenvalues of the correlation of
  input Jacobians (Mellor et al. 2020 v1, as benchmarked by Abdelfattah et al. 2021);
* ``snip``: sum |theta * dL/dtheta| (Lee et al. 2019), cross-entropy on random labels;
* ``grad_norm``: sum over weight tensors of ||dL/dtheta||_2;
* ``plain``: sum of theta * dL/dtheta, signed (the same backward pass as snip);
* ``fisher``: sum over conv outputs and channels of 0.5 * mean over the batch of
  (sum over positions of activation x its gradient)^2 (Turner et al. 2020, as benchmarked by
  Abdelfattah et al. 2021);
* ``l2_norm``: sum of the Frobenius norms of the conv and linear weights at initialisation;
* ``zen``: Zen-score (Lin et al. 2021): log of the mean L1 distance ||f(x) - f(x + 0.01 e)||
  of the pre-pooling features of the network re-initialised with N(0, 1) weights, x and e
  Gaussian, plus the sum over batch norms of log sqrt(mean running variance), BN in training
  mode (as the reference implementation computes it);
* ``params``: trainable parameters; ``flops``: multiply-accumulates of one 32x32 image.

:mod:`search.nb201.proxies` turns the scores into predictor features and a label-free prior.
"""

from __future__ import annotations

import json
import math
import time
from collections.abc import Iterable

import numpy as np
import sqlalchemy as sa
import torch
from torch import nn

from coevo.search.nb201.model import NB201Network
from coevo.search.nb201.proxy_table import DEFAULT_CONFIG, PROXIES, ProxyConfig, shipped_table
from coevo.search.nb201.space import Cell, format_arch
from coevo.search.storage import side_engine
from coevo.search.work_progress import report

CIFAR_MEAN = (0.4914, 0.4822, 0.4465)
CIFAR_STD = (0.2470, 0.2435, 0.2616)
SCALES = (2, 4, 8)
"""Area-downscaling factors of the photographs before 32 x 32 crops are taken."""


def natural_patches(n: int, seed: int) -> torch.Tensor:
    """``n`` 32 x 32 crops of scikit-learn's sample photographs at several scales, CIFAR-normalised, (n, 3, 32, 32)."""
    from sklearn.datasets import load_sample_images

    photos = [np.asarray(img, dtype=np.float32) / 255.0 for img in load_sample_images().images]
    pyramids = []
    for photo in photos:
        for s in SCALES:
            h, w = photo.shape[0] // s * s, photo.shape[1] // s * s
            pyramids.append(photo[:h, :w].reshape(h // s, s, w // s, s, 3).mean(axis=(1, 3)))
    rng = np.random.default_rng(seed)
    patches = []
    for k in range(n):
        img = pyramids[k % len(pyramids)]  # alternate photos and scales
        y, x = rng.integers(0, img.shape[0] - 32 + 1), rng.integers(0, img.shape[1] - 32 + 1)
        patches.append(img[y : y + 32, x : x + 32])
    batch = (np.stack(patches) - np.array(CIFAR_MEAN, dtype=np.float32)) / np.array(CIFAR_STD, dtype=np.float32)
    return torch.from_numpy(np.ascontiguousarray(batch.transpose(0, 3, 1, 2)))


def _batch(cfg: ProxyConfig) -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(cfg.seed)
    gaussian = torch.randn(cfg.batch, 3, 32, 32, generator=g)  # drawn either way: the labels below stay the same
    labels = torch.randint(0, cfg.num_classes, (cfg.batch,), generator=g)
    return (natural_patches(cfg.batch, cfg.seed) if cfg.batch_source == "natural" else gaussian), labels


_DEVICE = torch.device("cpu")


def set_device(name: str) -> None:
    """Score on this torch device (the table builder; CPU by default).

    Networks and batches are made on the CPU from the same seeds and then moved, so every
    device scores the same weights on the same data; only rounding differs.
    """
    global _DEVICE
    _DEVICE = torch.device(name)
    if _DEVICE.type == "cuda":
        # full fp32 products, as on the CPU (TF32 would perturb the small proxies)
        torch.backends.cuda.matmul.allow_tf32 = False
        torch.backends.cudnn.allow_tf32 = False


def _net(cell: Cell, cfg: ProxyConfig, *, bn: bool = True, move: bool = True) -> NB201Network:
    torch.manual_seed(cfg.seed)
    net = NB201Network(cell, channels=cfg.channels, cells_per_stage=cfg.cells_per_stage, num_classes=cfg.num_classes, bn=bn)
    return net.to(_DEVICE) if move else net


def _weights(net: nn.Module) -> list[torch.Tensor]:
    return [m.weight for m in net.modules() if isinstance(m, nn.Conv2d | nn.Linear)]


def synflow(cell: Cell, cfg: ProxyConfig) -> float:
    """The ``synflow`` proxy of ``cell`` (module doc): log of sum |theta * dR/dtheta| of the BN-free, |weights| network."""
    net = _net(cell, cfg, bn=False).double()
    with torch.no_grad():
        for p in net.parameters():
            p.abs_()
    out = net(torch.ones(1, 3, 32, 32, dtype=torch.float64, device=_DEVICE))
    out.sum().backward()
    total = sum((w * w.grad).abs().sum().item() for w in _weights(net) if w.grad is not None)
    return math.log(total) if total > 0 else -math.inf


def _naswot(codes: list[torch.Tensor]) -> float:
    # K = C C^T + (1 - C)(1 - C)^T over the concatenated ReLU codes; entries are counts below 2^24, exact in float32
    c = torch.cat(codes, dim=1)
    k = c @ c.T + (1 - c) @ (1 - c).T
    return float(torch.linalg.slogdet(k.double())[1])


def _jacob_cov(jacobian: torch.Tensor) -> float:
    jac = jacobian.flatten(1).double()
    corr = torch.corrcoef(jac)
    if not torch.isfinite(corr).all():
        return -1e9  # constant Jacobians (e.g. a cell that outputs zeros): the worst score
    v = torch.linalg.eigvalsh(corr)
    k = 1e-5
    return float(-torch.sum(torch.log(v + k) + 1.0 / (v + k)))


def _gradient_scores(ws: list[torch.Tensor], acts: list[torch.Tensor]) -> dict[str, float]:
    fisher = 0.0
    for a in acts:
        if a.grad is not None:
            fisher += float((0.5 * (a.detach() * a.grad).sum(dim=(2, 3)).pow(2).mean(dim=0)).sum())
    return {
        "snip": float(sum(float((w.detach() * w.grad).abs().sum()) for w in ws if w.grad is not None)),
        "grad_norm": float(sum(float(w.grad.norm()) for w in ws if w.grad is not None)),
        "plain": float(sum(float((w.detach() * w.grad).sum()) for w in ws if w.grad is not None)),
        "fisher": fisher,
    }


def initial_proxies(cell: Cell, cfg: ProxyConfig, x: torch.Tensor, y: torch.Tensor) -> dict[str, float]:
    """naswot, jacob_cov, snip, grad_norm, plain, fisher, l2_norm, params and flops of the default-initialised network.

    They share one network and one forward pass of the batch (BN in training mode): the ReLU
    codes give naswot, the input gradient of the output sum gives jacob_cov, and the backward
    pass of the cross-entropy on the random labels gives the weight and activation gradients of
    the four gradient proxies. Each is the same arithmetic as a pass of its own (the table's
    scores did not change when the passes were shared), at a third less work per cell.
    """
    net = _net(cell, cfg)
    weights = _weights(net)
    l2 = float(sum(float(w.detach().norm()) for w in weights))
    codes: list[torch.Tensor] = []
    acts: list[torch.Tensor] = []
    macs = 0

    def relu_code(_m: nn.Module, _i: object, out: torch.Tensor) -> None:
        codes.append((out.detach().flatten(1) > 0).float())

    def conv_out(m: nn.Module, _i: object, out: torch.Tensor) -> None:
        nonlocal macs
        if isinstance(m, nn.Conv2d):
            macs += out[0].numel() * (m.in_channels // m.groups) * m.kernel_size[0] * m.kernel_size[1]
            out.retain_grad()
            acts.append(out)
        elif isinstance(m, nn.Linear):
            macs += m.in_features * m.out_features

    handles = [m.register_forward_hook(relu_code) for m in net.modules() if isinstance(m, nn.ReLU)]
    handles += [m.register_forward_hook(conv_out) for m in net.modules() if isinstance(m, nn.Conv2d | nn.Linear)]
    x = x.clone().requires_grad_(True)
    out = net(x)
    for h in handles:
        h.remove()
    (jacobian,) = torch.autograd.grad(out.sum(), x, retain_graph=True)
    for a in acts:
        a.grad = None  # a retained activation gradient also collects this pass's: fisher reads the loss's alone
    nn.functional.cross_entropy(out, y).backward()
    return {
        "naswot": _naswot(codes),
        "jacob_cov": _jacob_cov(jacobian),
        **_gradient_scores([w for w in weights if w.grad is not None], acts),
        "l2_norm": l2,
        "params": float(sum(p.numel() for p in net.parameters())),
        "flops": float(macs),
    }


def zen(cell: Cell, cfg: ProxyConfig) -> float:
    """The ``zen`` proxy of ``cell`` (module doc): Zen-score of the network re-initialised with N(0, 1) weights."""
    net = _net(cell, cfg, move=False)  # re-initialised below by the CPU generator, then moved
    # Zen-NAS scores a Gaussian-initialised network (weights N(0, 1), BN affine at 1 and 0),
    # BN in training mode; with the default (Kaiming) init the BN term changes sign
    torch.manual_seed(cfg.seed + 2)
    with torch.no_grad():
        for m in net.modules():
            if isinstance(m, nn.Conv2d | nn.Linear):
                nn.init.normal_(m.weight)
                if m.bias is not None:
                    nn.init.zeros_(m.bias)
    net.to(_DEVICE)
    net.train()
    g = torch.Generator().manual_seed(cfg.seed + 1)
    x = torch.randn(cfg.batch, 3, 32, 32, generator=g).to(_DEVICE)
    e = torch.randn(cfg.batch, 3, 32, 32, generator=g).to(_DEVICE)
    with torch.no_grad():
        # both passes update the running statistics, as in the reference implementation
        delta = float((net.features(x) - net.features(x + 0.01 * e)).abs().sum(dim=(1, 2, 3)).mean())
    variances = [float(m.running_var.mean()) for m in net.modules() if isinstance(m, nn.BatchNorm2d) and m.running_var is not None]
    bn_term = sum(0.5 * math.log(v) for v in variances)
    return (math.log(delta) if delta > 0 else -1e9) + bn_term


_BATCHES: dict[ProxyConfig, tuple[torch.Tensor, torch.Tensor]] = {}


def compute(cell: Cell, cfg: ProxyConfig = DEFAULT_CONFIG) -> dict[str, float]:
    """Every proxy of one cell (about a second on one CPU core), on one torch thread.

    The networks are small: intra-op threads only wait on each other (on a 2-core machine a
    cell took 20-30 s with 2 threads against 1-2 s with one), so scoring runs single-threaded
    and leaves the caller's thread count as it was.
    """
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        return _compute(cell, cfg)
    finally:
        torch.set_num_threads(threads)


def _compute(cell: Cell, cfg: ProxyConfig) -> dict[str, float]:
    if cfg not in _BATCHES:
        x, y = _batch(cfg)
        _BATCHES[cfg] = x.to(_DEVICE), y.to(_DEVICE)
    x, y = _BATCHES[cfg]
    scores = {"synflow": synflow(cell, cfg), **initial_proxies(cell, cfg, x, y), "zen": zen(cell, cfg)}
    return {name: scores[name] for name in PROXIES}


CELL_S = 1.1
"""Seconds one cell's proxies take on one CPU core (docs/engine.md), for estimates before a storage has timed any."""

_META = sa.MetaData()
_TABLE = sa.Table(
    "coevo_zero_cost",
    _META,
    sa.Column("config", sa.String(16), primary_key=True),
    sa.Column("arch", sa.String(200), primary_key=True),
    sa.Column("scores", sa.Text, nullable=False),
    sa.Column("seconds", sa.Float, nullable=False),
)


class ProxyCache:
    """Scores per (config, cell): the shipped table when it has the cell, else table ``coevo_zero_cost`` of a storage database.

    Args:
        url: storage URL (the study's); None for the default SQLite file.
        config: proxy settings.
        use_shipped: read the shipped table first (False: compute or read the storage only,
            e.g. to build or check that table).
    """

    def __init__(self, url: str | None, config: ProxyConfig = DEFAULT_CONFIG, *, use_shipped: bool = True) -> None:
        self.engine = side_engine(url, _META)
        self.config = config
        self.use_shipped = use_shipped
        self.computed = 0
        self.compute_seconds = 0.0

    def scores(self, cells: Iterable[Cell], *, what: str | None = None) -> list[dict[str, float]]:
        """Scores of each cell, computing (and storing) the missing ones.

        Args:
            cells: the cells.
            what: when given, progress of the missing cells is reported under this label
                (:func:`search.work_progress.report`), e.g. for a long one-off computation.
        """
        cells = list(cells)
        archs = [format_arch(c) for c in cells]
        key = self.config.key()
        shipped = shipped_table(key) if self.use_shipped else None
        known = {a: shipped[a] for a in archs if a in shipped} if shipped else {}
        wanted = set(archs) - set(known)
        if wanted:
            with self.engine.connect() as con:
                rows = con.execute(sa.select(_TABLE.c.arch, _TABLE.c.scores).where(_TABLE.c.config == key, _TABLE.c.arch.in_(wanted))).all()
            known.update({arch: json.loads(s) for arch, s in rows})
        missing, done = len({a for a in archs if a not in known}), 0
        if what is not None and missing:
            report(f"{what}: {missing} cells to score ({self.estimate(missing)}; kept in the storage's table {_TABLE.name})", 0.0)
        for cell, arch in zip(cells, archs, strict=True):
            if arch in known:
                continue
            if what is not None and done:
                report(f"{what}: {done} of {missing} cells scored", done / missing)
            done += 1
            started = time.perf_counter()
            known[arch] = compute(cell, self.config)
            seconds = time.perf_counter() - started
            self.computed += 1
            self.compute_seconds += seconds
            with self.engine.begin() as con:
                if con.execute(sa.select(_TABLE.c.arch).where(_TABLE.c.config == key, _TABLE.c.arch == arch)).first() is None:
                    con.execute(_TABLE.insert().values(config=key, arch=arch, scores=json.dumps(known[arch]), seconds=seconds))
        if what is not None and missing:
            report(f"{what}: {missing} of {missing} cells scored", 1.0)
        return [known[a] for a in archs]

    def estimate(self, cells: int) -> str:
        """About how long scoring ``cells`` more cells takes: at this storage's mean time per cell, else :data:`CELL_S`'s."""
        with self.engine.connect() as con:
            mean = con.execute(sa.select(sa.func.avg(_TABLE.c.seconds)).where(_TABLE.c.config == self.config.key())).scalar()
        if mean is None:
            return f"about {_seconds(cells * CELL_S)} s at {_seconds(CELL_S)} s a cell on one core"
        return f"about {_seconds(cells * float(mean))} s at {_seconds(float(mean))} s a cell, as this storage measured"


def _seconds(seconds: float) -> str:
    """Whole seconds from 10 up, two significant digits below (``220``, ``1.1``, ``0.031``)."""
    return f"{seconds:.0f}" if seconds >= 10 else f"{seconds:.2g}"
