"""A k x k mesh with spatial-division-multiplexed links: guaranteed-bandwidth circuits plus best-effort packets.

Every directed link between neighbours has ``subchannels`` sub-channels of one flit per
cycle each. Two kinds of traffic share them:

* **GT** (guaranteed throughput) connection requests: a source asks for ``gt_width``
  sub-channels to a destination for a lifetime (geometric, mean ``gt_hold`` cycles). The
  routing algorithm looks for a path with that many free sub-channels on every link and
  reserves them (a virtual circuit), or rejects the request. Reserved sub-channels carry
  only their flow until it ends, so an accepted flow's bandwidth is guaranteed; the
  simulator checks every cycle that no link carries more than its sub-channels (violations,
  which must stay 0).
* **BE** (best effort) packets of ``packet_flits`` flits use the sub-channels GT flows leave
  free: each link sends up to that many flits a cycle from its FIFO queue, and a packet
  moves to the next router when all its flits crossed (store and forward). A router adds
  no cycle of its own: a packet whose last flit crossed in cycle ``t`` is at the next router
  in cycle ``t + 1`` and its first flits leave it in that same cycle (the routing decision
  is made in the cycle the packet starts out, as a lookahead router does). So a hop costs
  the serialisation time alone, and the zero-load latency is
  ``hops x ceil(packet_flits / subchannels)`` cycles (derived in tests/sim/test_noc.py).

Routing (GT requests; BE packets use XY under ``xy`` and minimal adaptive otherwise):

* ``xy``: dimension order, the one XY path.
* ``adaptive``: minimal adaptive, hop by hop the productive direction with the most free
  sub-channels.
* ``bee-qos``: bee-inspired QoS routing: ``scouts`` scout agents walk random paths towards the
  destination (productive hops, and a non-productive hop with probability ``detour`` while
  they have spare hops) and report the free sub-channel bandwidth along them (the
  bottleneck) and their length; a path is chosen by roulette over the scouts that found
  enough bandwidth, weighted by quality ``(slack / subchannels)^alpha / hops``, so good paths
  recruit most flows but not all (load spreads like foragers over flower patches); the
  chosen path's sub-channels are reserved.

Offered load ``load`` is a fraction of a node's injection capacity (``subchannels`` flits a
cycle); ``gt_share`` of it arrives as GT flows, the rest as BE packets. Topology as a
networkx graph: :func:`mesh_graph`.
"""

from __future__ import annotations

import itertools
import math
import random
from collections import deque
from dataclasses import asdict, dataclass, field
from typing import Any, ClassVar

import networkx as nx

from sim.errors import UserInputError
from sim.noc.common import WARMUP_MAX, Clock, NocResult, ProgressFn, check_load, delay_stats, destination

ROUTINGS = ("xy", "adaptive", "bee-qos")
TRAFFIC = ("uniform", "transpose", "tornado", "hotspot")
Link = tuple[int, int]


