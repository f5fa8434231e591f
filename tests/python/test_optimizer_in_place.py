"""A compiled optimizer step writes parameters and optimizer states in place: AOTAutograd keeps
the step's input mutations in the graph (copy_ into the inputs), ferrite's kernels store the new
values straight into the inputs' memory, and nothing copies them back outside ferrite."""

from __future__ import annotations

import copy
import functools

import numpy as np
import pytest
import torch

from conftest import DEVICES, assert_close

from ferrite import _core
from ferrite.pytorch.backend import ferrite_backend

nn = torch.nn


def _compile(fn, reports, device="cpu"):
    backend = functools.partial(ferrite_backend, options={"device": device, "fallback": "raise"},
                                _report=reports)
    return torch.compile(fn, backend=backend)


def _state_tensors(opt):
    return [t for s in opt.state.values() for t in s.values() if isinstance(t, torch.Tensor)]


def _copies_outside_ferrite(fn) -> int:
    """aten::copy_ calls (top-level) while fn runs: AOTAutograd's epilogue copies of mutated
    inputs, or eager copy_ nodes, are ATen calls; ferrite's own writes are not."""
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]) as prof:
        fn()
    return sum(1 for e in prof.events() if e.name == "aten::copy_" and
               (e.cpu_parent is None or e.cpu_parent.name != "aten::copy_"))


OPTIMIZERS = {
    "adam": lambda p, fe: torch.optim.Adam(p, lr=1e-2, foreach=fe),
    "adamw": lambda p, fe: torch.optim.AdamW(p, lr=1e-2, weight_decay=0.1, foreach=fe),
    "sgd-momentum": lambda p, fe: torch.optim.SGD(p, lr=1e-2, momentum=0.9, foreach=fe),
}


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("foreach", [False, True], ids=["per-tensor", "foreach"])
@pytest.mark.parametrize("name", sorted(OPTIMIZERS))
def test_optimizer_step_updates_in_place_like_eager(name, foreach, device):
    # cpu: the Session reads the tensors in place; cuda: the run hands each new value its
    # input's memory (Session.run_device), which the update kernel writes.
    torch.manual_seed(0)
    m = nn.Sequential(nn.Linear(8, 6), nn.ReLU(), nn.Linear(6, 5), nn.ReLU(),
                      nn.Linear(5, 3)).to(device)
    eager = copy.deepcopy(m)
    opt, opt_eager = OPTIMIZERS[name](m.parameters(), foreach), \
        OPTIMIZERS[name](eager.parameters(), foreach)
    reports = []
    step = _compile(opt.step, reports, device)
    x = torch.randn(4, 8, device=device)
    params = list(m.parameters())
    ptrs = [p.data_ptr() for p in params]
    copies = []
    for i in range(6):
        for mod in (m, eager):
            mod.zero_grad(set_to_none=True)
            mod(x).square().sum().backward()
        if i < 2:  # the first steps create the states (SGD's first has no momentum to read)
            step()
            state_ptrs = [t.data_ptr() for t in _state_tensors(opt)]
        else:
            copies.append(_copies_outside_ferrite(step))
        opt_eager.step()
        for p, q in zip(m.parameters(), eager.parameters()):
            assert_close(p, q)
    for s, e in zip(_state_tensors(opt), _state_tensors(opt_eager)):
        # A compiled step keeps Adam's step counts on the parameters' device (dynamo makes it
        # capturable); eager keeps them on the cpu.
        assert_close(s.cpu(), e.cpu())
    # The step ran in ferrite: every op of the graph in a partition that was built once.
    reps = [r for _, r in reports if r is not None]
    assert reps and all(r.kind == "inference" for r in reps)
    last = reps[-1]  # the graph of the steady state (after the states exist)
    assert not last.errors and not last.eager_ops, (last.errors, last.eager_ops)
    assert last.eager_input_copies == 0
    parts = [p["partition"] for p in last.partitions]
    assert parts and all(cp.builds == 1 and not cp._eager for cp in parts)
    # In place: the same storage, no copy_ outside ferrite, and every write done by ferrite's
    # kernels (none copied by the Session or here).
    assert [p.data_ptr() for p in params] == ptrs
    assert [t.data_ptr() for t in _state_tensors(opt)] == state_ptrs
    assert copies == [0] * len(copies), copies
    written = sum(len(cp.writes) for cp in parts)
    assert written >= 2 * len(params)  # each parameter and at least one state per parameter
    assert sum(cp.python_copies for cp in parts) == 0
    stats = [cp.write_stats() for cp in parts]
    assert sum(s["outputs_in_place"] for s in stats) == written, stats
    assert sum(s["outputs_copied_into_inputs"] for s in stats) == 0, stats


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("name", sorted(OPTIMIZERS))
def test_step_over_uneven_shapes_runs_as_a_few_multi_tensor_kernels(name, device, tmp_path):
    # Ten parameters of ten shapes (no two alike: horizontal fusion cannot share kernels) with
    # sizes from 1 element to several of cuda's 4096-element work units, odd row lengths (no
    # vector lanes) and even ones: the step runs as multi-tensor kernels, a few per level of the
    # update graph, not a few per parameter, and matches eager.
    shapes = [(1,), (3,), (7, 5), (33, 17), (64,), (4097,), (128, 40), (3, 5, 7), (96, 3, 3, 3),
              (300, 70)]
    torch.manual_seed(0)
    params = [nn.Parameter(torch.randn(s, device=device)) for s in shapes]
    eager = [nn.Parameter(p.detach().clone()) for p in params]
    opt, opt_eager = OPTIMIZERS[name](params, True), OPTIMIZERS[name](eager, True)
    options = {"device": device, "fallback": "raise", "dump_dir": str(tmp_path)}
    step = torch.compile(opt.step, backend=functools.partial(ferrite_backend, options=options))
    for i in range(4):
        for ps in (params, eager):
            for j, p in enumerate(ps):
                p.grad = torch.full_like(p, 0.1 * (j + 1)) * torch.sin(p.detach() * (i + 1))
        step()
        opt_eager.step()
        for p, q in zip(params, eager):
            assert_close(p, q)
    for s_, e in zip(_state_tensors(opt), _state_tensors(opt_eager)):
        assert_close(s_.cpu(), e.cpu())
    import re
    plans = [p.read_text() for p in sorted(tmp_path.glob("*/fusion_plan.txt"))]
    kernels = [int(re.search(r"-> (\d+) generated kernels", t).group(1)) for t in plans]
    assert kernels and max(kernels) < len(shapes), kernels


