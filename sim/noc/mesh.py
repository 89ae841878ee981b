"""A k x k mesh with spatial-division-multiplexed links: guaranteed-bandwidth circuits plus best-effort packets.

Every directed link between neighbours has ``subchannels`` sub-channels of one flit per
cycle each. Three kinds of traffic share them:

* **GT** (guaranteed throughput) flows: a source asks for ``gt_width`` sub-channels to a
  destination for a lifetime (geometric, mean ``gt_hold`` cycles). A one-flit *set-up
  header* travels from the source hop by hop; at each router it picks the next link by the
  routing algorithm, reserves ``gt_width`` sub-channels on it (or, with none free, tears the
  partial circuit down: the request is rejected) and crosses it. When the header reaches
  the destination the circuit is reserved (the *set-up time*, cycles from request to
  reservation); a one-flit acknowledgement returns along the reversed path and the source
  starts sending. The flow's data are produced from the request on (``gt_width`` flits in
  a cycle with probability ``gt_fill``) and wait at the source until then. Data flits cross
  one reserved sub-channel per flit and cycle, hop by hop, and their latency (cycle of
  arrival minus cycle produced) is measured flit by flit: GT latency and jitter are
  measurements, not assumptions. After the lifetime the source stops producing; the circuit
  is released once its last flit has arrived (tear-down itself is instantaneous, as is the
  release of a failed header's partial circuit, for every routing alike). Reserved
  sub-channels carry nothing else, and every cycle the simulator checks that no link's
  reservations exceed its sub-channels and that no flow sends more flits on a link than
  it reserved (violations, which must stay 0).
* **Control** packets of one flit: set-up headers, acknowledgements and the bee agents
  (scouts and foragers, below). They use the sub-channels GT leaves free, ahead of BE
  packets (a control virtual channel), and count as *control overhead* (flit-hops).
* **BE** (best effort) packets of ``packet_flits`` flits use the sub-channels GT flows leave
  free: each link sends up to that many flits a cycle from its FIFO queue, and a packet
  moves to the next router when all its flits crossed (store and forward). A router adds
  no cycle of its own: a packet whose last flit crossed in cycle ``t`` is at the next router
  in cycle ``t + 1`` and its first flits leave it in that same cycle (the routing decision
  is made in the cycle the packet starts out, as a lookahead router does). So a hop costs
  the serialisation time alone, and the zero-load latency is
  ``hops x ceil(packet_flits / subchannels)`` cycles (derived in tests/sim/test_noc.py).
  At zero load a one-flit control packet makes one hop a cycle, so a set-up takes ``hops``
  cycles, its acknowledgement ``hops`` more, and a GT flit produced at the request and
  sent at once would arrive ``hops`` cycles after it was sent.

GT routing (BE packets use XY under ``xy`` and minimal adaptive otherwise):

* ``xy``: dimension order, the one XY path.
* ``adaptive``: minimal adaptive, the header picks hop by hop the productive link with the
  most free sub-channels.
* ``widest-shortest``: among the minimal paths, one whose bottleneck has the most free
  sub-channels, computed centrally from the true link state at request time
  (:func:`sim.noc.bee.widest_shortest_path`); the header follows it.
* ``k-shortest``: the first of the ``ksp`` shortest simple paths (networkx) with room on
  every link, computed the same way. Both baselines see global state for free: a best case.
* ``bee-qos``: distributed foraging (BeeHive / BeeAdHoc family). Every node keeps a
  :class:`~sim.noc.bee.ForagingTable`: per destination and outgoing link, a path quality
  that evaporates with half-life ``half_life``. *Foragers* (control packets) leave a node
  for the destinations it requested recently (one every ``forage_period`` cycles), choose
  each hop at random in proportion to ``(quality + floor) ** alpha`` (uniformly with
  probability ``detour``), within ``spare_hops`` hops of a minimal path, and note the free
  sub-channels of every link they take. At the destination a forager turns round and
  retraces its path; every node it passes learns the quality of the rest of that path
  (bottleneck free share x minimal hops / hops taken). A GT request whose source knows
  nothing fresh about the destination (best quality < 0.1) first sends ``scouts`` scouts
  (foragers that ignore the table) and waits for the first agent back (or ``4 hops + 16``
  cycles). A scout back home *dances*: it recruits ``dance x quality`` foragers (rounded at
  random) to its destination, so a good find draws more foragers (foragers themselves do
  not dance: recruits recruiting recruits would breed without end); at most ``2 scouts``
  agents of a node are out at a time, scouts aside. A request's header (at once, or
  after the wait) follows, at each router, the highest-quality link with room for the flow
  (the productive link with most room where the table knows none). Everything the bees
  know they carried there themselves, spending cycles and link bandwidth to do it.

Offered load ``load`` is a fraction of a node's injection capacity (``subchannels`` flits a
cycle); ``gt_share`` of it arrives as GT flows (counted at their reserved width; they send
``gt_fill`` of it), the rest as BE packets. Topology as a networkx graph: :func:`mesh_graph`.
"""