def mesh_graph(k: int) -> nx.DiGraph:
    """The k x k mesh: node ``y * k + x`` with ``pos=(x, y)``, one directed edge per link."""
    g = nx.DiGraph()
    for node in range(k * k):
        g.add_node(node, pos=(node % k, node // k))
    for node in range(k * k):
        x, y = node % k, node // k
        for dx, dy in ((1, 0), (-1, 0), (0, 1), (0, -1)):
            if 0 <= x + dx < k and 0 <= y + dy < k:
                g.add_edge(node, (y + dy) * k + x + dx)
    return g


def xy_path(src: int, dst: int, k: int) -> list[int]:
    """Nodes of the dimension-order path (X first, then Y), both ends included."""
    x, y = src % k, src // k
    tx, ty = dst % k, dst // k
    path = [src]
    while x != tx:
        x += 1 if tx > x else -1
        path.append(y * k + x)
    while y != ty:
        y += 1 if ty > y else -1
        path.append(y * k + x)
    return path


def hops(src: int, dst: int, k: int) -> int:
    """Manhattan distance."""
    return abs(src % k - dst % k) + abs(src // k - dst // k)


@dataclass(frozen=True)
class MeshConfig:
    """What a mesh simulation was asked for."""

    k: int
    """Side: ``k x k`` nodes."""
    routing: str
    traffic: str
    subchannels: int
    gt_share: float
    packet_flits: int
    topology: ClassVar[str] = "mesh"

    def as_dict(self) -> dict[str, Any]:
        """JSON-friendly form, ``topology`` first."""
        return {"topology": self.topology, **asdict(self)}


@dataclass(frozen=True)
class MeshStats:
    """What the mesh simulator measures beyond the common metrics (delays and throughput are best-effort traffic's).

    Attributes:
        gt_requests: GT connection requests after the warm-up.
        gt_acceptance: accepted / requested (nan without requests).
        gt_violations: link-cycles on which reserved sub-channels exceeded the link's (must be 0).
        gt_link_utilisation: share of all sub-channel cycles reserved by GT flows.
        be_zero_load_latency_uniform: zero-load latency (module doc) averaged over all node pairs, cycles.
        be_zero_load_latency_of_delivered: the same averaged over the packets delivered, cycles.
        xy_saturation_bound_uniform: the bisection bound on uniform traffic under XY routing
            (``4 / k`` for even k), in the unit of the offered load.
    """

    gt_requests: int
    gt_acceptance: float
    gt_violations: int
    gt_link_utilisation: float
    be_zero_load_latency_uniform: float
    be_zero_load_latency_of_delivered: float
    xy_saturation_bound_uniform: float

    @property
    def zero_load(self) -> float:
        """The zero-load delay saturation is judged against (uniform traffic's)."""
        return self.be_zero_load_latency_uniform

    def as_dict(self) -> dict[str, Any]:
        """JSON-friendly form."""
        return asdict(self)


MeshResult = NocResult[MeshConfig, MeshStats]


@dataclass
class _Packet:
    src: int
    dst: int
    gen: int
    at: int
    left: int = 0
    route: list[int] = field(default_factory=list)


class MeshSim:
    """One simulation run (see module doc); :func:`simulate_mesh` is the entry point."""

    def __init__(
        self,
        k: int,
        routing: str,
        subchannels: int,
        seed: int,
        *,
        scouts: int = 8,
        alpha: float = 2.0,
        detour: float = 0.1,
    ) -> None:
        if not 2 <= k <= 16:
            raise UserInputError(f"mesh side k must be 2..16, got {k}")
        if routing not in ROUTINGS:
            raise UserInputError(f"unknown mesh routing {routing!r}; choose from {', '.join(ROUTINGS)}")
        if not 1 <= subchannels <= 64:
            raise UserInputError(f"subchannels per link must be 1..64, got {subchannels}")
        self.k, self.routing, self.sc = k, routing, subchannels
        self.scouts, self.alpha, self.detour = scouts, alpha, detour
        self.rng = random.Random(seed)
        self.graph = mesh_graph(k)
        self.reserved: dict[Link, int] = dict.fromkeys(self.graph.edges, 0)
        self.queues: dict[Link, deque[_Packet]] = {e: deque() for e in self.graph.edges}
        self.queued: dict[Link, int] = dict.fromkeys(self.graph.edges, 0)  # flits waiting per link

    # ---- GT routing

    def _free(self, a: int, b: int) -> int:
        return self.sc - self.reserved[a, b]

    def _productive(self, at: int, dst: int) -> list[int]:
        k = self.k
        x, y, tx, ty = at % k, at // k, dst % k, dst // k
        out = []
        if tx != x:
            out.append(at + (1 if tx > x else -1))
        if ty != y:
            out.append(at + (k if ty > y else -k))
        return out

    def gt_path(self, src: int, dst: int, width: int) -> list[int] | None:
        """A path with ``width`` free sub-channels on every link, by the routing algorithm, or None."""
        if self.routing == "xy":
            path = xy_path(src, dst, self.k)
            return path if all(self._free(a, b) >= width for a, b in itertools.pairwise(path)) else None
        if self.routing == "adaptive":
            path = [src]
            while path[-1] != dst:
                options = [n for n in self._productive(path[-1], dst) if self._free(path[-1], n) >= width]
                if not options:
                    return None
                path.append(max(options, key=lambda n: (self._free(path[-1], n), -n)))
            return path
        return self._bee(src, dst, width)

    def _bee(self, src: int, dst: int, width: int) -> list[int] | None:
        found: list[tuple[float, list[int]]] = []
        spare_hops = 2
        for _ in range(self.scouts):
            path, extra, bottleneck = [src], 0, self.sc
            while path[-1] != dst and len(path) < 4 * self.k * self.k:
                at = path[-1]
                productive = self._productive(at, dst)
                if extra < spare_hops and self.rng.random() < self.detour:
                    sideways = [n for n in self.graph.successors(at) if n not in productive and n not in path]
                    if sideways:
                        productive = sideways
                        extra += 1
                nxt = self.rng.choice(productive)
                if nxt in path:  # a loop back: the scout gives up on this walk
                    break
                bottleneck = min(bottleneck, self._free(at, nxt))
                path.append(nxt)
            if path[-1] == dst and bottleneck >= width:
                quality = ((bottleneck - width + 1) / self.sc) ** self.alpha / (len(path) - 1)
                found.append((quality, path))
        if not found:
            return None
        total = sum(q for q, _ in found)
        pick = self.rng.random() * total
        for q, path in found:
            pick -= q
            if pick <= 0:
                return path
        return found[-1][1]

    def reserve(self, path: list[int], width: int, sign: int = 1) -> None:
        """Reserve (``sign`` 1) or release (-1) ``width`` sub-channels along ``path``."""
        for a, b in itertools.pairwise(path):
            self.reserved[a, b] += sign * width

    # ---- BE forwarding

    def be_next(self, at: int, dst: int) -> int:
        """Next hop of a BE packet: XY under ``xy`` routing, else the productive link with the shortest queue."""
        if self.routing == "xy":
            return xy_path(at, dst, self.k)[1]
        options = self._productive(at, dst)
        return min(options, key=lambda n: (self.queued[at, n], n))


def simulate_mesh(
    k: int = 8,
    *,
    routing: str = "bee-qos",
    load: float = 0.3,
    gt_share: float = 0.3,
    traffic: str = "uniform",
    subchannels: int = 4,
    packet_flits: int = 4,
    gt_width: int = 1,
    gt_hold: int = 400,
    cycles: int = 10_000,
    seed: int = 0,
    scouts: int = 8,
    alpha: float = 2.0,
    detour: float = 0.1,
    capacity: int | None = None,
    progress: ProgressFn | None = None,
) -> MeshResult:
    """Simulate the SDM mesh (module doc) and return its metrics.

    Args:
        capacity: flits per cycle that ``load`` 1.0 stands for (default: ``subchannels``);
            fix it to compare designs with different sub-channel counts under the same traffic.

    Raises:
        UserInputError: k outside 2..16, load outside (0, 1], gt_share outside [0, 1], an
            unknown routing or traffic pattern, or a GT width no link can carry.
    """
    check_load(load)
    if not 0 <= gt_share <= 1:
        raise UserInputError(f"gt_share must be in [0, 1], got {gt_share}")
    if traffic not in TRAFFIC:
        raise UserInputError(f"unknown mesh traffic {traffic!r}; choose from {', '.join(TRAFFIC)}")
    if not 1 <= gt_width <= subchannels:
        raise UserInputError(f"a GT flow of {gt_width} sub-channels cannot fit links of {subchannels} sub-channels (impossible request)")
    if packet_flits < 1 or gt_hold < 1 or cycles < 100:
        raise UserInputError("packet_flits and gt_hold must be >= 1, cycles >= 100")
    sim = MeshSim(k, routing, subchannels, seed, scouts=scouts, alpha=alpha, detour=detour)
    rng = sim.rng
    n = k * k
    capacity = capacity or subchannels  # flits per cycle that load 1.0 stands for
    gt_rate = gt_share * load * capacity / (gt_width * gt_hold)  # flow arrivals per node per cycle
    be_rate = (1 - gt_share) * load * capacity / packet_flits  # packets per node per cycle
    ends: dict[int, list[tuple[list[int], int]]] = {}
    warmup = min(cycles // 10, WARMUP_MAX)
    requested = accepted = violations = 0
    gt_flits = be_flits = 0
    delays: list[float] = []
    zero_load: list[float] = []  # each delivered packet's own zero-load latency
    arriving: dict[int, list[_Packet]] = {}
    clock = Clock(cycles, progress)
    with clock:
        for t in clock:
            for held, width in ends.pop(t, []):
                sim.reserve(held, width, -1)
            for src in range(n):
                if gt_rate and rng.random() < gt_rate:
                    dst = destination(traffic, src, n, rng, k=k)
                    if dst != src:
                        route = sim.gt_path(src, dst, gt_width)
                        counted = t >= warmup
                        requested += counted
                        if route is not None:
                            accepted += counted
                            sim.reserve(route, gt_width)
                            hold = 1 + int(rng.expovariate(1 / gt_hold))
                            ends.setdefault(t + hold, []).append((route, gt_width))
                if be_rate and rng.random() < be_rate:
                    dst = destination(traffic, src, n, rng, k=k)
                    if dst != src:
                        pkt = _Packet(src, dst, t, src)
                        arriving.setdefault(t, []).append(pkt)
            for pkt in arriving.pop(t, []):
                if pkt.at == pkt.dst:
                    if pkt.gen >= warmup:
                        delays.append(t - pkt.gen)
                        zero_load.append(hops(pkt.src, pkt.dst, k) * math.ceil(packet_flits / subchannels))
                    if t >= warmup:
                        be_flits += packet_flits
                    continue
                nxt = sim.be_next(pkt.at, pkt.dst)
                pkt.left = packet_flits
                pkt.route.append(nxt)
                sim.queues[pkt.at, nxt].append(pkt)
                sim.queued[pkt.at, nxt] += packet_flits
            for link, queue in sim.queues.items():
                reserved = sim.reserved[link]
                if reserved > subchannels:
                    violations += 1  # an accepted flow lost bandwidth: must never happen
                if t >= warmup:
                    gt_flits += reserved
                budget = subchannels - reserved
                while queue and budget > 0:
                    head = queue[0]
                    sent = min(budget, head.left)
                    head.left -= sent
                    budget -= sent
                    sim.queued[link] -= sent
                    if head.left == 0:
                        queue.popleft()
                        head.at = link[1]
                        arriving.setdefault(t + 1, []).append(head)  # at the next router next cycle, forwarded then (module doc)
    ran = clock.done
    measured = max(ran - warmup, 1)
    mean, p99 = delay_stats(delays)
    mean_hops = sum(hops(a, b, k) for a in range(n) for b in range(n) if a != b) / (n * (n - 1))
    return NocResult(
        config=MeshConfig(k, routing, traffic, subchannels, gt_share, packet_flits),
        cycles=ran,
        offered_load=load,
        delivered_packets=len(delays),
        throughput=be_flits / (measured * n * capacity),  # in the unit of the offered load
        mean_delay=mean,
        p99_delay=p99,
        wall_s=clock.wall_s,
        stats=MeshStats(
            gt_requests=requested,
            gt_acceptance=round(accepted / requested, 5) if requested else math.nan,
            gt_violations=violations,
            gt_link_utilisation=round(gt_flits / (measured * len(sim.reserved) * subchannels), 5),
            be_zero_load_latency_uniform=round(mean_hops * math.ceil(packet_flits / subchannels), 3),
            be_zero_load_latency_of_delivered=round(sum(zero_load) / len(zero_load), 3) if zero_load else math.nan,
            xy_saturation_bound_uniform=round(4 / k, 4) if k % 2 == 0 else round(4 * k / (k * k - 1), 4),
        ),
        stopped_early=clock.stopped,
    )
