"""Prune a model of the zoo and measure it: what the ``prune.activation`` tool, the ``prune`` problem and the bench share."""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass, field
from functools import lru_cache
from typing import Any

import torch

from coevo.search.errors import UserInputError
from coevo.search.stats import paired_log_ratio
from coevo.sim.prune import PruneResult, prune
from coevo.sim.prune.config import PruneConfig
from coevo.sim.zoo import ZooError, ZooModel, load


@lru_cache(maxsize=4)
def zoo_model(name: str, train_seed: int | None = None) -> ZooModel:
    """The zoo model ``name`` (trained on first use, then loaded from disk; kept for the process).

    ``train_seed``: train it with this seed instead of the recipe's (another trained model, cached apart).

    Raises:
        UserInputError: an unknown name (the message lists the zoo), or a model without a data loader.
    """
    try:
        return load(name, train_seed=train_seed)
    except ZooError as exc:
        raise UserInputError(str(exc)) from None


@dataclass
class PruneOutcome:
    """One pruning of a zoo model, measured.

    ``metric`` is the zoo's (``perplexity``: lower is better; ``accuracy``: % higher is better);
    ``*_dense`` and ``*_pruned`` are that metric on the val/test split before and after pruning.
    ``sparsity`` is measured from the masks over the pruned layers, ``wall_s`` is the pruning's
    own wall time (statistics, scores, masks; not the evaluations).
    """

    model: str
    metric: str
    score: str
    pattern: str
    target_sparsity: float | dict[str, float]
    sparsity: float
    calib_tokens: int
    seed: int
    val_dense: float
    val_pruned: float
    test_dense: float | None
    test_pruned: float | None
    wall_s: float
    layers: int
    layer_sparsity: dict[str, float] = field(default_factory=dict)
    test_ln_half: float | None = None
    """95 % half-width of the paired per-sequence log-perplexity difference, pruned minus dense, on the
    test sequences (``paired_test``; language models only): the test set's noise for the verdict."""
    test_sequences: int | None = None

    def as_dict(self) -> dict[str, Any]:
        out = asdict(self)
        for k, v in out.items():
            if isinstance(v, float):
                out[k] = round(v, 6)
        out["layer_sparsity"] = {k: round(v, 6) for k, v in self.layer_sparsity.items()}
        return out


def calibration_loader(zm: ZooModel, seed: int) -> Any:
    """Training sequences in an order drawn by ``seed`` (different seeds: different calibration samples)."""
    return zm.loader("train", batch_size=8, shuffle=True, seed=seed)


def prune_model(
    zm: ZooModel,
    sparsity: float | Mapping[str, float] | None,
    *,
    pattern: str = PruneConfig.pattern,
    score: str = PruneConfig.score,
    calib_tokens: int = PruneConfig.calib_tokens,
    seed: int = PruneConfig.seed,
    progress: Callable[[str, float], None] | None = None,
) -> PruneResult:
    """Prune a copy of ``zm``'s model (calibrated on training sequences drawn by ``seed``), not evaluated.

    Raises:
        UserInputError: bad pruning arguments (see :func:`sim.prune.prune`).
    """
    torch.manual_seed(seed)
    return prune(
        zm.model,
        calibration_loader(zm, seed) if score != "magnitude" else None,
        sparsity,
        pattern=pattern,
        score=score,
        calib_tokens=calib_tokens,
        progress=progress,
    )


def prune_zoo(
    model: str | ZooModel,
    sparsity: float | Mapping[str, float] | None,
    *,
    pattern: str = PruneConfig.pattern,
    score: str = PruneConfig.score,
    calib_tokens: int = PruneConfig.calib_tokens,
    seed: int = PruneConfig.seed,
    splits: tuple[str, ...] = ("val", "test"),
    max_batches: int | None = None,
    dense: Mapping[str, float] | None = None,
    progress: Callable[[str, float], None] | None = None,
    paired_test: bool = False,
) -> PruneOutcome:
    """Prune ``model`` (a zoo name, or a loaded :class:`ZooModel` such as a user's) and evaluate it dense and pruned on ``splits``.

    ``dense``: the dense model's values per split when already known (skips measuring them again).
    ``paired_test``: for a language model, also score both models sequence by sequence on the test
    split (one more pass each) for the test set's noise of the change (:attr:`PruneOutcome.test_ln_half`).

    Raises:
        UserInputError: an unknown model, or bad pruning arguments (see :func:`sim.prune.prune`).
    """
    zm = zoo_model(model) if isinstance(model, str) else model
    res = prune_model(zm, sparsity, pattern=pattern, score=score, calib_tokens=calib_tokens, seed=seed, progress=progress)
    values: dict[str, dict[str, float | None]] = {"dense": {}, "pruned": {}}
    for split in ("val", "test"):
        if split not in splits:
            values["dense"][split] = values["pruned"][split] = None
            continue
        known = (dense or {}).get(split)
        started = time.perf_counter()
        values["dense"][split] = known if known is not None else float(zm.evaluate(zm.model, split=split, max_batches=max_batches))
        values["pruned"][split] = float(zm.evaluate(res.model, split=split, max_batches=max_batches))
        if progress:
            progress(f"evaluated {split} ({time.perf_counter() - started:.1f} s)", 1.0)
    val_d, val_p = values["dense"]["val"], values["pruned"]["val"]
    half, sequences = None, None
    if paired_test and zm.task == "lm" and "test" in splits:
        pruned_nll = zm.sequence_nll(res.model, "test", max_batches)
        _, half, sequences = paired_log_ratio(pruned_nll, zm.sequence_nll(zm.model, "test", max_batches))
    return PruneOutcome(
        model=zm.name,
        metric=zm.metric,
        score=score,
        pattern=res.pattern,
        target_sparsity=dict(sparsity) if isinstance(sparsity, Mapping) else float(sparsity if sparsity is not None else res.sparsity),
        sparsity=res.sparsity,
        calib_tokens=res.calib_tokens,
        seed=seed,
        val_dense=math.nan if val_d is None else val_d,
        val_pruned=math.nan if val_p is None else val_p,
        test_dense=values["dense"]["test"],
        test_pruned=values["pruned"]["test"],
        wall_s=res.wall_s,
        layers=len(res.masks),
        layer_sparsity=res.layer_sparsity,
        test_ln_half=half,
        test_sequences=sequences,
    )
