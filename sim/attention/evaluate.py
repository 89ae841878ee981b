"""Perplexity and top-k recall of a zoo language model whose attention runs a sparse operator (no retraining)."""

from __future__ import annotations

import dataclasses
import functools
import math

import torch

from coevo.sim.attention.config import ATTENTION
from coevo.sim.attention.flops import check_method
from coevo.sim.attention.model import SelectionStats, SparseConfig, sparsify
from coevo.sim.attention.ops import check_bits, check_top_k, check_window
from coevo.sim.errors import UserInputError
from coevo.sim.zoo import RECIPES, Split, ZooError, ZooModel, load

SPLITS = ("train", "val", "test")


def check_config(method: str, top_k: int, key_bits: int, window: int, n_global: int) -> SparseConfig:
    """The :class:`SparseConfig` of these settings; :class:`UserInputError` naming the bad one otherwise.

    Every setting is checked whatever the method, so a search never records a trial on a value that
    another method would refuse.
    """
    check_method(method)
    check_top_k(top_k)
    check_bits(key_bits)
    check_window(window, n_global)
    return SparseConfig(method, top_k, key_bits, window, n_global)


def check_eval(split: str, max_batches: int | None) -> None:
    """Raise :class:`UserInputError` for an unknown split or ``max_batches < 1``."""
    if split not in SPLITS:
        raise UserInputError(f"split {split!r}: use one of {', '.join(SPLITS)} (choices on 'val', report 'test' once)")
    if max_batches is not None and (isinstance(max_batches, bool) or not isinstance(max_batches, int) or max_batches < 1):
        raise UserInputError(f"max_batches={max_batches!r}: give a positive number of 64-sequence batches, or None for the whole split")


def evaluate_sparse_model(
    zm: ZooModel,
    config: SparseConfig,
    split: str = ATTENTION.split,
    max_batches: int | None = ATTENTION.max_batches,
    length: int | None = None,
    dense_perplexity: float | None = None,
) -> dict[str, float]:
    """Perplexity of ``zm``'s LM with its attention replaced by ``config``'s operator, beside the exact model's.

    ``length`` scores only the first ``length`` tokens of every sequence (the model's block when
    None): perplexity vs context length on the same text. ``dense_perplexity``, when the caller
    already measured it on the same split, batches and length, is reported instead of measuring it again.

    Returns:
        ``perplexity``, ``dense_perplexity``, ``recall`` (mean recall of the exact top-k keys over
        queries that had more visible keys than ``top_k``; nan for methods that do not select by
        score), ``attention_mass`` (mean exact softmax mass on the kept keys, over queries that
        dropped keys), ``keys_per_query`` (mean keys attended), ``tokens`` (scored), ``length``
        (the model's block).
    """
    if zm.task != "lm":
        raise UserInputError(f"model {zm.name!r} is a {zm.task} model; sparse attention needs a causal language model (task 'lm')")
    check_eval(split, max_batches)
    if length is not None:
        block = zm.splits[split].x.shape[1]
        if isinstance(length, bool) or not isinstance(length, int) or not 1 <= length <= block:
            raise UserInputError(f"length={length!r}: give a number of tokens between 1 and the model's block of {block}")
        zm = dataclasses.replace(zm, splits={name: Split(d.x[:, :length], d.y[:, :length]) for name, d in zm.splits.items()})
    stats = SelectionStats()
    sparse = sparsify(zm.model, config, stats)
    with torch.no_grad():
        dense_ppl = zm.evaluate(zm.model, split, max_batches) if dense_perplexity is None else dense_perplexity
        ppl = zm.evaluate(sparse, split, max_batches)
    data = zm.splits[split]
    sequences = len(data) if max_batches is None else min(len(data), 64 * max_batches)
    return {
        "perplexity": float(ppl),
        "dense_perplexity": float(dense_ppl),
        "recall": stats.recall if config.method == "topk-quantized-keys" else math.nan,
        "attention_mass": stats.mass if config.method != "dense" else 1.0,
        "keys_per_query": stats.keys_per_query,
        "tokens": float(sequences * data.x.shape[1]),
        "length": float(data.x.shape[1]),
    }


def sequence_nll_pair(
    zm: ZooModel, config: SparseConfig, split: str = ATTENTION.split, max_batches: int | None = ATTENTION.max_batches
) -> tuple[list[float], list[float]]:
    """Mean token cross-entropy per sequence of the sparse and of the exact model, on the same sequences in order.

    One more pass of each over what :func:`evaluate_sparse_model` scores: paired by sequence, the two
    lists give the test set's noise of the perplexity change (``search.stats.paired_log_ratio``).
    """
    check_eval(split, max_batches)
    sparse = sparsify(zm.model, config, SelectionStats())
    return zm.sequence_nll(sparse, split, max_batches), zm.sequence_nll(zm.model, split, max_batches)


@functools.cache
def _zoo(name: str) -> ZooModel:
    try:
        return load(name)
    except ZooError as exc:
        raise UserInputError(str(exc)) from None


@functools.cache
def _dense_cached(model: str, split: str, max_batches: int | None) -> float:
    zm = _zoo(model)
    return zm.evaluate(zm.model, split, max_batches)


@functools.cache
def _evaluate_cached(model: str, config: SparseConfig, split: str, max_batches: int | None) -> tuple[tuple[str, float], ...]:
    dense = _dense_cached(model, split, max_batches)  # the same for every sparse setting: measured once per process
    return tuple(evaluate_sparse_model(_zoo(model), config, split, max_batches, dense_perplexity=dense).items())


def evaluate_sparse(
    model: str = ATTENTION.model,
    method: str = ATTENTION.method,
    top_k: int = ATTENTION.top_k,
    key_bits: int = ATTENTION.key_bits,
    window: int = ATTENTION.window,
    n_global: int = ATTENTION.n_global,
    split: str = ATTENTION.split,
    max_batches: int | None = ATTENTION.max_batches,
) -> dict[str, float]:
    """Perplexity (and top-k recall) of a zoo LM with sparse attention, no retraining; cached per arguments in-process.

    The model trains on first use (zoo cache; ``lm-pydoc-tiny`` in seconds, ``lm-pydoc`` in minutes).
    Deterministic: the same arguments give the same numbers. See :func:`evaluate_sparse_model` for the keys.

    Args:
        model: a zoo language model (``lm-pydoc``, ``lm-pydoc-tiny``).
        method: ``dense``, ``topk-quantized-keys`` or ``local-global``.
        top_k: keys kept per query (top-k method).
        key_bits: bits of the quantized queries/keys of the pre-scoring, 1..16 (top-k method).
        window: local window, the query included (local-global method).
        n_global: leading tokens every query also sees (local-global method).
        split: ``val`` (for choosing) or ``test`` (to report once); ``train`` is accepted.
        max_batches: batches of 64 sequences scored; None for the whole split.

    Raises:
        UserInputError: unknown model/method/split, a model that is not an LM, or a bad setting.
    """
    config = check_config(method, top_k, key_bits, window, n_global)
    check_eval(split, max_batches)
    lms = ", ".join(n for n, r in RECIPES.items() if r["task"] == "lm")
    if model not in RECIPES:
        raise UserInputError(f"no model {model!r} in the zoo: its language models are {lms}")
    if RECIPES[model]["task"] != "lm":
        raise UserInputError(f"model {model!r} is a {RECIPES[model]['task']} model; sparse attention needs a causal language model ({lms})")
    return dict(_evaluate_cached(model, config, split, max_batches))