from __future__ import annotations

import itertools
import math
import random
from collections import deque
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar

import numpy as np

from coevo.sim.errors import UserInputError
from coevo.sim.noc.bee import ForagingTable, k_shortest_feasible, segment_quality, widest_shortest_path
from coevo.sim.noc.common import WARMUP_MAX, Clock, NocResult, ProgressFn, check_load, delay_stats, destination
from coevo.sim.noc.config import NOC

if TYPE_CHECKING:  # networkx loads when a graph is first built, not when the problem is listed
    import networkx as nx

ROUTINGS = ("xy", "adaptive", "widest-shortest", "k-shortest", "bee-qos")
TRAFFIC = ("uniform", "transpose", "tornado", "hotspot")
Link = tuple[int, int]
FRESH = 0.1
"""A source with no table entry of at least this quality for a destination scouts before setting a flow up."""


def mesh_graph(k: int) -> nx.DiGraph:
    """The k x k mesh: node ``y * k + x`` with ``pos=(x, y)``, one directed edge per link."""
    import networkx as nx

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
        gt_requests: GT flow requests after the warm-up.
        gt_acceptance: accepted / decided (requests whose set-up was still under way at the end
            are left out; nan without any).
        gt_violations: link-cycles on which reservations exceeded the link's sub-channels or a
            flow sent more flits than it reserved (must be 0).
        gt_link_utilisation: share of all sub-channel cycles reserved by GT flows.
        gt_flits: GT data flits delivered (of flows requested after the warm-up).
        gt_latency_mean: mean GT flit latency, cycles from produced to arrived (nan without flits).
        gt_latency_p50: its median.
        gt_latency_p99: its 99th percentile.
        gt_jitter: p99 - p50 of the GT flit latency, cycles.
        gt_latency_std: its standard deviation, cycles.
        gt_setup_mean: mean set-up time of accepted flows, cycles from request to reservation.
        gt_setup_p99: its 99th percentile.
        control_flits: control flit-hops after the warm-up (headers, acks, scouts, foragers).
        bee_flits: the scouts' and foragers' share of them (flit-hops; 0 unless bee-qos).
        control_flits_per_node_cycle: control flit-hops per node per cycle.
        be_zero_load_latency_uniform: zero-load latency (module doc) averaged over all node pairs, cycles.
        be_zero_load_latency_of_delivered: the same averaged over the packets delivered, cycles.
        xy_saturation_bound_uniform: the bisection bound on uniform traffic under XY routing
            (``4 / k`` for even k), in the unit of the offered load.
    """

    gt_requests: int
    gt_acceptance: float
    gt_violations: int
    gt_link_utilisation: float
    gt_flits: int
    gt_latency_mean: float
    gt_latency_p50: float
    gt_latency_p99: float
    gt_jitter: float
    gt_latency_std: float
    gt_setup_mean: float
    gt_setup_p99: float
    control_flits: int
    bee_flits: int
    control_flits_per_node_cycle: float
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


@dataclass(eq=False)
class _Flow:
    """A GT flow from request to release."""

    src: int
    dst: int
    width: int
    requested: int
    hold: int
    counted: bool
    path: list[int]
    """Nodes reserved so far (the whole circuit once set up)."""
    setup_at: int = -1
    open_at: int = -1
    end: int = -1
    buffers: list[deque[int]] = field(default_factory=list)
    """``buffers[i]``: production cycles of the flits waiting to cross the path's link i."""


