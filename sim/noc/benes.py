"""A circuit-switched Benes optical NoC: path setup with an ACK, hold and teardown, cycle by cycle.

Topology: ``N = 2^n`` ports, ``m = 2n - 1`` stages of ``N / 2`` 2x2 switching elements. In the
line form used here, stage ``s`` joins lines ``x`` and ``x ^ 2^b(s)`` with bits
``b = n-1, ..., 1, 0, 1, ..., n-1``: a back-to-back pair of butterflies sharing the middle
stage, which is the Benes network (rearrangeably non-blocking; ``N / 2`` distinct paths
between any input and output). :func:`benes_graph` gives it as a networkx DiGraph. The
link after stage ``s`` on line ``x`` is ``(s, x)``; the links after the last stage are the
output ports.

Circuit switching (optical data, electronic control). The head packet of an idle source
sends a setup header into stage 0 in the cycle its attempt starts (``T``). Each switch's
electronic control takes ``setup_cycles`` (``c``) cycles to process the header: it decides
the output and reserves the link after it in the last of those cycles, so the link after
stage ``s`` is reserved in cycle ``T + (s + 1) c - 1`` and the output port in
``T + m c - 1``. Once the output port is reserved the destination returns an ACK that
crosses the ``m`` stages back at ``ack_cycles`` (``a``) cycles each; the source starts the
optical data when it arrives, ``packet_flits`` (``L``) flits at one flit a cycle (light
crosses the chip within a cycle), and the circuit is torn down with the last flit. So a
circuit holds the link after stage ``s`` from ``T + (s + 1) c - 1`` until cycle
``T + D`` (free again in that cycle), with ``D = m (c + a) + L``, and the zero-load delay
(generation to last flit) is exactly ``D`` (tested against this formula).

Blocking: if the link a header needs is held (for adaptive routing: both), the header
either waits at that switch, re-trying each cycle for at most ``hold_cycles`` cycles
(``hold``; 0: no waiting), or gives up: a NACK travels back at ``a`` cycles a stage,
releasing the partial path as it passes (the link after stage ``j`` is free ``(s - j) a``
cycles after the block at stage ``s``), and reaches the source ``(s + 1) a`` cycles after
the block; the source then retries after a random exponential backoff (1 + U{0..2^k - 1}
cycles after its k-th consecutive block, k capped at 6).

Routing of the setup header:

* ``bit``: destination-tag (bit-controlled) routing, the classic baseline: every stage sets
  its bit to the destination's bit, so each (source, destination) has one fixed path.
* ``adaptive``: in the first ``n - 1`` stages the switch picks among its free outputs by
  looking one switch ahead (electronic control knows its neighbours' link state): it prefers
  the output whose downstream switch has more free outputs, or, when the downstream stage is
  already fixed by the destination, whose downstream switch has its output towards the
  destination free; ties at random. The last ``n`` stages follow the destination bits.
* ``adaptive-local``: the same stages adaptive, but from local link state only (a free
  output, at random when both are): the adaptive router of issue 8, kept for comparison.

With ``setup_cycles=1, ack_cycles=0, hold_cycles=0`` and ``adaptive-local`` (or ``bit``)
the simulator is issue 8's (same random draws, same results).

Metrics: mean and p99 end-to-end delay (generation to last flit), throughput (delivered
flits per cycle per port), blocking rate (blocked setups / setup attempts), first-attempt
blocking (the same over a packet's first attempts only: what :func:`bit_blocking_model`
predicts), retries per delivered packet, cycles headers spent holding per delivered packet,
link utilisation. Statistics count packets generated after a warm-up of 10 % of the cycles
(at most 2,000).
"""

from __future__ import annotations

import random
from collections import deque
from collections.abc import Container, Sequence
from dataclasses import asdict, dataclass
from typing import Any, ClassVar

import networkx as nx
import numpy as np

from coevo.sim.errors import UserInputError
from coevo.sim.noc.common import WARMUP_MAX, Clock, Injector, NocResult, ProgressFn, check_load, delay_stats, derangement, destination
from coevo.sim.noc.config import MAX_CONTROL_CYCLES, MAX_HOLD_CYCLES, NOC

