"""Sequence lengths of a real text corpus that installs offline, and random batches drawn from them.

``pydoc-sentences``: the standard library's ``pydoc_data.topics`` (the help text of Python's
language reference, the corpus the zoo's byte LM is trained on), cut into paragraphs at blank
lines, whitespace collapsed, then into sentences after ``.``, ``!`` or ``?`` followed by
whitespace; pieces without a letter are dropped. A sentence's length is its number of UTF-8
**bytes** (the zoo's LMs are byte-level: one token per byte). Code examples inside topics
make some "sentences" long (up to about 3,000 bytes): that tail is part of the real distribution.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Sequence

import numpy as np

from coevo.sim.errors import UserInputError
from coevo.sim.fpga.dag import check_lengths

CORPORA = ("pydoc-sentences",)
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+")
_LETTER = re.compile(r"[A-Za-z]")


@functools.cache
def pydoc_sentences() -> tuple[str, ...]:
    """The sentences of ``pydoc_data.topics`` (module doc), topics in sorted key order."""
    from pydoc_data.topics import topics

    out: list[str] = []
    for key in sorted(topics):
        for paragraph in re.split(r"\n\s*\n", topics[key]):
            flat = " ".join(paragraph.split())
            out += [s for s in _SENTENCE_END.split(flat) if _LETTER.search(s)]
    return tuple(out)


@functools.cache
def corpus_lengths(name: str = "pydoc-sentences") -> tuple[int, ...]:
    """Byte lengths of the sentences of corpus ``name``.

    Raises:
        UserInputError: an unknown corpus (the message names the known ones).
    """
    if name != "pydoc-sentences":
        raise UserInputError(f"unknown length corpus {name!r}; use 'pydoc-sentences' or give a list of positive lengths")
    return tuple(len(s.encode("utf-8")) for s in pydoc_sentences())


def resolve_lengths(lengths: str | Sequence[int]) -> list[int]:
    """A corpus name's lengths, or an explicit list checked (non-empty, positive integers)."""
    if isinstance(lengths, str):
        return list(corpus_lengths(lengths))
    return check_lengths(lengths)


def draw_batches(pool: Sequence[int], batch: int, draws: int, seed: int = 0) -> list[list[int]]:
    """``draws`` batches of ``batch`` lengths drawn from ``pool`` without replacement within a batch.

    Batch ``i`` uses ``numpy.random.default_rng([seed, i])``, so adding draws keeps the earlier ones.

    Raises:
        UserInputError: a batch larger than the pool or below 1, or draws below 1.
    """
    if batch < 1 or draws < 1:
        raise UserInputError(f"batch and draws must be >= 1; got batch={batch}, draws={draws}")
    if batch > len(pool):
        raise UserInputError(f"batch={batch} is larger than the {len(pool)} lengths given; use batch <= {len(pool)}")
    arr = np.asarray(pool, dtype=int)
    return [[int(x) for x in np.random.default_rng([seed, i]).choice(arr, size=batch, replace=False)] for i in range(draws)]
