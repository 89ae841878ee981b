"""A circuit-switched Benes optical NoC: path setup, hold and teardown, cycle by cycle.

Topology: ``N = 2^n`` ports, ``2n - 1`` stages of ``N / 2`` 2x2 switching elements. In the
line form used here, stage ``s`` joins lines ``x`` and ``x ^ 2^b(s)`` with bits
``b = n-1, ..., 1, 0, 1, ..., n-1``: a back-to-back pair of butterflies sharing the middle
stage, which is the Benes network (rearrangeably non-blocking; ``N / 2`` distinct paths
between any input and output). :func:`benes_graph` gives it as a networkx DiGraph.

Circuit switching (optical data, electronic control): the head packet of a source sends a
setup header that reserves one inter-stage link per cycle; if the link it needs is held
(or the output port is), the setup is blocked: its partial path is torn down and the source
retries after a random exponential backoff. Once the output port is reserved, the packet's
``packet_flits`` flits stream at one flit per cycle; then the circuit is torn down. The
header reserves the first link in the cycle the packet is generated, so the zero-load
delay is ``(2n - 1) + packet_flits`` cycles (tested).

Routing of the setup header:

* ``bit``: destination-tag (bit-controlled) routing, the classic baseline: every stage sets
  its bit to the destination's bit, so each (source, destination) has one fixed path.
* ``adaptive``: the distributed adaptive algorithm: in the first ``n - 1`` stages the
  switch picks either output from its local link state (a free one; at random when both
  are free), using the Benes network's path diversity; the last ``n`` stages are fixed by
  the destination bits.

Metrics: mean and p99 end-to-end delay (generation to last flit), throughput (delivered
flits per cycle per port), blocking rate (blocked setups / setup attempts), retries per
delivered packet. Statistics count packets generated after a warm-up of 10 % of the cycles
(at most 2,000).
"""

from __future__ import annotations

import random
from collections import deque
from dataclasses import asdict, dataclass
from typing import Any, ClassVar

import networkx as nx

from sim.errors import UserInputError
from sim.noc.common import WARMUP_MAX, Clock, Injector, NocResult, ProgressFn, check_load, delay_stats, derangement, destination

ROUTINGS = ("bit", "adaptive")


def _stages(n_ports: int) -> tuple[int, list[int]]:
    if n_ports < 8 or n_ports > 64 or n_ports & (n_ports - 1):
        raise UserInputError(f"a Benes network here has N = 8, 16, 32 or 64 ports (a power of two), got {n_ports}")
    n = n_ports.bit_length() - 1
    bits = [n - 1 - s for s in range(n)] + [s - n + 1 for s in range(n, 2 * n - 1)]
    return n, bits


def benes_graph(n_ports: int) -> nx.DiGraph:
    """The network as a DiGraph: ``("in", i)``, switches ``(stage, j)`` and ``("out", i)``, one edge per link."""
    _, bits = _stages(n_ports)
    g = nx.DiGraph()

    def switch(stage: int, line: int) -> tuple[int, int]:
        b = bits[stage]
        low = line & ~(1 << b)  # the pair's line with bit b clear, compressed to a switch index
        return (stage, ((low >> (b + 1)) << b) | (low & ((1 << b) - 1)))

    for x in range(n_ports):
        g.add_edge(("in", x), switch(0, x))
        g.add_edge(switch(len(bits) - 1, x), ("out", x))
        for s in range(len(bits) - 1):
            g.add_edge(switch(s, x), switch(s + 1, x))  # the link after stage s on line x
    return g


@dataclass(frozen=True)
class BenesConfig:
    """What a Benes simulation was asked for."""

    n: int
    """Ports."""
    routing: str
    traffic: str
    injection: str
    packet_flits: int
    topology: ClassVar[str] = "benes"

    def as_dict(self) -> dict[str, Any]:
        """JSON-friendly form, ``topology`` first."""
        return {"topology": self.topology, **asdict(self)}


@dataclass(frozen=True)
class BenesStats:
    """What the Benes simulator measures beyond the common metrics.

    Attributes:
        stages: switch stages, ``2 log2(N) - 1``.
        blocking_rate: blocked setups / setup attempts.
        retries_per_packet: blocked setups per delivered packet.
        zero_load_delay: ``stages + packet_flits`` cycles (module doc).
        queued_at_end: packets still waiting at their sources when the run ended.
    """

    stages: int
    blocking_rate: float
    retries_per_packet: float
    zero_load_delay: int
    queued_at_end: int

    @property
    def zero_load(self) -> float:
        """The zero-load delay saturation is judged against."""
        return float(self.zero_load_delay)

    def as_dict(self) -> dict[str, Any]:
        """JSON-friendly form."""
        return asdict(self)


BenesResult = NocResult[BenesConfig, BenesStats]


@dataclass
class _Setup:
    src: int
    dst: int
    gen: int
    stage: int
    line: int
    links: list[tuple[int, int]]