ROUTINGS = ("bit", "adaptive", "adaptive-local")


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


def zero_load_delay(n_ports: int, packet_flits: int, setup_cycles: int = NOC.setup_cycles, ack_cycles: int = NOC.ack_cycles) -> int:
    """Generation to last flit with no contention: ``(2 log2 N - 1)(setup + ack) + flits`` cycles (module doc)."""
    _, bits = _stages(n_ports)
    return len(bits) * (setup_cycles + ack_cycles) + packet_flits


def bit_paths(n_ports: int) -> np.ndarray:
    """Destination-tag paths: ``paths[s, d, j]`` is the line of the link after stage ``j`` from source ``s`` to ``d``."""
    _, bits = _stages(n_ports)
    src = np.arange(n_ports)[:, None]
    dst = np.arange(n_ports)[None, :]
    line = np.broadcast_to(src, (n_ports, n_ports)).copy()
    out = np.empty((n_ports, n_ports, len(bits)), dtype=np.int64)
    for j, b in enumerate(bits):
        line = (line & ~(1 << b)) | (dst & (1 << b))
        out[:, :, j] = line
    return out


def bit_blocking_model(
    n_ports: int,
    load: float,
    packet_flits: int = NOC.benes_packet_flits,
    setup_cycles: int = NOC.setup_cycles,
    ack_cycles: int = NOC.ack_cycles,
) -> float:
    """First-attempt blocking probability of ``bit`` routing under uniform Poisson traffic at low load (analytical).

    A fresh setup from ``s`` to ``d`` starting in cycle ``T`` wants the link after stage ``j``
    in cycle ``T + (j + 1) c - 1``. Another source's circuit to ``d'``, started in cycle
    ``T' = T - delta``, holds that link (if its path uses it) from ``T' + (j + 1) c - 1`` to
    ``T' + D``: it is in the way iff ``0 <= delta <= D - (j + 1) c`` (at ``delta = 0`` both
    headers arrive together and the earlier in the switch's order, the lower source, wins).
    Two destination-tag paths share a contiguous run of stages, and the window is widest
    at the first shared stage ``j1``, so that circuit blocks the setup iff it started within
    ``D - (j1 + 1) c + 1`` cycles before it. Successful circuits of a source to ``d'`` start
    at rate ``lambda / (N - 1)`` (``lambda = load / L`` packets a cycle; every packet gets
    exactly one circuit) and never overlap in time, so the chance that source ``s'`` is in
    the way is the sum over ``d'`` of rate x window; sources are taken as independent:

        P(block | s, d) = 1 - prod_{s' != s} (1 - sum_{d' != s'} lambda / (N - 1) w(s, d, s', d'))

    averaged over uniform ``(s, d)``. Per link this is the link's utilisation by others
    (rate ``lambda`` per link under uniform traffic x holding time ``D - (j + 1) c + 1``),
    counted once per circuit rather than once per shared link. Neglected, hence "low load":
    partial paths of blocked setups (they hold links for a few cycles too), retries and
    queueing shifting start times, and correlation between sources (all O(P^2)).
    """
    _, bits = _stages(n_ports)
    check_load(load)
    m = len(bits)
    lam = load / packet_flits
    d_hold = m * (setup_cycles + ack_cycles) + packet_flits
    paths = bit_paths(n_ports)
    pairs = [(s, d) for s in range(n_ports) for d in range(n_ports) if d != s]
    others = np.array(pairs)
    other_paths = paths[others[:, 0], others[:, 1]]  # (pairs, m)
    probs = []
    for s, d in pairs:
        shared = other_paths == paths[s, d][None, :]
        any_shared = shared.any(axis=1) & (others[:, 0] != s)
        first = np.argmax(shared, axis=1)
        window = d_hold - (first + 1) * setup_cycles + (others[:, 0] < s)  # the tie at delta = 0 goes to the lower source
        per_pair = np.where(any_shared, lam / (n_ports - 1) * window, 0.0)
        per_source = np.bincount(others[:, 0], weights=per_pair, minlength=n_ports)
        probs.append(1.0 - float(np.prod(1.0 - np.minimum(per_source, 1.0))))
    return float(np.mean(probs))


