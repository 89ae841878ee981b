"""SteppingNet's importance-driven assignment: importance by ablation, the most important units in the smallest subnet, budgets, reuse."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from coevo.sim.stepping import (
    Arch,
    SteppingCNN,
    StepRunner,
    TrainConfig,
    permute_units,
    plan,
    reassign,
    train,
    unit_importance,
)
from coevo.sim.stepping._assign import group_ends
from coevo.sim.stepping._plan import StepPlan

SMALL = Arch("DigitsCNN", 8, (4, 6, 6, 6), (False, True, True))


def _plan() -> StepPlan:
    return plan(SMALL, [0.5, 1.0])


def _data(n: int = 48, seed: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
    gen = torch.Generator().manual_seed(seed)
    return torch.randn(n, 1, 8, 8, generator=gen), torch.randint(0, 10, (n,), generator=gen)


def _net(seed: int = 0) -> SteppingCNN:
    torch.manual_seed(seed)
    net = SteppingCNN(_plan())
    with torch.no_grad():  # BatchNorm statistics that are not the identity, so a bookkeeping slip shows
        for i in range(3):
            bn = net.bn(i)
            assert bn.running_mean is not None and bn.running_var is not None
            bn.running_mean.uniform_(-0.5, 0.5)
            bn.running_var.uniform_(0.5, 2.0)
        net.head_bias.normal_()
    return net.eval()


def test_the_unit_whose_removal_hurts_most_ends_up_in_the_smallest_subnet() -> None:
    p = _plan()
    net = _net()
    net.set_groups(group_ends(p.cum, 0, 1))  # every unit in subnet 0, as training with assign="importance" starts
    hidden = p.cum[3][-1]
    star, helper = hidden - 1, hidden - 2  # the last two fc1 units: by index they would sit in the largest group
    with torch.no_grad():
        net.fc1.weight.zero_()
        net.fc1.bias.zero_()
        net.fc1.bias[star] = net.fc1.bias[helper] = 1.0  # both always on, every other fc1 unit always off
        net.head.weight.zero_()
        net.head.weight[0, star] = 4.0  # the label is always 0: star carries most of the margin, helper some
        net.head.weight[0, helper] = 1.0
        net.head_bias.zero_()
    x, _ = _data()
    y = torch.zeros(len(x), dtype=torch.long)
    done = reassign(net, x, y, p.cum)
    assert done.importance[3][star] > done.importance[3][helper] > 0
    assert done.importance[3][[u for u in range(hidden) if u not in (star, helper)]].abs().max() == 0
    order = done.order[3].tolist()
    assert order[:2] == [star, helper] and p.cum[3][0] >= 2  # both in subnet 0 now, the most important first
    assert net.cum == p.cum
    with torch.no_grad():
        small = net(x)[0]
    assert (small.argmax(-1) == 0).all()  # subnet 0 kept the units that carry the answer


def test_importance_equals_the_loss_rise_of_cutting_the_units_outgoing_weights() -> None:
    # an independent path: instead of zeroing a unit's output, zero every weight that reads it and run the net's own forward
    p = _plan()
    net = _net(1)
    net.set_groups(group_ends(p.cum, 1, 2))  # a state between all-in-subnet-0 and the plan
    x, y = _data(seed=1)
    imp = unit_importance(net, x, y)
    fs2 = p.arch.feature_side**2
    with torch.no_grad():
        base = [F.cross_entropy(o, y) for o in net(x)]
    for layer in range(4):
        ends = net.cum[layer]
        for unit in (0, ends[0], ends[-1] - 1):
            group = next(g for g, e in enumerate(ends) if unit < e)
            cut = _net(1)
            cut.set_groups(net.cum)
            with torch.no_grad():
                if layer < 2:
                    cut.conv(layer + 1).weight[:, unit] = 0.0
                elif layer == 2:
                    cut.fc1.weight[:, unit * fs2 : (unit + 1) * fs2] = 0.0
                else:
                    cut.head.weight[:, unit] = 0.0
                rise = F.cross_entropy(cut(x)[group], y) - base[group]
            assert float(imp[layer][unit]) == pytest.approx(float(rise), abs=1e-5)


def test_permuting_units_within_their_groups_changes_no_output_and_carries_the_optimiser_moments() -> None:
    p = _plan()
    net = _net(2)
    net.train()
    opt = torch.optim.AdamW(net.parameters(), lr=1e-3)
    x, y = _data(seed=2)
    F.cross_entropy(net(x)[-1], y).backward()
    opt.step()
    net.eval()
    with torch.no_grad():
        before = net(x)
    moment = opt.state[net.head.weight]["exp_avg"].clone()
    gen = torch.Generator().manual_seed(3)
    orders = []
    for ends in p.cum:  # a random shuffle inside each group: nobody changes group
        start, parts = 0, []
        for end in ends:
            parts.append(start + torch.randperm(end - start, generator=gen))
            start = end
        orders.append(torch.cat(parts))
    permute_units(net, orders, opt)
    with torch.no_grad():
        after = net(x)
    assert torch.allclose(before, after, atol=1e-5)
    assert torch.equal(opt.state[net.head.weight]["exp_avg"], moment[:, orders[3]])


def test_units_only_move_up_and_group_ends_never_grow() -> None:
    p = _plan()
    net = _net(3)
    net.set_groups(group_ends(p.cum, 1, 2))
    x, y = _data(seed=3)
    old = [torch.repeat_interleave(torch.arange(len(e)), torch.diff(torch.tensor((0, *e)))) for e in net.cum]
    done = reassign(net, x, y, p.cum)
    for layer, order in enumerate(done.order):
        new = torch.repeat_interleave(torch.arange(len(p.cum[layer])), torch.diff(torch.tensor((0, *p.cum[layer]))))
        assert (new >= old[layer][order]).all()  # the unit now at position i sat in a group no larger
    with pytest.raises(ValueError, match="only shrink"):
        reassign(net, x, y, group_ends(p.cum, 0, 1))


def test_an_importance_trained_net_meets_its_mac_budgets_and_steps_up_reusing_what_it_computed() -> None:
    p = plan(Arch("DigitsCNN", 8, (8, 16, 32, 32), (False, True, True)), [0.25, 0.5, 1.0])
    torch.manual_seed(0)
    net = SteppingCNN(p)
    x, y = _data(96, seed=4)
    moves = train(net, x, y, TrainConfig(epochs=2, seed=0, batch=16, assign="importance", rounds=2))
    assert len(moves) == 2 and sum(sum(m.moved) for m in moves) > 0
    assert net.cum == p.cum
    for s, f in enumerate(p.fractions):
        assert p.macs(s) <= f * p.full_macs
    runner = StepRunner(net)
    with torch.no_grad():
        ref = net(x[:8])
    seen = [runner.start(x[:8])] + [runner.step_up() for _ in range(p.steps - 1)]
    for s, got in enumerate(seen):
        assert torch.allclose(got.logits, ref[s], atol=1e-4)
        assert got.added_macs == p.macs(s) - (p.macs(s - 1) if s else 0)  # only the new group's units were computed


def test_the_runner_refuses_a_net_whose_groups_are_still_moving() -> None:
    p = _plan()
    net = _net()
    net.set_groups(group_ends(p.cum, 0, 1))
    with pytest.raises(ValueError, match="not its plan's"):
        StepRunner(net)