def test_profiler_counts_aot_autograds_copy_backs():
    # Without ferrite the same step copies every updated tensor back (what the in-place path
    # removes): the count the test above asserts to be 0 is not 0 by accident of the profiler.
    from torch._dynamo.backends.common import aot_autograd

    torch.manual_seed(0)
    m = nn.Linear(4, 3)
    opt = torch.optim.Adam(m.parameters(), lr=1e-2)
    m(torch.randn(2, 4)).sum().backward()
    step = torch.compile(opt.step, backend=aot_autograd(fw_compiler=lambda gm, _: gm))
    step()
    assert _copies_outside_ferrite(step) >= 2 * 3  # param, exp_avg, exp_avg_sq, step per tensor


def test_write_whose_input_is_read_later_is_copied_after_the_run():
    # x's old value is read after its new value is computed (y = x * 3 comes after x + 1 in
    # the lowering): storing x + 1 into x early would change y. ferrite must copy instead.
    def f(x):
        y = x.t() * 3
        x.add_(1)
        return y + x.t()

    x = torch.arange(16.0).reshape(4, 4)
    x_eager = x.clone()
    expected = f(x_eager)
    reports = []
    with torch.no_grad():
        out = _compile(f, reports)(x)
    assert_close(out, expected)
    assert_close(x, x_eager)


def _session(outputs_into_inputs, second="new"):
    # Outputs: x + 1 and a second value of x + 1 ("new"), of x read where the first output is
    # stored ("same": x * 2, horizontally fused into the same kernel), or of x transposed.
    b = _core.GraphBuilder("writes")
    x = b.add_input("x", "f32", [4, 4])
    one = b.add_constant("one", np.ones([1], np.float32))
    two = b.add_constant("two", np.full([1], 2, np.float32))
    new_x = b.add_node("Add", [x, one], {})[0]
    if second == "new":
        y = b.add_node("Mul", [new_x, new_x], {})[0]
    elif second == "same":
        y = b.add_node("Mul", [x, two], {})[0]
    else:
        xt = b.add_node("Transpose", [x], {"perm": [1, 0]})[0]
        y = b.add_node("Mul", [xt, new_x], {})[0]
    b.set_outputs([new_x, y])
    return b.build_session("cpu", outputs_into_inputs=outputs_into_inputs)


