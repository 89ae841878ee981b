"""GT routing on the SDM mesh (issue 18): set-up time and GT flit latency from the model, the bees' table, the baselines.

Expected values are derived by hand from sim/noc/mesh.py's module doc, or computed by networkx, never read off
the simulator.
"""

from __future__ import annotations

import itertools
import random

import networkx as nx
import pytest

from coevo.sim.noc.bee import ForagingTable, k_shortest_feasible, segment_quality, widest_shortest_path
from coevo.sim.noc.mesh import MeshSim, hops, mesh_graph, simulate_mesh


def run(sim: MeshSim, cycles: range) -> None:
    for t in cycles:
        sim.step(t)


@pytest.mark.parametrize(("routing", "width"), [("xy", 1), ("adaptive", 2), ("widest-shortest", 1), ("k-shortest", 3)])
def test_gt_latency_at_zero_be_load_is_three_times_hops(routing: str, width: int) -> None:
    # One flow 0 -> 15 on an empty 4x4 mesh, h = 6 hops. The header reserves and crosses one link a cycle: the
    # circuit is up at cycle h (set-up time h). The ack needs h more cycles home, so the source opens at 2h holding
    # 2h cycles of data (it produced `width` flits every cycle since the request, gt_fill = 1). It sends `width`
    # flits a cycle, as many as it produces, so that backlog never drains: every flit waits 2h cycles at the source
    # and crosses the h links in h cycles. Latency 3h for every flit; flits = width x (2h + hold) cycles of data.
    k, hold = 4, 40
    h = hops(0, 15, k)
    sim = MeshSim(k, routing, 4, seed=0, gt_fill=1.0)
    sim.request_gt(0, 15, width, hold, 0)
    run(sim, range(2 * h + hold + 3 * h))
    assert sim.setup_times == [h]
    assert sim.accepted == 1 and sim.violations == 0
    assert set(sim.gt_latencies) == {3 * h}
    assert len(sim.gt_latencies) == width * (2 * h + hold)
    assert all(v == 0 for v in sim.reserved.values())  # released once the last flit arrived
    assert sim.control_flits == 2 * h  # the header's h flit-hops and the ack's h


def test_gt_flits_that_need_not_wait_take_exactly_hops_cycles() -> None:
    # at gt_fill 0.5 the backlog drains (one flit sent a cycle, half a flit produced), after which a flit is sent in
    # the cycle it is produced: latency h exactly, the smallest any flit can have
    sim = MeshSim(4, "xy", 4, seed=3, gt_fill=0.5)
    sim.request_gt(3, 12, 1, 400, 0)
    run(sim, range(500))
    h = hops(3, 12, 4)
    assert min(sim.gt_latencies) == h and max(sim.gt_latencies) <= 3 * h
    assert sum(v == h for v in sim.gt_latencies) > 100


def test_bee_set_up_waits_for_scouts_once_then_follows_the_table() -> None:
    k = 4
    h = hops(0, 15, k)
    sim = MeshSim(k, "bee-qos", 4, seed=1, scouts=4, detour=0.0)
    sim.request_gt(0, 15, 1, 30, 0)
    run(sim, range(0, 100))
    # nothing known: scouts go out and back (2h at best) before the header's h hops
    assert len(sim.setup_times) == 1 and sim.setup_times[0] >= 3 * h
    assert sim.bee_flits >= 4 * 2 * h  # four scouts, there and back
    sim.request_gt(0, 15, 1, 30, 100)
    run(sim, range(100, 200))
    # the table is fresh now: the header leaves at once along a minimal path (quality 1 beats any detour's h / (h + 2))
    assert sim.setup_times[1] == h


def test_evaporation_halves_quality_every_half_life() -> None:
    table = ForagingTable(half_life=100, learning_rate=1.0)
    table.reinforce(0, 8, 1, 0.8, now=0)
    assert table.quality(0, 8, 1, now=0) == 0.8
    assert table.quality(0, 8, 1, now=100) == pytest.approx(0.4)
    assert table.quality(0, 8, 1, now=300) == pytest.approx(0.1)
    assert table.quality(0, 8, 3, now=300) == 0.0  # never reported
    half = ForagingTable(half_life=100, learning_rate=0.5)
    half.reinforce(0, 8, 1, 0.8, now=0)  # 0 + 0.5 (0.8 - 0) = 0.4
    half.reinforce(0, 8, 1, 0.0, now=100)  # evaporated to 0.2, then 0.2 + 0.5 (0 - 0.2) = 0.1
    assert half.quality(0, 8, 1, now=200) == pytest.approx(0.05)
    assert half.best_known(0, 8, now=200) == pytest.approx(0.05)