def mean_link_utilisation_model(
    n_ports: int,
    load: float,
    packet_flits: int = NOC.benes_packet_flits,
    setup_cycles: int = NOC.setup_cycles,
    ack_cycles: int = NOC.ack_cycles,
) -> float:
    """Mean share of time a link (all stages and output ports) is reserved, uniform traffic at low load (analytical).

    Under uniform traffic every link of every stage is on the path of circuits arriving at
    ``lambda = load / L`` a cycle (for destination-tag routing exactly; by symmetry for the
    adaptive ones too), and a circuit holds the link after stage ``j`` for
    ``D - (j + 1) c + 1`` cycles (module doc): Little's law gives the utilisation, averaged
    over the ``m`` stages. Blocked setups' partial paths are neglected (low load).
    """
    _, bits = _stages(n_ports)
    m = len(bits)
    d_hold = zero_load_delay(n_ports, packet_flits, setup_cycles, ack_cycles)
    return load / packet_flits * sum(d_hold - (j + 1) * setup_cycles + 1 for j in range(m)) / m


def choose_output(
    bits: Sequence[int], stage: int, line: int, dst: int, busy: Container[tuple[int, int]], routing: str, rng: random.Random
) -> int | None:
    """The line a setup header at ``stage`` (entering on ``line``, bound for ``dst``) leaves on, or None: blocked.

    ``bits`` are the stages' bits (module doc), ``busy`` the links ``(stage, line)`` held now. ``bit`` takes the line
    with this stage's bit set to the destination's; the adaptive routings, in the first ``n - 1`` stages, may take
    either output: ``adaptive-local`` a free one at random, ``adaptive`` the free one whose downstream switch has more
    free outputs (or, when the next stage is fixed by the destination, whose output towards it is free), ties at
    random. Draws from ``rng`` exactly as issue 8's simulator did (one shuffle per adaptive decision).
    """
    n = (len(bits) + 1) // 2
    b = bits[stage]
    want = (line & ~(1 << b)) | (dst & (1 << b))
    options = [want]
    if routing != "bit" and stage < n - 1:
        options = [want, want ^ (1 << b)]
        rng.shuffle(options)
        if routing == "adaptive":
            options = [x for x in options if (stage, x) not in busy]
            if len(options) == 2:  # both free: prefer the emptier switch downstream
                nxt, b2 = stage + 1, bits[stage + 1]
                if nxt < n - 1:
                    score = [((nxt, x) not in busy) + ((nxt, x ^ (1 << b2)) not in busy) for x in options]
                else:  # the next stage is fixed by the destination: is that output free?
                    score = [int((nxt, (x & ~(1 << b2)) | (dst & (1 << b2))) not in busy) for x in options]
                if score[1] > score[0]:
                    options.reverse()
    return next((x for x in options if (stage, x) not in busy), None)


@dataclass(frozen=True)
class BenesConfig:
    """What a Benes simulation was asked for."""

    n: int
    """Ports."""
    routing: str
    traffic: str
    injection: str
    packet_flits: int
    setup_cycles: int = NOC.setup_cycles
    """Cycles a switch's electronic control takes to process a setup header."""
    ack_cycles: int = NOC.ack_cycles
    """Cycles the ACK (or a NACK) takes to cross one stage back towards the source."""
    hold_cycles: int = NOC.hold_cycles
    """Cycles a blocked header may wait at a switch before it gives up (0: tear down at once)."""
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
        zero_load_delay: ``stages (setup_cycles + ack_cycles) + packet_flits`` cycles (module doc).
        queued_at_end: packets still waiting at their sources when the run ended.
        first_attempt_blocking: blocked first attempts / first attempts (packets generated after the warm-up).
        hold_per_packet: cycles setup headers spent waiting at switches, per delivered packet.
        link_utilisation: share of link-cycles (every stage, output ports included) reserved, after the warm-up.
    """

    stages: int
    blocking_rate: float
    retries_per_packet: float
    zero_load_delay: int
    queued_at_end: int
    first_attempt_blocking: float = 0.0
    hold_per_packet: float = 0.0
    link_utilisation: float = 0.0

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
    due: int
    """Cycle of the decision at the current stage."""
    first: bool
    """A packet's first attempt (counted by first-attempt blocking)."""
    waited: int = 0
    """Cycles spent holding at the current stage."""


