"""Graph generators (R-MAT, Barabasi-Albert), the real graphs that install offline, and named graphs cached on disk.

Both generators are vectorised numpy (no Python loop per edge) and return a deduplicated
CSR adjacency matrix without self loops, with exactly the requested number of edges.

* :func:`rmat` (Chakrabarti, Zhan, Faloutsos 2004; the Graph500 generator): each edge picks
  one quadrant of the adjacency matrix per level of recursion with probabilities
  (a, b, c, d). Graph500's defaults (0.57, 0.19, 0.19, 0.05) give a power-law degree
  distribution. As in Graph500, vertex ids are permuted at random afterwards, so the heavy
  rows are not all at the top of the matrix (which would make a naive row split look worse
  than a degree-aware one for a reason no real graph has).
* :func:`barabasi_albert` (preferential attachment, m edges per new node): vectorised with
  the Batagelj-Brandes trick (each new edge copies an endpoint of a uniformly chosen earlier
  edge slot), edges stored in both directions (an undirected graph: a symmetric matrix).

Named graphs (:data:`GRAPHS`): ``rmat-100k``, ``rmat-1m``, ``rmat-10m``, ``ba-100k``,
``ba-1m``, ``ba-10m`` (the number is the count of stored edges), an optional seed suffix
``@SEED`` (``rmat-1m@1``), and the real graphs ``karate`` and ``lesmis`` that networkx ships
(tiny: 156 and 508 stored edges; no larger real graph installs without a download, see
docs/kernels.md). :func:`load_graph` caches generated graphs under
``$COEVO_CACHE/graphs`` (``~/.cache/coevo/graphs``) with a SHA-256 of the arrays beside them; a
damaged entry is generated again with a note, as the model zoo's.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from coevo.sim.errors import UserInputError
from coevo.sim.graph.csr import Csr, from_edges, load_npz, save_npz
from coevo.sim.paths import cache_root
from coevo.sim.zoo.cache_files import DamagedCache, atomic_write, exclusive, note, rebuilt_note

GRAPH500 = (0.57, 0.19, 0.19, 0.05)
"""Graph500's R-MAT quadrant probabilities (a, b, c, d)."""
EDGE_FACTOR = 16
"""Edges per vertex of the named R-MAT graphs (Graph500's edge factor)."""
GENERATOR_VERSION = 1
"""Part of the cache key: bump when a generator changes its output."""


def rmat(edges: int, *, scale: int | None = None, abcd: tuple[float, float, float, float] = GRAPH500, seed: int = 0,
         permute: bool = True, dtype: Any = np.float32) -> Csr:  # fmt: skip
    """A directed R-MAT graph with exactly ``edges`` unique edges and no self loops, as CSR (values 1).

    Args:
        edges: stored edges (nonzeros), >= 1.
        scale: log2 of the vertex count; default: the smallest with ``2**scale * 16 >= edges`` (Graph500's edge factor 16)
            that leaves the matrix at most a quarter full.
        abcd: quadrant probabilities (a, b, c, d), non-negative, summing to 1.
        seed: random seed (numpy PCG64).
        permute: relabel vertices at random (Graph500 does).
        dtype: value type.

    Raises:
        UserInputError: bad probabilities, or more edges than the ``2**scale`` vertices can hold.

    Example:
        >>> a = rmat(1000, seed=0)
        >>> a.nnz, a.shape
        (1000, (64, 64))
    """
    a, b, c, d = (float(x) for x in abcd)
    if min(a, b, c, d) < 0 or abs(a + b + c + d - 1) > 1e-6:
        raise UserInputError(f"R-MAT probabilities (a, b, c, d) = {abcd} must be >= 0 and sum to 1 (Graph500: {GRAPH500})")
    if edges < 1:
        raise UserInputError(f"edges must be >= 1, got {edges}")
    if scale is None:
        scale = max(1, int(np.ceil(np.log2(max(edges / EDGE_FACTOR, 2)))))
        while 0.25 * 2**scale * (2**scale - 1) < edges:  # small graphs: room for the edges at most half full
            scale += 1
    n = 2**scale
    if edges > 0.5 * n * (n - 1):
        raise UserInputError(f"{edges} edges do not fit an R-MAT graph of 2**{scale} vertices without repeats; raise scale")
    rng = np.random.default_rng(seed)
    # quadrant thresholds: row bit set with probability c + d; column bit given the row bit
    p_row = c + d
    p_col_top = b / (a + b) if a + b > 0 else 0.0
    p_col_bottom = d / (c + d) if c + d > 0 else 0.0
    keys = np.empty(0, dtype=np.int64)
    want = edges
    while True:
        draw = int(want * 1.1) + 64  # repeats and self loops are dropped: draw a little more
        src = np.zeros(draw, dtype=np.int64)
        dst = np.zeros(draw, dtype=np.int64)
        for _ in range(scale):
            row_bit = rng.random(draw) < p_row
            col_bit = rng.random(draw) < np.where(row_bit, p_col_bottom, p_col_top)
            src = (src << 1) | row_bit
            dst = (dst << 1) | col_bit
        fresh = src * n + dst
        keys = np.unique(np.concatenate([keys, fresh[src != dst]]))
        if len(keys) >= edges:
            break
        want = (edges - len(keys)) * 2  # the dense corner saturates: later rounds find new edges more slowly
    keys = rng.choice(keys, size=edges, replace=False) if len(keys) > edges else keys  # a uniform subset of the unique edges
    src, dst = keys // n, keys % n
    if permute:
        perm = rng.permutation(n)
        src, dst = perm[src], perm[dst]
    return from_edges(src, dst, n, dtype=dtype)