def test_segment_quality_is_bottleneck_share_times_detour_penalty() -> None:
    assert segment_quality([4, 4, 4], 4, 3) == 1.0
    assert segment_quality([4, 1, 3], 4, 3) == 0.25
    assert segment_quality([2, 2, 2, 2, 2], 4, 3) == pytest.approx(0.5 * 3 / 5)
    assert segment_quality([4, 0], 4, 2) == 0.0


def test_foraging_table_converges_to_the_only_free_path() -> None:
    # 3x3 mesh, S = 2, from 0 to 8 (4 hops; six minimal paths). Saturating 0->3, 1->2 and 4->5 leaves one minimal
    # path with room: 0 -> 1 -> 4 -> 7 -> 8. Foragers sent from 0 must teach every node on it that way.
    sim = MeshSim(3, "bee-qos", 2, seed=5, scouts=2)
    for link in ((0, 3), (1, 2), (4, 5)):
        sim.reserved[link] = 2
    sim.active[0][8] = 0
    for t in range(600):
        if t % 5 == 0:
            sim.launch_forager(0, 8, t)
        sim.step(t)
    now = 600
    table = sim.table
    for node, nxt in ((0, 1), (1, 4), (4, 7), (7, 8)):
        assert table.best(node, 8, sim.neighbours[node], now) == nxt
    assert table.quality(0, 8, 3, now) < 0.05 and table.quality(1, 8, 2, now) < 0.05 and table.quality(4, 8, 5, now) < 0.05
    assert table.quality(0, 8, 1, now) > 0.6 and table.quality(4, 8, 7, now) > 0.6


def brute_force_widest(k: int, free: dict[tuple[int, int], int], src: int, dst: int) -> int:
    return max(min(free[a, b] for a, b in itertools.pairwise(p)) for p in nx.all_shortest_paths(mesh_graph(k), src, dst))


def test_widest_shortest_picks_the_known_widest_path() -> None:
    # 3x3, every link 1 free except the path 0 -> 3 -> 4 -> 5 -> 8 with 3 free on each link: the only widest one
    free = dict.fromkeys(mesh_graph(3).edges, 1)
    for link in ((0, 3), (3, 4), (4, 5), (5, 8)):
        free[link] = 3
    path, width = widest_shortest_path(3, lambda a, b: free[a, b], 0, 8)
    assert path == [0, 3, 4, 5, 8] and width == 3


@pytest.mark.parametrize("seed", range(5))
def test_widest_shortest_matches_networkx_brute_force(seed: int) -> None:
    rng = random.Random(seed)
    k = 4
    free = {e: rng.randint(0, 4) for e in mesh_graph(k).edges}
    for src, dst in ((0, 15), (15, 0), (3, 12), (5, 6), (13, 2)):
        path, width = widest_shortest_path(k, lambda a, b: free[a, b], src, dst)
        assert len(path) - 1 == hops(src, dst, k) and path[0] == src and path[-1] == dst
        assert width == min(free[a, b] for a, b in itertools.pairwise(path)) == brute_force_widest(k, free, src, dst)


def test_k_shortest_takes_the_first_feasible_of_k() -> None:
    g = mesh_graph(3)
    free = dict.fromkeys(g.edges, 2)
    free[1, 2] = 0  # the one minimal path 0 -> 1 -> 2 is blocked
    assert k_shortest_feasible(g, lambda a, b: free[a, b], 0, 2, 1, k=1) is None
    path = k_shortest_feasible(g, lambda a, b: free[a, b], 0, 2, 1, k=3)
    assert path is not None and len(path) - 1 == 4 and (1, 2) not in itertools.pairwise(path)
    assert k_shortest_feasible(g, lambda a, b: free[a, b], 0, 2, 3, k=50) is None  # nothing is 3 wide


def test_baselines_and_bee_keep_gt_isolated_and_report_overhead() -> None:
    r = {rt: simulate_mesh(4, routing=rt, load=0.6, gt_share=0.5, traffic="hotspot", cycles=1500, seed=2) for rt in ("xy", "bee-qos")}
    for res in r.values():
        assert res.stats.gt_violations == 0 and res.stats.gt_flits > 1000
        assert res.stats.gt_latency_p50 >= 1 and res.stats.gt_jitter >= 0
    assert r["xy"].stats.bee_flits == 0 and r["bee-qos"].stats.bee_flits > 0
    assert r["bee-qos"].stats.control_flits > r["xy"].stats.control_flits