@dataclass(eq=False)
class _Packet:
    """A BE packet or a one-flit control packet (``kind``: be, header, ack, forager, return)."""

    src: int
    dst: int
    gen: int
    at: int
    left: int = 0
    route: list[int] = field(default_factory=list)
    kind: str = "be"
    flits: int = 1
    plan: list[int] = field(default_factory=list)
    """Source route still ahead (ack, returning forager, centrally routed header)."""
    flow: _Flow | None = None
    trail: list[int] = field(default_factory=list)
    """A forager's nodes so far."""
    free: list[int] = field(default_factory=list)
    """A forager's note of the free sub-channels of each link it took, read when it took it."""
    scout: bool = False


class MeshSim:
    """The state of one simulation run and its cycle step (module doc); :func:`simulate_mesh` is the entry point.

    Tests drive it directly: :meth:`request_gt`, :meth:`launch_forager`, :meth:`step`.
    """

    def __init__(
        self,
        k: int,
        routing: str,
        subchannels: int,
        seed: int,
        *,
        scouts: int = NOC.scouts,
        alpha: float = NOC.alpha,
        detour: float = NOC.detour,
        packet_flits: int = NOC.mesh_packet_flits,
        gt_fill: float = NOC.gt_fill,
        ksp: int = NOC.ksp,
        forage_period: int = NOC.forage_period,
        half_life: float = NOC.half_life,
        dance: float = 1.0,
        spare_hops: int = 2,
        warmup: int = 0,
    ) -> None:
        if not 2 <= k <= 16:
            raise UserInputError(f"mesh side k must be 2..16, got {k}")
        if routing not in ROUTINGS:
            raise UserInputError(f"unknown mesh routing {routing!r}; choose from {', '.join(ROUTINGS)}")
        if not 1 <= subchannels <= 64:
            raise UserInputError(f"subchannels per link must be 1..64, got {subchannels}")
        if not 0 < gt_fill <= 1:
            raise UserInputError(f"gt_fill (share of its reserved bandwidth a GT flow sends) must be in (0, 1], got {gt_fill}")
        if scouts < 1 or ksp < 1 or forage_period < 1 or spare_hops < 0 or dance < 0:
            raise UserInputError("scouts, ksp and forage_period must be >= 1; spare_hops and dance >= 0")
        self.k, self.routing, self.sc = k, routing, subchannels
        self.scouts, self.alpha, self.detour = scouts, alpha, detour
        self.packet_flits, self.gt_fill, self.ksp = packet_flits, gt_fill, ksp
        self.forage_period, self.dance, self.spare_hops = forage_period, dance, spare_hops
        self.memory = int(2 * half_life)  # a destination stays foraged this long after its last request
        self.max_out = 2 * scouts  # agents in flight per node, at most (bounds the dance's recruiting)
        self.warmup = warmup
        self.rng = random.Random(f"{seed}:routing")  # the bees' choices (the traffic has a stream of its own)
        self.data_rng = random.Random(f"{seed}:gt-data")  # GT data production
        self.graph = mesh_graph(k)
        self.links: list[Link] = list(self.graph.edges)
        self.neighbours = {v: sorted(self.graph.successors(v)) for v in self.graph}
        self.reserved: dict[Link, int] = dict.fromkeys(self.links, 0)
        self.queues: dict[Link, deque[_Packet]] = {e: deque() for e in self.links}
        self.ctrl: dict[Link, deque[_Packet]] = {e: deque() for e in self.links}
        self.queued: dict[Link, int] = dict.fromkeys(self.links, 0)  # BE flits waiting per link
        self.arriving: dict[int, list[_Packet]] = {}
        self.flows: list[_Flow] = []  # open flows (sending or draining)
        self.table = ForagingTable(half_life=half_life)
        self.active: dict[int, dict[int, int]] = {v: {} for v in self.graph}  # node -> destination -> last request
        self.pending: dict[Link, list[tuple[_Flow, int]]] = {}  # (src, dst) -> flows waiting for a bee back
        self.out: dict[int, int] = dict.fromkeys(self.graph, 0)  # bee agents in flight per node
        # measurements (of flows requested / packets sent after the warm-up)
        self.accepted = self.rejected = self.violations = 0
        self.setup_times: list[int] = []
        self.gt_latencies: list[int] = []
        self.be_delays: list[float] = []
        self.be_zero_load: list[float] = []
        self.be_flits = self.gt_reserved_cycles = self.control_flits = self.bee_flits = 0

    # ---- link state

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

    def reserve(self, path: list[int], width: int, sign: int = 1) -> None:
        """Reserve (``sign`` 1) or release (-1) ``width`` sub-channels along ``path``."""
        for a, b in itertools.pairwise(path):
            self.reserved[a, b] += sign * width

    def _send(self, pkt: _Packet, nxt: int) -> None:
        """Queue ``pkt`` on the link from its router to ``nxt`` (control packets ahead of BE ones)."""
        pkt.left = pkt.flits
        if pkt.kind == "be":
            self.queues[pkt.at, nxt].append(pkt)
            self.queued[pkt.at, nxt] += pkt.flits
        else:
            self.ctrl[pkt.at, nxt].append(pkt)

    # ---- GT set-up

    def central_path(self, src: int, dst: int, width: int) -> list[int] | None:
        """The path a centralised baseline (xy, widest-shortest, k-shortest) hands the header, or None (rejected at once)."""
        if self.routing == "xy":
            return xy_path(src, dst, self.k)
        if self.routing == "widest-shortest":
            path, bottleneck = widest_shortest_path(self.k, self._free, src, dst)
            return path if bottleneck >= width else None
        if self.routing == "k-shortest":
            return k_shortest_feasible(self.graph, self._free, src, dst, width, self.ksp)
        return None

    def request_gt(self, src: int, dst: int, width: int, hold: int, t: int) -> None:
        """A GT flow request at cycle ``t`` (module doc): the header leaves now, or after the scouts (bee-qos)."""
        flow = _Flow(src, dst, width, t, hold, t >= self.warmup, [src])
        if self.routing in ("xy", "widest-shortest", "k-shortest"):
            path = self.central_path(src, dst, width)
            if path is None:
                self.rejected += flow.counted
                return
            self._header(flow, t, plan=path[1:])
        elif self.routing == "adaptive":
            self._header(flow, t)
        else:
            self.active[src][dst] = t
            if self.table.best_known(src, dst, t) >= FRESH:
                self._header(flow, t)
            else:
                self.pending.setdefault((src, dst), []).append((flow, t + 4 * hops(src, dst, self.k) + 16))
                for _ in range(self.scouts):
                    self.launch_forager(src, dst, t, scout=True)

    def _header(self, flow: _Flow, t: int, plan: list[int] | None = None) -> None:
        pkt = _Packet(flow.src, flow.dst, t, flow.src, kind="header", flow=flow, plan=list(plan or []))
        self._at_router(pkt, t)

    def _header_next(self, pkt: _Packet, t: int) -> int | None:
        flow = pkt.flow
        assert flow is not None
        at, dst, w = pkt.at, flow.dst, flow.width
        if pkt.plan:
            nxt = pkt.plan.pop(0)
            return nxt if self._free(at, nxt) >= w else None
        if self.routing == "adaptive":
            options = [n for n in self._productive(at, dst) if self._free(at, n) >= w]
            return max(options, key=lambda n: (self._free(at, n), -n)) if options else None
        # bee-qos: the best table entry among the links with room, within the detour budget
        budget = hops(flow.src, dst, self.k) + self.spare_hops - (len(flow.path) - 1) - 1
        options = [n for n in self.neighbours[at] if n not in flow.path and self._free(at, n) >= w and hops(n, dst, self.k) <= budget]
        best = self.table.best(at, dst, options, t)
        if best is not None:
            return best
        fallback = [n for n in self._productive(at, dst) if n in options]
        return max(fallback, key=lambda n: (self._free(at, n), -n)) if fallback else None

    def _fail(self, flow: _Flow) -> None:
        self.reserve(flow.path, flow.width, -1)  # tear the partial circuit down
        self.rejected += flow.counted

    def _open(self, flow: _Flow, t: int) -> None:
        """The acknowledgement is back: the source sends what it produced since the request, and goes on."""
        flow.open_at, flow.end = t, t + flow.hold
        flow.buffers = [deque() for _ in range(len(flow.path) - 1)]
        for c in range(flow.requested, t):
            if self.data_rng.random() < self.gt_fill:
                flow.buffers[0].extend([c] * flow.width)
        self.flows.append(flow)

    # ---- bees

    def launch_forager(self, src: int, dst: int, t: int, *, scout: bool = False) -> None:
        """Send a forager (or a scout, which ignores the table) from ``src`` towards ``dst`` at cycle ``t``."""
        self.out[src] += 1
        self._at_router(_Packet(src, dst, t, src, kind="forager", trail=[src], scout=scout), t)

    def _forager_next(self, pkt: _Packet, t: int) -> int | None:
        at, dst = pkt.at, pkt.dst
        budget = hops(pkt.src, dst, self.k) + self.spare_hops - (len(pkt.trail) - 1) - 1
        options = [n for n in self.neighbours[at] if n not in pkt.trail and hops(n, dst, self.k) <= budget]
        if not options:
            return None
        return self.table.choose(at, dst, options, t, self.rng, self.alpha, 1.0 if pkt.scout else self.detour)

    def _returned(self, pkt: _Packet, t: int) -> None:
        """An agent is back at its own node: pending set-ups go, and a scout dances (recruits in proportion to quality)."""
        src, dst = pkt.src, pkt.dst
        self.out[src] -= 1
        for flow, _ in self.pending.pop((src, dst), []):
            self._header(flow, t)
        if not pkt.scout or t - self.active[src].get(dst, -self.memory - 1) > self.memory:
            return  # only scouts dance (a forager recruiting foragers would breed without end); and only for a wanted destination
        quality = segment_quality(pkt.free, self.sc, hops(src, dst, self.k))
        recruits = int(self.dance * quality + self.rng.random())
        for _ in range(min(recruits, self.max_out - self.out[src])):
            self.launch_forager(src, dst, t)

    def _forage(self, t: int) -> None:
        """Periodic foragers from every node to one of the destinations it requested lately; overdue set-ups go."""
        for node in range(t % self.forage_period, self.k * self.k, self.forage_period):
            wanted = self.active[node]
            for dst in [d for d, last in wanted.items() if t - last > self.memory]:
                del wanted[dst]
            if wanted and self.out[node] < self.max_out:
                self.launch_forager(node, self.rng.choice(sorted(wanted)), t)
        for key in [key for key, waiting in self.pending.items() if any(deadline <= t for _, deadline in waiting)]:
            due = [(f, d) for f, d in self.pending[key] if d <= t]
            self.pending[key] = [(f, d) for f, d in self.pending[key] if d > t]
            if not self.pending[key]:
                del self.pending[key]
            for flow, _ in due:
                self._header(flow, t)

    # ---- routers

    def _at_router(self, pkt: _Packet, t: int) -> None:
        """A packet is at router ``pkt.at`` in cycle ``t``: deliver it, act on it, or queue it on its next link."""
        at = pkt.at
        if pkt.kind == "be":
            if at == pkt.dst:
                if pkt.gen >= self.warmup:
                    self.be_delays.append(t - pkt.gen)
                    self.be_zero_load.append(hops(pkt.src, pkt.dst, self.k) * math.ceil(self.packet_flits / self.sc))
                if t >= self.warmup:
                    self.be_flits += self.packet_flits
                return
            nxt = self.be_next(at, pkt.dst)
            pkt.route.append(nxt)
            self._send(pkt, nxt)
            return
        if pkt.kind == "header":
            flow = pkt.flow
            assert flow is not None
            if at == flow.dst:  # the circuit is reserved end to end
                flow.setup_at = t
                if flow.counted:
                    self.accepted += 1
                    self.setup_times.append(t - flow.requested)
                ack = _Packet(flow.dst, flow.src, t, at, kind="ack", flow=flow, plan=flow.path[-2::-1])
                self._at_router(ack, t)
                return
            step_to = self._header_next(pkt, t)
            if step_to is None:
                self._fail(flow)
                return
            self.reserved[at, step_to] += flow.width
            flow.path.append(step_to)
            # the header crosses on the sub-channel it has just reserved (its flow's, idle until the ack is home)
            pkt.at = step_to
            self.arriving.setdefault(t + 1, []).append(pkt)
            if t >= self.warmup:
                self.control_flits += 1
            return
        if pkt.kind == "ack":
            assert pkt.flow is not None
            if at == pkt.dst:
                self._open(pkt.flow, t)
            else:
                self._send(pkt, pkt.plan.pop(0))
            return
        if pkt.kind == "forager":
            if at == pkt.dst:  # turn round and take the news home
                pkt.kind, pkt.plan = "return", pkt.trail[-2::-1]
                self._send(pkt, pkt.plan.pop(0))
                return
            step_to = self._forager_next(pkt, t)
            if step_to is None:  # boxed in: the agent is lost
                self.out[pkt.src] -= 1
                return
            pkt.free.append(self._free(at, step_to))
            pkt.trail.append(step_to)
            self._send(pkt, step_to)
            return
        # a returning forager: this router learns the quality of the rest of the path
        i = len(pkt.plan)  # this router's index on the forager's trail (the plan holds the routers before it)
        quality = segment_quality(pkt.free[i:], self.sc, hops(at, pkt.dst, self.k))
        self.table.reinforce(at, pkt.dst, pkt.trail[i + 1], quality, t)
        if at == pkt.src:
            self._returned(pkt, t)
        else:
            self._send(pkt, pkt.plan.pop(0))

    def be_next(self, at: int, dst: int) -> int:
        """Next hop of a BE packet: XY under ``xy`` routing, else the productive link with the shortest queue."""
        if self.routing == "xy":
            return xy_path(at, dst, self.k)[1]
        options = self._productive(at, dst)
        return min(options, key=lambda n: (self.queued[at, n], n))

    # ---- one cycle

    def step(self, t: int) -> None:
        """Cycle ``t``: bees, packets at routers, GT data, then every link's flits (after the cycle's requests)."""
        if self.routing == "bee-qos":
            self._forage(t)
        for pkt in self.arriving.pop(t, []):
            self._at_router(pkt, t)
        sent_gt, done = self._move_gt(t)
        for link, n in sent_gt.items():
            if n > self.reserved[link]:
                self.violations += 1  # a flow sent more than it reserved: must never happen
        for flow in done:  # released after its last flits crossed (this cycle's check counted them)
            self.reserve(flow.path, flow.width, -1)
        measured = t >= self.warmup
        for link in self.links:
            self._drain_link(link, t, measured)

    def _move_gt(self, t: int) -> tuple[dict[Link, int], list[_Flow]]:
        """GT data of cycle ``t``: sources produce, every flit moves one link; the flits sent per link and the flows done."""
        sent_gt: dict[Link, int] = {}
        still: list[_Flow] = []
        done: list[_Flow] = []
        for flow in self.flows:
            if t < flow.end and self.data_rng.random() < self.gt_fill:
                flow.buffers[0].extend([t] * flow.width)
            last = len(flow.buffers) - 1
            for i in range(last, -1, -1):  # downstream first: a flit crosses one link a cycle
                buf = flow.buffers[i]
                n = min(flow.width, len(buf))
                if not n:
                    continue
                link = (flow.path[i], flow.path[i + 1])
                sent_gt[link] = sent_gt.get(link, 0) + n
                moved = [buf.popleft() for _ in range(n)]
                if i == last:
                    if flow.counted:
                        self.gt_latencies.extend(t + 1 - c for c in moved)  # at the destination next cycle
                else:
                    flow.buffers[i + 1].extend(moved)
            (done if t >= flow.end and not any(flow.buffers) else still).append(flow)
        self.flows = still
        return sent_gt, done

    def _drain_link(self, link: Link, t: int, measured: bool) -> None:
        """One link in cycle ``t``: control flits in the control lane, then BE flits in what GT left free."""
        reserved = self.reserved[link]
        if reserved > self.sc:
            self.violations += 1  # an accepted flow lost bandwidth: must never happen
        if measured:
            self.gt_reserved_cycles += reserved
        budget = self.sc - reserved
        ctrl = self.ctrl[link]
        if ctrl and budget == 0:
            budget = 1  # the control lane: a fully reserved link still passes one control flit (module doc)
        budget = self._send_flits(ctrl, link, budget, t, measured)
        budget = min(budget, self.sc - reserved)  # what the control lane carried is not BE's
        self._send_flits(self.queues[link], link, budget, t, measured)

    def _send_flits(self, queue: deque[_Packet], link: Link, budget: int, t: int, measured: bool) -> int:
        """Send up to ``budget`` flits from the head of ``queue`` over ``link``; the budget left."""
        while queue and budget > 0:
            head = queue[0]
            sent = min(budget, head.left)
            head.left -= sent
            budget -= sent
            if head.kind == "be":
                self.queued[link] -= sent
            elif measured:
                self.control_flits += sent
                self.bee_flits += sent if head.kind in ("forager", "return") else 0
            if head.left == 0:
                queue.popleft()
                head.at = link[1]
                self.arriving.setdefault(t + 1, []).append(head)  # at the next router next cycle (module doc)
        return budget