def barabasi_albert(edges: int, *, m: int = 8, seed: int = 0, dtype: Any = np.float32) -> Csr:
    """An undirected Barabasi-Albert graph stored as a symmetric CSR matrix with ``edges`` nonzeros (2 per undirected edge).

    Each new vertex attaches ``m`` edges to earlier vertices with probability proportional to
    degree; repeated targets of one vertex are merged, so some vertices get fewer than ``m``.
    The vertex count is chosen so the matrix has at least ``edges`` nonzeros, and the last
    undirected edges are dropped to hit ``edges`` exactly (``edges`` must be even).

    Args:
        edges: stored nonzeros (even, >= 2 * m).
        m: edges each new vertex brings.
        seed: random seed.
        dtype: value type.

    Example:
        >>> g = barabasi_albert(2000, m=4, seed=0)
        >>> g.nnz, bool((g.to_scipy() != g.to_scipy().T).nnz == 0)
        (2000, True)
    """
    if edges < 2 * m or edges % 2:
        raise UserInputError(f"a symmetric BA matrix has an even number of nonzeros >= 2*m = {2 * m}; got {edges}")
    if m < 1:
        raise UserInputError(f"m (edges per new vertex) must be >= 1, got {m}")
    rng = np.random.default_rng(seed)
    undirected = edges // 2
    n = max(m + 2, int(undirected / m * 1.05) + m + 2)  # merged repeats cost a few percent of the edges
    while True:
        # Batagelj-Brandes: slot 2k holds the new vertex of edge k, slot 2k+1 its target, which is
        # either a uniform earlier vertex (for the seed clique) or the endpoint in a uniform earlier slot;
        # copying an endpoint of a uniform slot is sampling by degree. Vectorised: resolve copies of
        # copies by pointer jumping until every target is a vertex.
        new = np.repeat(np.arange(m, n, dtype=np.int64), m)  # vertices m..n-1 each bring m edges
        k = len(new)
        slots = np.empty(2 * k, dtype=np.int64)
        slots[0::2] = new
        first = new == m  # the first vertex attaches to the seed vertices 0..m-1
        pick = (rng.random(k) * (2 * np.arange(k))).astype(np.int64)  # a uniform earlier slot, < 2k
        target = np.where(first, np.arange(k) % m, -1 - pick)  # negative: "copy slot -1 - x"
        slots[1::2] = target
        pending = slots < 0
        while pending.any():
            src_slot = -1 - slots[pending]
            slots[pending] = slots[src_slot]
            pending = slots < 0
        u, v = slots[0::2], slots[1::2]
        keep = u != v  # an endpoint copied from the new vertex's own earlier edge: a self loop, dropped
        keys = np.unique(np.minimum(u, v)[keep] * n + np.maximum(u, v)[keep])
        if len(keys) >= undirected:
            break
        n = int(n * 1.1) + 1
    keys = keys[:undirected] if len(keys) > undirected else keys  # keys are in order of the smaller vertex: drop the latest ones
    lo, hi = keys // n, keys % n
    used = int(max(lo.max(), hi.max())) + 1
    src = np.concatenate([lo, hi])
    dst = np.concatenate([hi, lo])
    return from_edges(src, dst, used, dtype=dtype)


def _real(name: str) -> Callable[[], Csr]:
    def build() -> Csr:
        import networkx as nx

        g = nx.karate_club_graph() if name == "karate" else nx.les_miserables_graph()
        nodes = sorted(g.nodes(), key=str)
        index = {v: i for i, v in enumerate(nodes)}
        src = np.array([index[u] for u, v in g.edges()] + [index[v] for u, v in g.edges()], dtype=np.int64)
        dst = np.array([index[v] for u, v in g.edges()] + [index[u] for u, v in g.edges()], dtype=np.int64)
        return from_edges(src, dst, len(nodes))

    return build


SIZES = {"100k": 100_000, "1m": 1_000_000, "10m": 10_000_000}
GRAPHS: dict[str, str] = {
    **{f"rmat-{s}": f"R-MAT, Graph500 parameters, {n:,} directed edges, edge factor 16, vertex ids permuted" for s, n in SIZES.items()},
    **{f"ba-{s}": f"Barabasi-Albert (m = 8), {n:,} nonzeros (symmetric)" for s, n in SIZES.items()},
    "karate": "Zachary's karate club (real; 34 vertices, 156 nonzeros; ships with networkx)",
    "lesmis": "Les Miserables co-appearances (real; 77 vertices, 508 nonzeros; ships with networkx)",
}
"""Named graphs: name -> what it is. Generated ones take an optional ``@SEED`` suffix (default seed 0)."""
NAME = re.compile(r"^(rmat|ba)-(100k|1m|10m)(?:@(\d+))?$")