@pytest.mark.parametrize("second", ["new", "same", "transposed"])
def test_session_writes_output_into_input(second):
    # Output 0 (x + 1) goes into input 0. Where x is read only by the kernel storing it, at the
    # element it stores, the kernel stores into x; where a later kernel reads x (transposed),
    # the Session computes it apart and copies it into x after the run.
    s = _session([0, -1], second)
    x = np.arange(16, dtype=np.float32).reshape(4, 4)
    x0 = x.copy()
    new_x, y = s.run([], [x], "numpy")
    assert np.array_equal(x, x0 + 1)
    expected = {"new": (x0 + 1) ** 2, "same": x0 * 2, "transposed": x0.T * (x0 + 1)}[second]
    assert np.allclose(y, expected)
    m = s.stats()["memory"]
    if second == "transposed":
        assert m["outputs_in_place"] == 0 and m["outputs_copied_into_inputs"] == 1, m
        assert m["output_bytes_copied_into_inputs"] == 64
    else:
        assert m["outputs_in_place"] == 1 and m["outputs_copied_into_inputs"] == 0, m


def test_session_rejects_bad_outputs_into_inputs():
    with pytest.raises(ValueError):
        _session([0])  # one entry per output
    with pytest.raises(ValueError):
        _session([3, -1])  # no input 3


@pytest.mark.parametrize("where", ["graph", "partition"])
def test_failed_compile_still_updates_the_parameters(monkeypatch, where):
    # A graph that fails to partition runs as AOTAutograd gave it (its copy_ nodes included,
    # although partitioning had already taken them out of it); a partition that fails to build
    # runs its FX module and copies the new values in itself.
    from ferrite import FerriteError
    from ferrite.pytorch import compiled, mutations, partition

    def fail_graph(gm, static, options, name, report=None):
        mutations.strip_input_copies(gm)
        raise FerriteError("injected failure")

    def fail_build(self, args):
        raise FerriteError("injected failure")

    if where == "graph":
        monkeypatch.setattr(partition, "partition_and_compile", fail_graph)
    else:
        monkeypatch.setattr(compiled.CompiledPartition, "_build", fail_build)
    torch.manual_seed(0)
    m = nn.Sequential(nn.Linear(8, 6), nn.ReLU(), nn.Linear(6, 3))
    eager = copy.deepcopy(m)
    opt, opt_eager = (torch.optim.Adam(mod.parameters(), lr=1e-2) for mod in (m, eager))
    step = torch.compile(opt.step, backend=functools.partial(
        ferrite_backend, options={"device": "cpu", "fallback": "silent"}))
    x = torch.randn(4, 8)
    for _ in range(3):
        for mod in (m, eager):
            mod.zero_grad(set_to_none=True)
            mod(x).square().sum().backward()
        step()
        opt_eager.step()
        for p, q in zip(m.parameters(), eager.parameters()):
            assert_close(p, q)


@pytest.mark.parametrize("foreach", [False, True], ids=["per-tensor", "foreach"])
@pytest.mark.parametrize("name", sorted(OPTIMIZERS))
def test_parameters_of_all_shapes_share_multi_tensor_kernels(tmp_path, name, foreach):
    # Twelve parameter tensors of ten shapes: one launch per level of the update (Adam: moments
    # and step counts, bias corrections, parameters), not a few per shape; still in place and
    # equal to eager.
    import re

    torch.manual_seed(0)
    widths = [3, 5, 8, 4, 7, 6, 2]
    m = nn.Sequential(*[nn.Linear(a, b) for a, b in zip(widths, widths[1:])])
    eager = copy.deepcopy(m)
    opt, opt_eager = OPTIMIZERS[name](m.parameters(), foreach), \
        OPTIMIZERS[name](eager.parameters(), foreach)
    options = {"device": "cpu", "fallback": "raise", "dump_dir": str(tmp_path)}
    reports = []
    step = torch.compile(opt.step, backend=functools.partial(ferrite_backend, options=options,
                                                             _report=reports))
    x = torch.randn(4, 3)
    for _ in range(4):
        for mod in (m, eager):
            mod.zero_grad(set_to_none=True)
            mod(x).square().sum().backward()
        step()
        opt_eager.step()
        for p, q in zip(m.parameters(), eager.parameters()):
            assert_close(p, q)
    last = [p["partition"] for p in reports[-1][1].partitions]
    plan = (tmp_path / last[0].name / "fusion_plan.txt").read_text()
    kernels = int(re.search(r"-> (\d+) generated kernels", plan).group(1))
    params = len(list(m.parameters()))
    assert params == 12 and kernels <= 3, plan
    stats = [cp.write_stats() for cp in last]
    assert sum(s["outputs_in_place"] for s in stats) == sum(len(cp.writes) for cp in last), stats


def test_written_value_that_is_also_returned_keeps_its_own_memory():
    # A value written into an input and also returned: both hold it (that write is an eager
    # copy, so that the returned tensor does not alias the input).
    def f(x):
        y = x * 2
        x.copy_(y)
        return y

    x = torch.arange(6.0)
    with torch.no_grad():
        out = _compile(f, [])(x)
    assert_close(x, torch.arange(6.0) * 2)
    assert_close(out, torch.arange(6.0) * 2)