def simulate_benes(
    n_ports: int = 16,
    *,
    routing: str = "adaptive",
    load: float = 0.3,
    packet_flits: int = 16,
    traffic: str = "uniform",
    injection: str = "poisson",
    cycles: int = 20_000,
    seed: int = 0,
    progress: ProgressFn | None = None,
) -> BenesResult:
    """Simulate the Benes NoC (module doc) and return its metrics.

    Args:
        load: offered load, flits per cycle per input port (0 < load <= 1).
        traffic: ``uniform`` or ``permutation``.
        injection: ``poisson`` or ``bursty``.

    Raises:
        UserInputError: a size that is not a power of two in 8..64, load outside (0, 1],
            an unknown routing, traffic or injection process.
    """
    n, bits = _stages(n_ports)
    check_load(load)
    if routing not in ROUTINGS:
        raise UserInputError(f"unknown Benes routing {routing!r}; choose from {', '.join(ROUTINGS)}")
    if traffic not in ("uniform", "permutation"):
        raise UserInputError(f"Benes traffic is uniform or permutation, got {traffic!r}")
    if packet_flits < 1 or cycles < 100:
        raise UserInputError("packet_flits must be >= 1 and cycles >= 100")
    rng = random.Random(seed)
    perm = derangement(n_ports, rng) if traffic == "permutation" else None
    injectors = [Injector(injection, load / packet_flits, random.Random(f"{seed}:{i}")) for i in range(n_ports)]
    n_stages = len(bits)
    link_owner: dict[tuple[int, int], int] = {}  # (stage, line) -> source holding it; stage n_stages-1 is the output port
    queues: list[deque[tuple[int, int]]] = [deque() for _ in range(n_ports)]
    busy = [False] * n_ports  # a source with a setup or circuit in progress
    backoff_until = [0] * n_ports
    retries_of = [0] * n_ports
    setups: list[_Setup] = []
    releases: dict[int, list[tuple[int, list[tuple[int, int]], int]]] = {}  # cycle -> (src, links, gen)
    warmup = min(cycles // 10, WARMUP_MAX)
    delays: list[float] = []
    delivered_flits = delivered = attempts = blocked = retries = 0
    clock = Clock(cycles, progress)
    with clock:
        for t in clock:
            for src, links, gen in releases.pop(t, []):
                for link in links:
                    del link_owner[link]
                busy[src] = False
                if t > warmup:
                    delivered_flits += packet_flits
                if gen >= warmup:
                    delays.append(t - gen)
                    delivered += 1
            for i in range(n_ports):
                if injectors[i].arrivals():
                    queues[i].append((t, destination(traffic, i, n_ports, rng, perm=perm)))
                if not busy[i] and queues[i] and t >= backoff_until[i]:
                    gen, dst = queues[i][0]
                    busy[i] = True
                    attempts += 1
                    setups.append(_Setup(i, dst, gen, 0, i, []))
            still: list[_Setup] = []
            for st in setups:  # each header advances one stage per cycle
                b = bits[st.stage]
                want = (st.line & ~(1 << b)) | (st.dst & (1 << b))
                options = [want]
                if routing == "adaptive" and st.stage < n - 1:
                    other = st.line ^ (1 << b) if want == st.line else st.line
                    options = [want, other]
                    rng.shuffle(options)
                choice = next((x for x in options if (st.stage, x) not in link_owner), None)
                if choice is None:  # blocked: tear down the partial path, back off, retry later
                    for link in st.links:
                        del link_owner[link]
                    blocked += 1
                    retries_of[st.src] += 1
                    retries += 1
                    backoff_until[st.src] = t + 1 + rng.randrange(1 << min(retries_of[st.src], 6))
                    busy[st.src] = False
                    continue
                link_owner[st.stage, choice] = st.src
                st.links.append((st.stage, choice))
                st.line = choice
                st.stage += 1
                if st.stage == n_stages:  # output port reserved: the circuit is up; data streams
                    queues[st.src].popleft()
                    retries_of[st.src] = 0
                    releases.setdefault(t + packet_flits + 1, []).append((st.src, st.links, st.gen))
                else:
                    still.append(st)
            setups = still
    ran = clock.done
    mean, p99 = delay_stats(delays)
    measured = max(ran - warmup - 1, 1)
    return NocResult(
        config=BenesConfig(n_ports, routing, traffic, injection, packet_flits),
        cycles=ran,
        offered_load=load,
        delivered_packets=delivered,
        throughput=delivered_flits / (measured * n_ports),
        mean_delay=mean,
        p99_delay=p99,
        wall_s=clock.wall_s,
        stats=BenesStats(
            stages=n_stages,
            blocking_rate=round(blocked / attempts, 5) if attempts else 0.0,
            retries_per_packet=round(retries / max(delivered, 1), 4),
            zero_load_delay=n_stages + packet_flits,
            queued_at_end=sum(len(q) for q in queues),
        ),
        stopped_early=clock.stopped,
    )