def graph_recipe(name: str) -> dict[str, Any]:
    """The recipe (generator, edges, seed) of a named graph; :class:`UserInputError` listing the names if unknown."""
    if name in ("karate", "lesmis"):
        return {"kind": name}
    m = NAME.match(name)
    if not m:
        raise UserInputError(
            f"unknown graph {name!r}; named graphs: {', '.join(GRAPHS)} (generated ones take a seed suffix such as rmat-1m@1), "
            "or the path of a CSR .npz file"
        )
    kind, size, seed = m.group(1), SIZES[m.group(2)], int(m.group(3) or 0)
    return {"kind": kind, "edges": size, "seed": seed, "version": GENERATOR_VERSION}


def generate(recipe: dict[str, Any]) -> Csr:
    """Build the graph a recipe describes (no cache)."""
    kind = recipe["kind"]
    if kind in ("karate", "lesmis"):
        return _real(kind)()
    if kind == "rmat":
        return rmat(recipe["edges"], seed=recipe["seed"])
    return barabasi_albert(recipe["edges"], seed=recipe["seed"])


def cache_dir() -> Path:
    """``$COEVO_CACHE/graphs`` when ``COEVO_CACHE`` is set, else ``~/.cache/coevo/graphs``."""
    return cache_root() / "graphs"


def checksum(a: Csr) -> str:
    """SHA-256 over the shape and the three arrays (what the cache sidecar records)."""
    h = hashlib.sha256(np.asarray(a.shape, dtype=np.int64).tobytes())
    for arr in (a.indptr, a.indices, a.data):
        h.update(np.ascontiguousarray(arr).tobytes())
    return h.hexdigest()


def load_graph(graph: str, *, cache: bool = True) -> Csr:
    """A named graph (generated once, then read from the cache) or a CSR ``.npz`` file.

    A cache entry that does not load (a cut or foreign ``.npz``, a sidecar that is not the JSON
    object written with it) or whose checksum does not match its sidecar is generated again, never
    used, and a :class:`sim.zoo.cache_files.CacheNote` says so (the zoo's channel: the tools
    collect the warnings into their messages, a terminal shows ``note: ...``).

    Raises:
        UserInputError: unknown name (the message lists them), or a file that is not a valid CSR matrix.
    """
    if graph.endswith(".npz") or os.sep in graph:
        return load_npz(graph)
    recipe = graph_recipe(graph)
    if recipe["kind"] in ("karate", "lesmis") or not cache:
        return generate(recipe)
    key = hashlib.sha256(json.dumps(recipe, sort_keys=True).encode()).hexdigest()[:16]
    folder = cache_dir()
    path, side = folder / f"{graph.replace('@', '-s')}-{key}.npz", folder / f"{graph.replace('@', '-s')}-{key}.json"
    # one process generates a graph at a time: another (a search's worker) waits and reads it, rather than
    # finding the arrays written and their sidecar not yet, and generating them again
    with exclusive(path):
        if path.exists() or side.exists():
            try:
                return _cached(path, side)
            except Exception as exc:  # a cache: the recipe makes it again
                note(rebuilt_note(path, exc, "generated again"), stacklevel=2)
        a = generate(recipe)
        atomic_write(path, lambda tmp: save_npz(tmp, a))
        sidecar = json.dumps({"recipe": recipe, "sha256": checksum(a), "shape": list(a.shape), "nnz": a.nnz})
        atomic_write(side, lambda tmp: tmp.write_text(sidecar))  # after the arrays: a sidecar never vouches for arrays not there
    return a


def _cached(path: Path, side: Path) -> Csr:
    """The graph in cache file ``path`` if it loads and matches the checksum its sidecar ``side`` records.

    Raises:
        DamagedCache: either file missing or unreadable, or arrays other than the sidecar describes.
    """
    if not side.is_file():
        raise DamagedCache(f"its sidecar {side.name} is missing")
    if not path.is_file():
        raise DamagedCache(f"it is missing; its sidecar {side.name} is there")
    try:
        a = load_npz(path)
    except UserInputError:  # its message speaks to a user's own file; this one is ours
        raise DamagedCache("not a readable CSR .npz") from None
    try:
        info = json.loads(side.read_text())
    except (OSError, ValueError) as exc:
        raise DamagedCache(f"its sidecar {side.name} did not load ({type(exc).__name__})") from None
    if not isinstance(info, dict):
        raise DamagedCache(f"its sidecar {side.name} is not a JSON object")
    if info.get("sha256") != checksum(a):
        raise DamagedCache(f"damaged: its arrays do not match the checksum its sidecar {side.name} records")
    return a