def simulate_benes(
    n_ports: int = NOC.n_ports,
    *,
    routing: str = NOC.routing,
    load: float = NOC.load,
    packet_flits: int = NOC.benes_packet_flits,
    traffic: str = NOC.traffic,
    injection: str = NOC.injection,
    setup_cycles: int = NOC.setup_cycles,
    ack_cycles: int = NOC.ack_cycles,
    hold_cycles: int = NOC.hold_cycles,
    cycles: int = NOC.benes_cycles,
    seed: int = NOC.seed,
    trace: Sequence[tuple[int, int, int]] | None = None,
    progress: ProgressFn | None = None,
) -> BenesResult:
    """Simulate the Benes NoC (module doc) and return its metrics.

    Args:
        load: offered load, flits per cycle per input port (0 < load <= 1).
        traffic: ``uniform`` or ``permutation``.
        injection: ``poisson`` or ``bursty``.
        setup_cycles: cycles per stage to process a setup header (1..16).
        ack_cycles: cycles per stage for the ACK / NACK back to the source (0..16).
        hold_cycles: cycles a blocked header may wait at a switch (0: tear down at once).
        trace: instead of random traffic, these packets only: ``(cycle, source, destination)``
            (``load``, ``traffic`` and ``injection`` are then ignored; for hand-checked cases).

    Raises:
        UserInputError: a size that is not a power of two in 8..64, load outside (0, 1],
            an unknown routing, traffic or injection process, control latencies out of range,
            a trace packet outside the network.
    """
    _, bits = _stages(n_ports)
    check_load(load)
    config = BenesConfig(n_ports, routing, traffic, injection, packet_flits, setup_cycles, ack_cycles, hold_cycles)
    _check_config(config, cycles)
    arrivals_at = _trace_arrivals(trace, n_ports)
    run = _BenesRun(config, bits, load=load, seed=seed, warmup=min(cycles // 10, WARMUP_MAX), traced=trace is not None)
    clock = Clock(cycles, progress)
    with clock:
        for t in clock:
            run.release(t)
            run.inject(t, arrivals_at.pop(t, ()))
            run.decide(t)
            run.count_links(t)
    return run.result(clock, load)


def _check_config(config: BenesConfig, cycles: int) -> None:
    """What :func:`simulate_benes` refuses, beyond the size and the load (its ``Raises``)."""
    if config.routing not in ROUTINGS:
        raise UserInputError(f"unknown Benes routing {config.routing!r}; choose from {', '.join(ROUTINGS)}")
    if config.traffic not in ("uniform", "permutation"):
        raise UserInputError(f"Benes traffic is uniform or permutation, got {config.traffic!r}")
    if config.packet_flits < 1 or cycles < 100:
        raise UserInputError("packet_flits must be >= 1 and cycles >= 100")
    if not 1 <= config.setup_cycles <= MAX_CONTROL_CYCLES or not 0 <= config.ack_cycles <= MAX_CONTROL_CYCLES:
        raise UserInputError(
            f"setup_cycles must be 1..{MAX_CONTROL_CYCLES} and ack_cycles 0..{MAX_CONTROL_CYCLES} (cycles per switch stage), "
            f"got {config.setup_cycles} and {config.ack_cycles}"
        )
    if not 0 <= config.hold_cycles <= MAX_HOLD_CYCLES:
        raise UserInputError(f"hold_cycles must be 0..{MAX_HOLD_CYCLES} (0: tear down a blocked setup at once), got {config.hold_cycles}")


def _trace_arrivals(trace: Sequence[tuple[int, int, int]] | None, n_ports: int) -> dict[int, list[tuple[int, int]]]:
    """A trace's packets by cycle: ``cycle -> [(source, destination), ...]``, each checked."""
    arrivals_at: dict[int, list[tuple[int, int]]] = {}
    for when, src, dst in trace or ():
        if not (0 <= src < n_ports and 0 <= dst < n_ports and src != dst and when >= 0):
            raise UserInputError(f"trace packet {(when, src, dst)} needs a cycle >= 0 and two different ports in 0..{n_ports - 1}")
        arrivals_at.setdefault(when, []).append((src, dst))
    return arrivals_at


class _BenesRun:
    """The state of one Benes run and the phases of its cycle (module doc), called in this order each cycle:

    :meth:`release` (links and sources whose teardown or NACK is due), :meth:`inject` (new
    packets; idle sources start a setup), :meth:`decide` (every due header advances one
    stage, holds, or is blocked), :meth:`count_links` (link utilisation after the cycle's
    reservations). One random stream drives destinations, routing choices and backoffs,
    drawn in exactly this order.
    """

    def __init__(self, config: BenesConfig, bits: Sequence[int], *, load: float, seed: int, warmup: int, traced: bool) -> None:
        n_ports = config.n
        self.config, self.bits, self.warmup, self.traced = config, bits, warmup, traced
        self.n_stages = len(bits)
        self.rng = random.Random(seed)
        self.perm = derangement(n_ports, self.rng) if config.traffic == "permutation" else None
        self.injectors = [Injector(config.injection, load / config.packet_flits, random.Random(f"{seed}:{i}")) for i in range(n_ports)]
        self.link_owner: dict[tuple[int, int], int] = {}  # (stage, line) -> source holding it; stage n_stages-1 is the output port
        self.queues: list[deque[tuple[int, int]]] = [deque() for _ in range(n_ports)]
        self.busy = [False] * n_ports  # a source with a setup, circuit or NACK in progress
        self.fresh = [True] * n_ports  # the head packet has not tried yet
        self.backoff_until = [0] * n_ports
        self.retries_of = [0] * n_ports
        self.setups: list[_Setup] = []
        self.frees: dict[int, list[tuple[int, int]]] = {}  # cycle -> links released then
        self.ends: dict[int, list[tuple[int, int]]] = {}  # cycle -> (source, generation of its delivered packet, or -1 after a NACK)
        self.delays: list[float] = []
        self.delivered_flits = self.delivered = self.attempts = self.blocked = self.retries = 0
        self.firsts = self.first_blocked = self.held = self.link_cycles = 0

    def release(self, t: int) -> None:
        """Links freed in cycle ``t``; sources whose circuit ended (a delivery) or whose NACK came home."""
        for link in self.frees.pop(t, ()):
            del self.link_owner[link]
        for src, gen in self.ends.pop(t, ()):
            self.busy[src] = False
            if gen < 0:
                continue
            if t > self.warmup:
                self.delivered_flits += self.config.packet_flits
            if gen >= self.warmup:
                self.delays.append(t - gen)
                self.delivered += 1

    def inject(self, t: int, new: Sequence[tuple[int, int]]) -> None:
        """New packets join their sources' queues (``new`` from a trace); idle sources past their backoff start a setup."""
        n_ports = self.config.n
        for i in range(n_ports):
            if not self.traced and self.injectors[i].arrivals():
                self.queues[i].append((t, destination(self.config.traffic, i, n_ports, self.rng, perm=self.perm)))
            for src, dst in new:
                if src == i:
                    self.queues[i].append((t, dst))
            if not self.busy[i] and self.queues[i] and t >= self.backoff_until[i]:
                gen, dst = self.queues[i][0]
                self.busy[i] = True
                self.attempts += 1
                if self.fresh[i] and gen >= self.warmup:
                    self.firsts += 1
                self.setups.append(_Setup(i, dst, gen, 0, i, [], t + self.config.setup_cycles - 1, self.fresh[i]))
                self.fresh[i] = False

    def decide(self, t: int) -> None:
        """Every header whose switch decides in cycle ``t`` takes a link, holds, or is blocked."""
        still: list[_Setup] = []
        for st in self.setups:
            if st.due > t:  # the switch's control is still processing the header
                still.append(st)
                continue
            choice = choose_output(self.bits, st.stage, st.line, st.dst, self.link_owner, self.config.routing, self.rng)
            if choice is None and st.waited < self.config.hold_cycles:  # hold: try again next cycle
                st.waited += 1
                self.held += 1
                st.due = t + 1
                still.append(st)
            elif choice is None:
                self._block(st, t)
            elif not self._advance(st, choice, t):
                still.append(st)
        self.setups = still

    def _block(self, st: _Setup, t: int) -> None:
        """Blocked: a NACK tears the partial path down on its way back; the source backs off."""
        ack_cycles = self.config.ack_cycles
        for j, link in enumerate(st.links):
            if ack_cycles == 0:
                del self.link_owner[link]
            else:
                self.frees.setdefault(t + (st.stage - j) * ack_cycles, []).append(link)
        self.blocked += 1
        if st.first and st.gen >= self.warmup:
            self.first_blocked += 1
        self.retries_of[st.src] += 1
        self.retries += 1
        told = t + (st.stage + 1) * ack_cycles
        self.backoff_until[st.src] = told + 1 + self.rng.randrange(1 << min(self.retries_of[st.src], 6))
        if ack_cycles == 0:
            self.busy[st.src] = False
        else:
            self.ends.setdefault(told, []).append((st.src, -1))

    def _advance(self, st: _Setup, choice: int, t: int) -> bool:
        """The header reserves the link on line ``choice`` after its stage; True when that was the output port."""
        self.link_owner[st.stage, choice] = st.src
        st.links.append((st.stage, choice))
        st.line = choice
        st.stage += 1
        st.waited = 0
        st.due = t + self.config.setup_cycles
        if st.stage < self.n_stages:
            return False
        # output port reserved: ACK back, then the data, then teardown
        self.queues[st.src].popleft()
        self.fresh[st.src] = True
        self.retries_of[st.src] = 0
        done = t + 1 + self.n_stages * self.config.ack_cycles + self.config.packet_flits
        self.frees.setdefault(done, []).extend(st.links)
        self.ends.setdefault(done, []).append((st.src, st.gen))
        return True

    def count_links(self, t: int) -> None:
        """Link-cycles reserved, after the warm-up."""
        if t > self.warmup:  # after this cycle's reservations: a link reserved in cycle r and freed in f is held f - r cycles
            self.link_cycles += len(self.link_owner)

    def result(self, clock: Clock, load: float) -> BenesResult:
        """The run's metrics (module doc) once ``clock`` has stopped."""
        c, n_ports, n_stages = self.config, self.config.n, self.n_stages
        ran = clock.done
        mean, p99 = delay_stats(self.delays)
        measured = max(ran - self.warmup - 1, 1)
        return NocResult(
            config=c,
            cycles=ran,
            offered_load=load,
            delivered_packets=self.delivered,
            throughput=self.delivered_flits / (measured * n_ports),
            mean_delay=mean,
            p99_delay=p99,
            wall_s=clock.wall_s,
            stats=BenesStats(
                stages=n_stages,
                blocking_rate=round(self.blocked / self.attempts, 5) if self.attempts else 0.0,
                retries_per_packet=round(self.retries / max(self.delivered, 1), 4),
                zero_load_delay=n_stages * (c.setup_cycles + c.ack_cycles) + c.packet_flits,
                queued_at_end=sum(len(q) for q in self.queues),
                first_attempt_blocking=round(self.first_blocked / self.firsts, 5) if self.firsts else 0.0,
                hold_per_packet=round(self.held / max(self.delivered, 1), 4),
                link_utilisation=round(self.link_cycles / (measured * n_ports * n_stages), 5),
            ),
            stopped_early=clock.stopped,
        )
