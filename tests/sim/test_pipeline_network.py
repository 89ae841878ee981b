"""Shared NICs, data-parallel all-reduce flows, interleaved 1F1B, ZB-H1, the timeline checker and CP-SAT on V-shaped plans.

Expected values are derived by hand in the comments (closed forms from the papers cited in
sim/pipeline/simulate.py), not copied from the code's output.
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import networkx as nx
import pytest

from coevo.search.errors import UserInputError
from coevo.sim.pipeline.cluster import Cluster, get_cluster
from coevo.sim.pipeline.partition import blockwise, from_mapping, skip_aware
from coevo.sim.pipeline.profile import BlockProfile, ModelProfile, profile
from coevo.sim.pipeline.simulate import Span, _Network, check_timeline, memory_bound, order_runs, simulate, virtual_stages

FAST = Cluster("ideal", devices=16, per_node=16, device_tflops=1e-9, memory_gb=80, intra_gbs=1e12, inter_gbs=1e12, latency_us=0.0)
"""1e3 FLOP per second: a block of 1e3 FLOPs takes 1 s forward, 2 s backward; links are free."""


def _chain(blocks: int, params: tuple[int, ...] | None = None) -> ModelProfile:
    params = params or (0,) * blocks
    # each block saves 100 bytes for its backward (the stash per in-flight microbatch)
    chain = tuple(BlockProfile(f"b{i}", "other", 1000, params[i], 100, (1,), None, saved_bytes=100) for i in range(blocks))
    return ModelProfile("chain", 1, 1, 2, chain, nx.DiGraph())


def _finish(cluster: Cluster, flows: list[tuple[int, int, float]]) -> list[float]:
    """When each flow (src, dst, bytes), all started at 0, finishes on the network."""
    net = _Network(cluster)
    for i, (a, b, n) in enumerate(flows):
        net.add(0.0, a, b, n, i)
    now, ends = 0.0, [0.0] * len(flows)
    while net.flows:
        nxt = net.next_event(now)
        for tag in net.advance(now, nxt):
            ends[tag] = nxt
        now = nxt
    return ends


def test_gpus_of_a_node_share_its_nic() -> None:
    two_by_two = Cluster("n", devices=4, per_node=2, device_tflops=1.0, memory_gb=1.0, intra_gbs=10.0, inter_gbs=1.0, latency_us=0.0)
    # two GPUs of node 0 send 1 GB each to node 1 through one 1 GB/s NIC: half each, both done at 2 s
    assert _finish(two_by_two, [(0, 2, 1e9), (1, 3, 1e9)]) == pytest.approx([2.0, 2.0])
    # 0.5 GB and 1 GB: both at 0.5 GB/s until the first is done (1 s), then the second alone: 0.5 GB more at 1 GB/s
    assert _finish(two_by_two, [(0, 2, 0.5e9), (1, 3, 1e9)]) == pytest.approx([1.0, 1.5])
    # one NIC per GPU: no sharing; opposite directions of one NIC never share (full duplex)
    assert _finish(dataclasses.replace(two_by_two, nics_per_node=2), [(0, 2, 1e9), (1, 3, 1e9)]) == pytest.approx([1.0, 1.0])
    assert _finish(two_by_two, [(0, 2, 1e9), (2, 0, 1e9)]) == pytest.approx([1.0, 1.0])
    # intra-node links are their own: 1 GB at 10 GB/s beside a NIC flow
    assert _finish(two_by_two, [(0, 1, 1e9), (0, 2, 1e9)]) == pytest.approx([0.1, 1.0])
    # max-min, not equal split: node 0's NIC carries 0->2 and 1->3; 3->1 enters node 0 alone (receive side)
    assert _finish(two_by_two, [(0, 2, 1e9), (1, 3, 1e9), (3, 1, 1e9)]) == pytest.approx([2.0, 2.0, 1.0])
    with_latency = dataclasses.replace(two_by_two, latency_us=1e6)  # 1 s before bytes move
    assert _finish(with_latency, [(0, 2, 1e9)]) == pytest.approx([2.0]) == [with_latency.transfer_s(0, 2, 1e9)]


def test_pipeline_transfers_of_a_node_contend_for_its_nic() -> None:
    p = _one_gb_chain(2)
    plan = blockwise(p, 2, flops_per_s=1e3)
    c = Cluster("n", devices=4, per_node=2, device_tflops=1e-9, memory_gb=80, intra_gbs=1e3, inter_gbs=1.0, latency_us=0.0)
    # two replicas, replica r on devices 2r, 2r+1: each pipeline stays inside its node (1 GB at 1000 GB/s: 1 ms):
    # F 1 s, send, F 1 s, B 2 s, send back, B 2 s (no parameters, no all-reduce)
    assert simulate(p, plan, c, schedule="1f1b", microbatches=1, data_parallel=2).step_s == pytest.approx(6.002)
    # stages 0 and 2 on node 0 (devices 0, 1), 1 and 3 on node 1: every forward send crosses nodes; from 5 s on,
    # stage 0 (GPipe keeps forwarding) and stage 2 both send through node 0's NIC, so sharing it costs time
    # against a NIC per GPU
    four = _one_gb_chain(4)
    across = from_mapping(four, "blockwise", [0, 2, 1, 3], flops_per_s=1e3)
    shared = simulate(four, across, c, schedule="gpipe", microbatches=8)
    own = simulate(four, across, dataclasses.replace(c, nics_per_node=2), schedule="gpipe", microbatches=8)
    assert shared.makespan_s > own.makespan_s + 0.5


def _one_gb_chain(n: int) -> ModelProfile:
    blocks = tuple(BlockProfile(f"b{i}", "other", 1000, 0, 10**9, (1,), None) for i in range(n))
    return ModelProfile("chain", 1, 1, 2, blocks, nx.DiGraph())


def test_all_reduce_shares_the_nic_with_the_other_stage_ring() -> None:
    from coevo.sim.pipeline.tune import allreduce_s, hybrid_step_s

    # two 1-s stages with 2 GB and 4 GB of parameters; 2 replicas: replica r on node r (devices 2r, 2r+1), one 1 GB/s NIC
    # per node. One microbatch: stage 1 is done at 4 s (F 1-2, B 2-4), stage 0 at 6 s (B 4-6).
    p = _chain(2, (2 * 10**9, 4 * 10**9))
    c = Cluster("dp", devices=4, per_node=2, device_tflops=1e-9, memory_gb=1e3, intra_gbs=1e12, inter_gbs=1.0, latency_us=0.0)
    plan = blockwise(p, 2, flops_per_s=c.flops_per_s)
    step = simulate(p, plan, c, schedule="1f1b", microbatches=1, data_parallel=2)
    assert step.makespan_s == pytest.approx(6.0)
    # stage 1's ring (1<->3): 2 rounds of 2 GB; round 1 alone, 4-6 s. At 6 s its round 2 and stage 0's round 1
    # (1 GB, 0<->2) share each NIC direction: 0.5 GB/s each; at 8 s stage 0's round 1 is done and its round 2 (1 GB)
    # starts, still sharing with stage 1's last 1 GB: both end at 10 s.
    assert step.step_s == pytest.approx(10.0) and hybrid_step_s(c, plan, step, 2) == pytest.approx(10.0)
    assert step.allreduce_bytes == 2 * 2 * (1 + 2) * 10**9  # 2 members x 2 rounds x chunk (1 GB, 2 GB)
    # a NIC per GPU: no sharing: stage 1 4 + 4 s, stage 0 6 + 2 s: 8 s
    own = simulate(p, plan, dataclasses.replace(c, nics_per_node=2), schedule="1f1b", microbatches=1, data_parallel=2)
    assert own.step_s == pytest.approx(8.0)
    # the analytic estimate assumes both rings at once on the NIC: half each: stage 1 4 + 8 s = 12 s
    assert allreduce_s(c, 2, 2, 1, 4 * 10**9) == pytest.approx(8.0)
    single = simulate(p, plan, c, schedule="1f1b", microbatches=1)
    assert hybrid_step_s(c, plan, single, 2) == pytest.approx(12.0)
    with pytest.raises(UserInputError, match="data-parallel"):
        simulate(p, plan, c, schedule="1f1b", microbatches=1, data_parallel=3)


@pytest.mark.parametrize("stages", [2, 4, 8])
def test_zb_h1_bubble_matches_the_paper(stages: int) -> None:
    p = _chain(stages)
    plan = blockwise(p, stages, flops_per_s=1e3)
    for micro in (stages, 2 * stages):
        zb = simulate(p, plan, FAST, schedule="zb-h1", microbatches=micro)
        one = simulate(p, plan, FAST, schedule="1f1b", microbatches=micro)
        # F = B = W = 1 s (the 2-s backward split in halves): each device idles (p - 1)(F + B - W) = p - 1 seconds
        # (Qi et al. 2024, ZB-H1), against 1F1B's (p - 1)(F + B + W) = 3 (p - 1)
        assert zb.makespan_s == pytest.approx(3 * micro + (stages - 1))
        assert zb.bubble_ratio == pytest.approx((stages - 1) / (3 * micro + stages - 1))
        assert one.makespan_s == pytest.approx(3 * (micro + stages - 1))
        assert max(zb.peak_memory_bytes) == max(one.peak_memory_bytes) == stages * 100  # same peak: p microbatches on stage 0
        assert sum(1 for s in zb.timeline if s.op[0] == "W") == stages * micro
    # one microbatch: nothing to overlap: the critical path p (F + B) + W
    assert simulate(p, plan, FAST, schedule="zb-h1", microbatches=1).makespan_s == pytest.approx(2 * stages + 1)


@pytest.mark.parametrize("devices", [2, 3, 4])
def test_interleaved_1f1b_bubble_matches_megatron(devices: int) -> None:
    # 2p one-second blocks; loop placement (block j on device j mod p) gives each device 2 chunks
    p = _chain(2 * devices)
    loop = from_mapping(p, "blockwise", [j % devices for j in range(2 * devices)], flops_per_s=1e3)
    contiguous = from_mapping(p, "blockwise", [j // 2 for j in range(2 * devices)], flops_per_s=1e3)
    for micro in (devices, 2 * devices):
        inter = simulate(p, loop, FAST, schedule="interleaved", microbatches=micro)
        one = simulate(p, contiguous, FAST, schedule="1f1b", microbatches=micro)
        # Narayanan et al. 2021: the bubble shrinks by the number of chunks v = 2: (p - 1)(f + b) with a chunk's
        # f = 1 s, b = 2 s, against 1F1B's (p - 1)(F + B) with a device's F = 2 s, B = 4 s; work 6 s per microbatch
        assert inter.makespan_s == pytest.approx(6 * micro + 3 * (devices - 1))
        assert one.makespan_s == pytest.approx(6 * (micro + devices - 1))
    # one chunk per device: Megatron's order is plain 1F1B
    plan = blockwise(_chain(devices), devices, flops_per_s=1e3)
    assert simulate(_chain(devices), plan, FAST, schedule="interleaved", microbatches=5).makespan_s == pytest.approx(3 * (5 + devices - 1))


def test_interleaved_runs_on_v_shaped_plans() -> None:
    p = profile("unet-tiny", resolution=8)
    for devices in (2, 3):
        plan = skip_aware(p, devices, flops_per_s=1e12)
        for micro in (1, 4, 7):
            r = simulate(p, plan, FAST, schedule="interleaved", microbatches=micro)  # the checker ran inside
            assert len(r.timeline) == 2 * micro * r.virtual_stages


def test_checker_rejects_invalid_timelines() -> None:
    p = _chain(3)
    plan = blockwise(p, 3, flops_per_s=1e3)
    cluster = dataclasses.replace(FAST, intra_gbs=1e-7, inter_gbs=1e-7)  # 100 bytes take 1 s
    r = simulate(p, plan, cluster, schedule="1f1b", microbatches=3)
    stages = virtual_stages(p, plan, 1e3)
    check_timeline(stages, cluster, r.timeline, microbatches=3)
    spans = list(r.timeline)
    i = next(k for k, s in enumerate(spans) if s.op == ("F", 1, 0))
    early = dataclasses.replace(spans[i], start=spans[i].start - 0.5, end=spans[i].end - 0.5)  # before its input arrived
    with pytest.raises(ValueError, match="before"):
        check_timeline(stages, cluster, [*spans[:i], early, *spans[i + 1 :]], microbatches=3)
    with pytest.raises(ValueError, match="never ran"):
        check_timeline(stages, cluster, spans[:-1], microbatches=3)
    with pytest.raises(ValueError, match="twice"):
        check_timeline(stages, cluster, [*spans, spans[0]], microbatches=3)
    j = next(k for k, s in enumerate(spans) if s.op == ("F", 0, 1))
    overlap = dataclasses.replace(spans[j], start=spans[j].start - 0.5, end=spans[j].end - 0.5)  # into F(0, 0)
    with pytest.raises(ValueError, match="at once"):
        check_timeline(stages, cluster, [*spans[:j], overlap, *spans[j + 1 :]], microbatches=3)
    with pytest.raises(ValueError, match="ran on device"):
        check_timeline(stages, cluster, [*spans[:j], dataclasses.replace(spans[j], device=2), *spans[j + 1 :]], microbatches=3)
    assert isinstance(spans[0], Span)


def test_an_order_that_violates_dependencies_cannot_run() -> None:
    p = _chain(2)
    plan = blockwise(p, 2, flops_per_s=1e3)
    # device 1 wants B(1, 0) before F(1, 0): impossible
    bad = {("F", 0, 0): 0.0, ("B", 1, 0): 1.0, ("F", 1, 0): 2.0, ("B", 0, 0): 3.0}
    stages = virtual_stages(p, plan, 1e3)
    assert order_runs(stages, bad, 1) == [0, 1]  # device 0 waits on B(0, 0) too
    with pytest.raises(UserInputError, match="cannot run"):
        simulate(p, plan, FAST, schedule="ilp", microbatches=1, order=bad)
    good = {("F", 0, 0): 0.0, ("F", 1, 0): 1.0, ("B", 1, 0): 2.0, ("B", 0, 0): 3.0}
    assert order_runs(stages, good, 1) == []
    assert simulate(p, plan, FAST, schedule="ilp", microbatches=1, order=good).makespan_s == pytest.approx(6.0)


def test_node_style_cluster_files(tmp_path: Path) -> None:
    path = tmp_path / "nodes.json"
    fields = {"nodes": 2, "gpus_per_node": 4, "nics_per_node": 2, "nic_gbs": 25, "intra_gbs": 300, "device_tflops": 100, "memory_gb": 80}
    path.write_text(json.dumps(fields))
    c = get_cluster(str(path))
    assert (c.devices, c.per_node, c.nodes, c.nics_per_node, c.nic_gbs) == (8, 4, 2, 2, 25.0)
    assert c.nic(0) == c.nic(1) == (0, 0) and c.nic(2) == (0, 1) and c.nic(7) == (1, 1)
    assert c.resources(1, 6) == (("tx", 0, 0), ("rx", 1, 1)) and c.resources(1, 2) == (("link", 1, 2),)
    old = tmp_path / "old.json"
    old.write_text(json.dumps({"devices": 4, "per_node": 2, "device_tflops": 20, "memory_gb": 24, "intra_gbs": 50, "inter_gbs": 5}))
    assert get_cluster(str(old)).nics_per_node == 1  # written before NICs: one NIC per node of inter_gbs
    for bad, message in (
        ({**fields, "nics_per_node": 3}, "nics_per_node must divide"),
        ({**fields, "per_node": 4}, "give gpus_per_node or per_node"),
        ({**fields, "nodes": 0}, "nodes must be a positive integer"),
        ({**fields, "devices": 7}, "devices 7 is not nodes x gpus_per_node"),
        ({k: v for k, v in fields.items() if k != "nic_gbs"}, "missing \\['nic_gbs'\\]"),
        ({**fields, "nics": 2}, "unknown \\['nics'\\]"),
        ({**fields, "nics_per_node": 1.5}, "nics_per_node must be a positive integer"),
    ):
        path.write_text(json.dumps(bad))
        with pytest.raises(UserInputError, match=message):
            get_cluster(str(path))
    with pytest.raises(UserInputError, match="not whole nodes"):
        Cluster("odd", devices=6, per_node=4, device_tflops=1, memory_gb=1, intra_gbs=1, inter_gbs=1)


def test_cp_sat_on_a_v_shaped_plan_reports_bound_and_keeps_1f1b_memory() -> None:
    from coevo.sim.pipeline.ilp import synthesize

    p = profile("unet-small", resolution=16, microbatch=4)
    cluster = Cluster("two-nodes", 4, 2, 5.0, 32.0, 20.0, 2.0)
    plan = skip_aware(p, 2, **cluster.rates)
    syn = synthesize(p, plan, cluster, microbatches=4, time_limit_s=5)
    assert syn.status in ("optimal", "feasible") and 0 < syn.bound_s <= syn.makespan_s and 0.0 <= syn.gap < 1.0
    assert syn.status != "optimal" or syn.gap == pytest.approx(0.0, abs=1e-6)
    replay = simulate(p, plan, cluster, schedule="ilp", microbatches=4, order=syn.starts)
    bound = memory_bound(p, plan, schedule="1f1b", microbatches=4)
    assert all(peak <= cap for peak, cap in zip(replay.peak_memory_bytes, bound, strict=True))  # 1F1B's memory, as capped
    assert replay.virtual_stages == 3  # V-shape on 2 devices: 0 1 0
    assert syn.makespan_s <= simulate(p, plan, cluster, schedule="wave", microbatches=4).makespan_s * 1.01  # hinted with 1F1B
    assert set(syn.as_dict()) >= {"status", "bound_ms", "gap", "memory_cap"}


def test_simulate_tool_takes_the_new_schedules_data_parallel_and_reports_the_solver_bound() -> None:
    from coevo.tools import REGISTRY, call_tool

    tool = REGISTRY.get("pipeline.simulate")
    base = {"model": "unet-tiny", "devices": 2, "resolution": 8, "microbatches": 4, "cluster": "v100x16-ib10"}
    for schedule in ("interleaved", "zb-h1"):
        step = call_tool(tool, {**base, "schedule": schedule}).value["step"]
        assert step["schedule"] == schedule and step["microbatches"] == 4
    hybrid = call_tool(tool, {**base, "schedule": "wave", "data_parallel": 2}).value["step"]
    assert hybrid["data_parallel"] == 2 and hybrid["step_ms"] >= hybrid["makespan_ms"] and hybrid["allreduce_bytes"] > 0
    solver = call_tool(tool, {**base, "schedule": "ilp", "time_limit_s": 3}).value["solver"]
    assert solver["bound_ms"] <= solver["makespan_ms"] and solver["memory_cap"] == "1f1b" and 0 <= solver["gap"] <= 1
    split = call_tool(tool, {**base, "schedule": "ilp", "time_limit_s": 3, "ilp_split_backward": True, "ilp_memory": "1f1b-peak"}).value
    assert split["solver"]["memory_cap"] == "1f1b-peak" and split["step"]["schedule"] == "zb-h1"
    with pytest.raises(UserInputError, match="data-parallel"):
        call_tool(tool, {**base, "data_parallel": 16})


def test_cp_sat_with_split_backward_matches_or_beats_zb_h1() -> None:
    from coevo.sim.pipeline.ilp import synthesize

    p = _chain(4)
    plan = blockwise(p, 4, flops_per_s=1e3)
    zb = simulate(p, plan, FAST, schedule="zb-h1", microbatches=4)
    assert zb.makespan_s == pytest.approx(15.0)  # 3 m + (p - 1)
    syn = synthesize(p, plan, FAST, microbatches=4, time_limit_s=5, split_backward=True, memory="1f1b-peak")
    assert syn.makespan_s <= zb.makespan_s + 1e-6 and syn.bound_s <= syn.makespan_s
    # no schedule beats 3 m + (p - 1) by more than (p - 1): every device works 3 m = 12 s, and the last stage cannot start
    # before 3 s nor stage 0 finish its last W before the last B came back
    assert syn.bound_s >= 12.0
    replay = simulate(p, plan, FAST, schedule="zb-h1", microbatches=4, order=syn.starts)  # B and W replayed per device
    assert replay.makespan_s == pytest.approx(syn.makespan_s)
    assert max(replay.peak_memory_bytes) <= max(simulate(p, plan, FAST, schedule="1f1b", microbatches=4).peak_memory_bytes)