def _percentile(values: list[int], q: float) -> float:
    return float(np.percentile(np.asarray(values, dtype=float), q)) if values else math.nan


def simulate_mesh(
    k: int = NOC.k,
    *,
    routing: str = NOC.mesh_routing,
    load: float = NOC.load,
    gt_share: float = NOC.gt_share,
    traffic: str = NOC.traffic,
    subchannels: int = NOC.subchannels,
    packet_flits: int = NOC.mesh_packet_flits,
    gt_width: int = NOC.gt_width,
    gt_hold: int = NOC.gt_hold,
    gt_fill: float = NOC.gt_fill,
    cycles: int = NOC.cycles,
    seed: int = NOC.seed,
    scouts: int = NOC.scouts,
    alpha: float = NOC.alpha,
    detour: float = NOC.detour,
    ksp: int = NOC.ksp,
    forage_period: int = NOC.forage_period,
    half_life: float = NOC.half_life,
    capacity: int | None = None,
    progress: ProgressFn | None = None,
) -> MeshResult:
    """Simulate the SDM mesh (module doc) and return its metrics.

    Traffic (arrivals, destinations, lifetimes) comes from its own random stream, so every
    routing sees the same requests for a seed; the bees' choices and GT data production
    have streams of their own.

    Args:
        capacity: flits per cycle that ``load`` 1.0 stands for (default: ``subchannels``);
            fix it to compare designs with different sub-channel counts under the same traffic.

    Raises:
        UserInputError: k outside 2..16, load outside (0, 1], gt_share outside [0, 1], an
            unknown routing or traffic pattern, or a GT width no link can carry.
    """
    _check_traffic(load=load, gt_share=gt_share, traffic=traffic, gt_width=gt_width, subchannels=subchannels)
    if packet_flits < 1 or gt_hold < 1 or cycles < 100:
        raise UserInputError("packet_flits and gt_hold must be >= 1, cycles >= 100")
    warmup = min(cycles // 10, WARMUP_MAX)
    sim = MeshSim(
        k,
        routing,
        subchannels,
        seed,
        scouts=scouts,
        alpha=alpha,
        detour=detour,
        packet_flits=packet_flits,
        gt_fill=gt_fill,
        ksp=ksp,
        forage_period=forage_period,
        half_life=half_life,
        warmup=warmup,
    )
    rng = random.Random(seed)  # the traffic
    n = k * k
    capacity = capacity or subchannels  # flits per cycle that load 1.0 stands for
    gt_rate = gt_share * load * capacity / (gt_width * gt_hold)  # flow arrivals per node per cycle
    be_rate = (1 - gt_share) * load * capacity / packet_flits  # packets per node per cycle
    requested = 0
    clock = Clock(cycles, progress)
    with clock:
        for t in clock:
            for src in range(n):
                if gt_rate and rng.random() < gt_rate:
                    dst = destination(traffic, src, n, rng, k=k)
                    if dst != src:
                        requested += t >= warmup
                        sim.request_gt(src, dst, gt_width, 1 + int(rng.expovariate(1 / gt_hold)), t)
                if be_rate and rng.random() < be_rate:
                    dst = destination(traffic, src, n, rng, k=k)
                    if dst != src:
                        sim.arriving.setdefault(t, []).append(_Packet(src, dst, t, src, flits=packet_flits))
            sim.step(t)
    ran = clock.done
    measured = max(ran - warmup, 1)
    mean, p99 = delay_stats(sim.be_delays)
    return NocResult(
        config=MeshConfig(k, routing, traffic, subchannels, gt_share, packet_flits),
        cycles=ran,
        offered_load=load,
        delivered_packets=len(sim.be_delays),
        throughput=sim.be_flits / (measured * n * capacity),  # in the unit of the offered load
        mean_delay=mean,
        p99_delay=p99,
        wall_s=clock.wall_s,
        stats=_mesh_stats(sim, requested=requested, measured=measured),
        stopped_early=clock.stopped,
    )


def _check_traffic(*, load: float, gt_share: float, traffic: str, gt_width: int, subchannels: int) -> None:
    """The offered traffic :func:`simulate_mesh` refuses (its ``Raises``)."""
    check_load(load)
    if not 0 <= gt_share <= 1:
        raise UserInputError(f"gt_share must be in [0, 1], got {gt_share}")
    if traffic not in TRAFFIC:
        raise UserInputError(f"unknown mesh traffic {traffic!r}; choose from {', '.join(TRAFFIC)}")
    if not 1 <= gt_width <= subchannels:
        raise UserInputError(f"a GT flow of {gt_width} sub-channels cannot fit links of {subchannels} sub-channels (impossible request)")


def _mean_or_nan(values: list[int]) -> float:
    return round(float(np.mean(values)), 3) if values else math.nan


def _mesh_stats(sim: MeshSim, *, requested: int, measured: int) -> MeshStats:
    """The mesh's own metrics of a finished run (``measured``: cycles after the warm-up, at least 1)."""
    k, subchannels, packet_flits = sim.k, sim.sc, sim.packet_flits
    n = k * k
    mean_hops = sum(hops(a, b, k) for a in range(n) for b in range(n) if a != b) / (n * (n - 1))
    decided = sim.accepted + sim.rejected
    lat = sim.gt_latencies
    p50, p99_gt = _percentile(lat, 50), _percentile(lat, 99)
    return MeshStats(
        gt_requests=requested,
        gt_acceptance=round(sim.accepted / decided, 5) if decided else math.nan,
        gt_violations=sim.violations,
        gt_link_utilisation=round(sim.gt_reserved_cycles / (measured * len(sim.links) * subchannels), 5),
        gt_flits=len(lat),
        gt_latency_mean=_mean_or_nan(lat),
        gt_latency_p50=p50,
        gt_latency_p99=p99_gt,
        gt_jitter=p99_gt - p50,
        gt_latency_std=round(float(np.std(lat)), 3) if lat else math.nan,
        gt_setup_mean=_mean_or_nan(sim.setup_times),
        gt_setup_p99=_percentile(sim.setup_times, 99),
        control_flits=sim.control_flits,
        bee_flits=sim.bee_flits,
        control_flits_per_node_cycle=round(sim.control_flits / (measured * n), 5),
        be_zero_load_latency_uniform=round(mean_hops * math.ceil(packet_flits / subchannels), 3),
        be_zero_load_latency_of_delivered=round(sum(sim.be_zero_load) / len(sim.be_zero_load), 3) if sim.be_zero_load else math.nan,
        xy_saturation_bound_uniform=round(4 / k, 4) if k % 2 == 0 else round(4 * k / (k * k - 1), 4),
    )
