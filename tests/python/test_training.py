"""Training through ferrite: gradients of every backward entry of the ATen table against eager
PyTorch, each with the backward graph compiled by ferrite (asserted: the entry ran in a ferrite
partition of the backward graph and nothing of that graph stayed in eager); the seed ConvNet
trained with Adam against eager at the end."""

from __future__ import annotations

import copy

import pytest
import torch

from conftest import DEVICES, TOL, assert_close

A = torch.ops.aten
F = torch.nn.functional
nn = torch.nn
g = torch.Generator().manual_seed(0)


def r(*shape, dtype=torch.float32):
    return (torch.rand(tuple(shape), generator=g) * 4 - 2).to(dtype)


def ri(*shape, hi=5):
    return torch.randint(0, hi, shape, generator=g)


def compile_training(fn, device="cpu"):
    """torch.compile with ferrite (fallback='raise') and the backend's report list."""
    import functools

    from ferrite.pytorch.backend import ferrite_backend

    reports = []
    backend = functools.partial(ferrite_backend, options={"device": device, "fallback": "raise"},
                                _report=reports)
    return torch.compile(fn, backend=backend), reports


def assert_compiled(reports, kind, overloads=()):
    """The graphs of `kind` ran in ferrite: every op in a partition that was built and did not
    fall back, and each of `overloads` among their ops."""
    reps = [rep for _, rep in reports if rep is not None and rep.kind == kind]
    assert reps, f"no {kind} graph was compiled"
    ops = set()
    for rep in reps:
        assert not rep.errors, rep.errors
        assert not rep.eager_ops, f"{kind} ops left in eager: {rep.eager_ops}"
        for p in rep.partitions:
            assert p["partition"].builds >= 1 and not p["partition"]._eager, p["name"]
            ops |= set(p["ops"])
    for o in overloads:
        assert str(o) in ops, f"{o} not in the {kind} graph's partitions: {sorted(ops)}"


class Fn(nn.Module):
    """A function as a module (so every case is a module, with or without parameters)."""

    def __init__(self, fn):
        super().__init__()
        self.fn = fn

    def forward(self, *args):
        return self.fn(*args)


class _Weighted(nn.Module):
    def __init__(self, w):
        super().__init__()
        self.register_buffer("w", w)

    def forward(self, x, t):
        return F.nll_loss(x, t, self.w, ignore_index=2)


def _bn(**kw):
    m = nn.BatchNorm2d(4, **kw)
    if m.affine:
        with torch.no_grad():
            m.weight.uniform_(0.5, 1.5, generator=g)
            m.bias.uniform_(-0.5, 0.5, generator=g)
    return m


# (overloads of the backward graph, overloads of the forward graph, module factory, inputs)
SDPA = A._scaled_dot_product_flash_attention_for_cpu.default
SDPA_BW = A._scaled_dot_product_flash_attention_for_cpu_backward.default

GRAD_CASES = [
    ([A.convolution_backward.default], [A.convolution.default],
     lambda: nn.Conv2d(3, 4, 3, stride=2, padding=1), lambda: (r(2, 3, 10, 10),)),
    ([A.convolution_backward.default], [], lambda: nn.Conv2d(4, 6, 3, padding=2, dilation=2,
                                                             groups=2), lambda: (r(2, 4, 7, 7),)),
    ([A.convolution_backward.default], [], lambda: nn.Conv1d(3, 5, 4, stride=3, bias=False),
     lambda: (r(2, 3, 17),)),
    ([A.convolution_backward.default], [],  # padding > (k - 1) * dilation: a ConvTranspose
     lambda: nn.Conv2d(3, 4, 1, stride=2, padding=1), lambda: (r(2, 3, 7, 6),)),
    ([A.max_pool2d_with_indices_backward.default], [A.max_pool2d_with_indices.default],
     lambda: Fn(lambda x: F.max_pool2d(x, 2)), lambda: (r(2, 3, 8, 8),)),
    ([A.max_pool2d_with_indices_backward.default], [],
     lambda: Fn(lambda x: F.max_pool2d(x, 3, 2, 1)), lambda: (r(2, 3, 9, 9),)),
    ([A.max_pool2d_with_indices_backward.default], [],
     lambda: Fn(lambda x: F.max_pool2d(x, 2, ceil_mode=True)), lambda: (r(2, 3, 7, 7),)),
    ([A.avg_pool2d_backward.default], [A.avg_pool2d.default],
     lambda: Fn(lambda x: F.avg_pool2d(x, 2)), lambda: (r(2, 3, 8, 8),)),
    ([A.avg_pool2d_backward.default], [],
     lambda: Fn(lambda x: F.avg_pool2d(x, 3, 2, 1, count_include_pad=False)),
     lambda: (r(2, 3, 9, 9),)),
    ([A.avg_pool2d_backward.default], [],
     lambda: Fn(lambda x: F.avg_pool2d(x, 3, 2, 1, ceil_mode=True)), lambda: (r(2, 3, 8, 8),)),
    ([A.native_batch_norm_backward.default], [A._native_batch_norm_legit_functional.default],
     _bn, lambda: (r(3, 4, 5, 5),)),
    ([A.native_batch_norm_backward.default], [A._native_batch_norm_legit.no_stats],
     lambda: _bn(track_running_stats=False), lambda: (r(3, 4, 5, 5),)),
    ([A.native_batch_norm_backward.default], [], lambda: _bn(affine=False),
     lambda: (r(3, 4, 5, 5),)),
    ([A.native_batch_norm_backward.default], [A._native_batch_norm_legit_no_training.default],
     lambda: _bn().eval(), lambda: (r(3, 4, 5, 5),)),  # eval mode with gradients
    ([A.native_layer_norm_backward.default], [A.native_layer_norm.default],
     lambda: nn.LayerNorm(8), lambda: (r(3, 5, 8),)),
    ([A.native_layer_norm_backward.default], [],
     lambda: nn.LayerNorm([4, 8], elementwise_affine=False), lambda: (r(3, 4, 8),)),
    ([A.threshold_backward.default], [A.relu.default], lambda: Fn(torch.relu),
     lambda: (r(4, 7),)),
    ([A.gelu_backward.default], [A.gelu.default], lambda: Fn(F.gelu), lambda: (r(4, 7),)),
    ([A.gelu_backward.default], [],
     lambda: Fn(lambda x: F.gelu(x, approximate="tanh")), lambda: (r(4, 7),)),
    ([A._softmax_backward_data.default], [A._softmax.default],
     lambda: Fn(lambda x: torch.softmax(x, -1)), lambda: (r(4, 7),)),
    ([A._log_softmax_backward_data.default, A.nll_loss_backward.default],
     [A._log_softmax.default, A.nll_loss_forward.default],
     lambda: Fn(F.cross_entropy), lambda: (r(6, 5), ri(6))),
    ([A.nll_loss_backward.default], [],
     lambda: _Weighted(r(5).abs() + 0.1), lambda: (r(8, 5), ri(8))),
    ([A.nll_loss_backward.default], [],
     lambda: Fn(lambda x, t: F.nll_loss(x, t, reduction="none") * 3),
     lambda: (r(6, 4), ri(6, hi=4))),
    ([A.embedding_dense_backward.default], [A.embedding.default],
     lambda: nn.Embedding(10, 4, padding_idx=0), lambda: (ri(3, 5, hi=10),)),
    ([A.index_put.default], [A.index.Tensor], lambda: Fn(lambda x, i: x[i] * 2),
     lambda: (r(6, 3), ri(8, hi=6))),
    ([A._unsafe_index_put.default], [A._unsafe_index.Tensor],
     lambda: Fn(lambda x: F.interpolate(x, scale_factor=2) * 2), lambda: (r(2, 3, 4, 5),)),
    ([A.index_put.default], [], lambda: Fn(lambda x, i: x[:, i, 1:] * 2),
     lambda: (r(2, 6, 3), ri(5, hi=6))),
    ([A.index_put.default], [], lambda: Fn(lambda x, i, j: x[i, :, j] * 2),
     lambda: (r(4, 3, 5), ri(2, 3, hi=4), ri(3, hi=5) - 5)),
    ([A.scatter_add.default], [A.gather.default],
     lambda: Fn(lambda x, i: torch.gather(x, 1, i)), lambda: (r(4, 5), ri(4, 7))),
    ([], [A.scatter.src], lambda: Fn(lambda x, i, s: x.scatter(1, i, s)),
     lambda: (r(4, 5), torch.stack([torch.randperm(5, generator=g)[:2] for _ in range(4)]),
              r(4, 2))),
    ([], [A.scatter.value], lambda: Fn(lambda x, i: x.scatter(1, i, 1.5) * x),
     lambda: (r(4, 5), torch.stack([torch.randperm(5, generator=g)[:2] for _ in range(4)]))),
    ([A.expand.default], [A.sum.dim_IntList], lambda: Fn(lambda x: x.sum(1) * x.mean()),
     lambda: (r(4, 6),)),
    # SDPA through PyTorch's cpu flash kernel: its logsumexp and backward (causal with more keys
    # than queries, an additive mask with a scale, a boolean mask, grouped-query heads).
    ([SDPA_BW], [SDPA], lambda: Fn(lambda q, k, v: F.scaled_dot_product_attention(
        q, k, v, is_causal=True)), lambda: (r(2, 3, 5, 8), r(2, 3, 7, 8), r(2, 3, 7, 8))),
    ([SDPA_BW], [SDPA], lambda: Fn(lambda q, k, v: F.scaled_dot_product_attention(
        q, k, v, attn_mask=torch.linspace(-2, 1, 36).reshape(6, 6), scale=0.3)),
     lambda: (r(2, 2, 6, 4), r(2, 2, 6, 4), r(2, 2, 6, 4))),
    ([SDPA_BW], [SDPA], lambda: Fn(lambda q, k, v: F.scaled_dot_product_attention(
        q, k, v, attn_mask=torch.ones(5, 7, dtype=torch.bool).tril(2))),
     lambda: (r(1, 2, 5, 8), r(1, 2, 7, 8), r(1, 2, 7, 8))),
    ([SDPA_BW], [SDPA], lambda: Fn(lambda q, k, v: F.scaled_dot_product_attention(
        q, k, v, enable_gqa=True)), lambda: (r(2, 4, 5, 8), r(2, 2, 7, 8), r(2, 2, 7, 8))),
]


def _check_grads(module, args, dtype=torch.float32, device="cpu", **tol):
    """Forward and backward of `module` compiled with ferrite on `device` against eager on the
    same device; returns the reports."""
    eager = copy.deepcopy(module).to(device, dtype)
    module = module.to(device, dtype)
    compiled, reports = compile_training(module, device)
    args = [(a.to(dtype) if a.is_floating_point() else a).to(device) for a in args]
    xs = [a.clone().requires_grad_(a.is_floating_point()) for a in args]
    xe = [a.clone().requires_grad_(a.is_floating_point()) for a in args]
    out, exp = compiled(*xs), eager(*xe)
    gout = r(*exp.shape).to(device, dtype)
    out.backward(gout)
    exp.backward(gout)
    assert_close(out, exp, **tol)
    for a, e in zip(xs, xe):
        if e.grad is not None:
            assert_close(a.grad, e.grad, **tol)
    for (name, p), (_, q) in zip(module.named_parameters(), eager.named_parameters()):
        assert_close(p.grad, q.grad, **tol)
    for (name, b), (_, c) in zip(module.named_buffers(), eager.named_buffers()):
        assert_close(b, c, **tol)
    return reports


@pytest.mark.parametrize("case", range(len(GRAD_CASES)), ids=lambda i: str(
    (GRAD_CASES[i][0] or GRAD_CASES[i][1])[0]))
@pytest.mark.parametrize("device", DEVICES)
def test_gradients(case, device):
    bw_ops, fw_ops, make_module, make_inputs = GRAD_CASES[case]
    if device == "cuda" and SDPA_BW in bw_ops:
        pytest.skip("cuda's SDPA overloads stay in eager in training (docs/training.md)")
    torch.manual_seed(0)
    reports = _check_grads(make_module(), make_inputs(), device=device)
    assert_compiled(reports, "forward", fw_ops)
    assert_compiled(reports, "backward", bw_ops)


def _cases_of(op, n=1):
    return [i for i, c in enumerate(GRAD_CASES) if op in c[0]][:n]


BF16_CASES = (_cases_of(A.convolution_backward.default, 2) +
              _cases_of(A.max_pool2d_with_indices_backward.default) +
              _cases_of(A.native_batch_norm_backward.default) +
              _cases_of(A.native_layer_norm_backward.default) +
              _cases_of(A.gelu_backward.default) + _cases_of(A._softmax_backward_data.default))


@pytest.mark.parametrize("case", BF16_CASES, ids=lambda i: str(GRAD_CASES[i][0][0]))
@pytest.mark.parametrize("device", DEVICES)
def test_gradients_bf16(case, device):
    # bf16 parameters and activations (the forward entries' bf16 support): ferrite's gradients
    # against eager's in f32 on the same bf16 values, within the bf16 chain tolerance of
    # test_aten_table.test_float_dtypes.
    bw_ops, fw_ops, make_module, make_inputs = GRAD_CASES[case]
    torch.manual_seed(0)
    module, args = make_module(), [a.to(device) for a in make_inputs()]
    ref = copy.deepcopy(module).to(device, torch.bfloat16).float()
    module = module.to(device, torch.bfloat16)
    compiled, reports = compile_training(module, device)
    xs = [a.to(torch.bfloat16).requires_grad_() for a in args]
    xe = [a.to(torch.bfloat16).float().requires_grad_() for a in args]
    out, exp = compiled(*xs), ref(*xe)
    gout = r(*exp.shape).to(device, torch.bfloat16)
    out.backward(gout)
    exp.backward(gout.float())
    tol = dict(rtol=4e-2, atol=4e-2)
    assert out.dtype == torch.bfloat16
    assert_close(out.float(), exp, **tol)
    assert_close(xs[0].grad.float(), xe[0].grad, **tol)
    for p, q in zip(module.parameters(), ref.parameters()):
        assert p.grad.dtype == torch.bfloat16
        assert_close(p.grad.float(), q.grad, **tol)
    assert_compiled(reports, "backward", bw_ops)


# ---- the seed ConvNet trained with Adam --------------------------------------------------------
class ConvNet(nn.Module):
    """conv-bn-relu-pool x2, linear: the bring-up model."""

    def __init__(self):
        super().__init__()
        self.c1, self.b1 = nn.Conv2d(3, 8, 3, padding=1), nn.BatchNorm2d(8)
        self.c2, self.b2 = nn.Conv2d(8, 16, 3, padding=1), nn.BatchNorm2d(16)
        self.fc = nn.Linear(16 * 4 * 4, 4)

    def forward(self, x):
        x = F.max_pool2d(F.relu(self.b1(self.c1(x))), 2)
        x = F.max_pool2d(F.relu(self.b2(self.c2(x))), 2)
        return self.fc(x.flatten(1))


class WithLoss(nn.Module):
    def __init__(self, model):
        super().__init__()
        self.model = model

    def forward(self, x, y):
        return F.cross_entropy(self.model(x), y)


def _dataset(n=64, seed=1):
    # Fixed synthetic images whose class is which quadrant holds a bright blob.
    gen = torch.Generator().manual_seed(seed)
    x = torch.randn(n, 3, 16, 16, generator=gen) * 0.5
    y = torch.randint(0, 4, (n,), generator=gen)
    for i in range(n):
        r0, c0 = (int(y[i]) // 2) * 8, (int(y[i]) % 2) * 8
        x[i, :, r0 + 2:r0 + 6, c0 + 2:c0 + 6] += 1.5
    return x, y


def _train(step_fn, model, data, steps, compile_step=None):
    opt = torch.optim.Adam(model.parameters(), lr=3e-3)
    opt_step = compile_step(opt.step) if compile_step else opt.step
    x, y = data
    losses = []
    for s in range(steps):
        i = (s % (len(x) // 16)) * 16
        opt.zero_grad(set_to_none=True)
        loss = step_fn(x[i:i + 16], y[i:i + 16])
        loss.backward()
        opt_step()
        losses.append(loss.item())
    return losses


def _accuracy(fn, data):
    with torch.no_grad():
        return (fn(data[0]).argmax(1) == data[1]).float().mean().item()


@pytest.mark.parametrize("device", DEVICES)
def test_convnet_trains_like_eager(device):
    # 300 Adam steps at batch 16 on 16x16 images, forward, backward and the optimizer step
    # compiled by ferrite, against the same training in eager from the same weights on the same
    # device.
    torch.manual_seed(0)
    data, steps = [t.to(device) for t in _dataset()], 300
    eager = ConvNet().to(device)
    model = copy.deepcopy(eager)
    compiled, reports = compile_training(WithLoss(model), device)
    step_reports = []

    def compile_step(fn):
        c, reps = compile_training(fn, device)
        step_reports.append(reps)
        return c

    got = _train(compiled, model, data, steps, compile_step)
    want = _train(WithLoss(eager), eager, data, steps)
    assert_compiled(step_reports[0], "inference")  # the Adam step: no eager op in it
    assert_compiled(reports, "forward", [A.convolution.default,
                                         A._native_batch_norm_legit_functional.default])
    assert_compiled(reports, "backward", [A.convolution_backward.default,
                                          A.native_batch_norm_backward.default,
                                          A.max_pool2d_with_indices_backward.default])
    assert sum(rep.kind == "backward" for _, rep in reports) == 1  # compiled once
    torch.testing.assert_close(torch.tensor(got), torch.tensor(want), rtol=1e-3, atol=1e-6)
    assert want[-1] < 0.1 * want[0]  # it learned
    # eval mode: batch norm from the running statistics ferrite updated
    model.eval(), eager.eval()
    test = [t.to(device) for t in _dataset(32, seed=2)]
    fast_eval, eval_reports = compile_training(model, device)
    acc, acc_eager = _accuracy(fast_eval, test), _accuracy(eager, test)
    assert_compiled(eval_reports, "inference", [A._native_batch_norm_legit_no_training.default])
    assert acc == acc_eager and acc > 0.9


@pytest.mark.skipif("gxu" not in __import__("ferrite").devices(), reason="no gxu plugin built")
def test_convnet_trains_on_a_plugin_device():
    # A device brought up through the device SDK (gxu: the example plugin, its memory apart
    # from the host's) trains through the same path: forward, backward and the Adam step
    # compiled for it, the losses eager's step by step (PyTorch's tensors stay on the cpu).
    torch.manual_seed(0)
    data = _dataset()
    eager = ConvNet()
    model = copy.deepcopy(eager)
    compiled, reports = compile_training(WithLoss(model), "gxu")
    step_reports = []

    def compile_step(fn):
        c, reps = compile_training(fn, "gxu")
        step_reports.append(reps)
        return c

    got = _train(compiled, model, data, 40, compile_step)
    want = _train(WithLoss(eager), eager, data, 40)
    assert_compiled(step_reports[0], "inference")
    assert_compiled(reports, "forward", [A.convolution.default])
    assert_compiled(reports, "backward", [A.convolution_backward.default])
    torch.testing.assert_close(torch.tensor(got), torch.tensor(want), rtol=1e-3, atol=1e-6)


# ---- fallbacks: a backward graph ferrite cannot take still trains, and explain says why -------
def test_untranslatable_backward_op_stays_in_eager_with_reason():
    import ferrite

    torch.manual_seed(0)
    m = nn.Embedding(10, 4, scale_grad_by_freq=True)
    idx = ri(3, 5, hi=10)
    e = ferrite.explain(m, idx, backward=True, options={"device": "cpu"})
    key = f"backward: {A.embedding_dense_backward.default}"
    assert e.kinds == ["forward", "backward"], str(e)
    assert "scale_grad_by_freq" in e.eager_ops[key]["reason"], str(e)
    assert key in str(e) and not e.errors
    # the gradients are still eager's
    m.zero_grad()
    eager = copy.deepcopy(m)
    compiled, _ = compile_training(m)
    compiled(idx).sum().backward()
    eager(idx).sum().backward()
    assert_close(m.weight.grad, eager.weight.grad)


def test_backward_compile_failure_falls_back_with_one_warning(monkeypatch):
    import ferrite
    from ferrite.pytorch import backend, partition

    real = partition.partition_and_compile

    def failing(gm, static, options, name, report=None, **kw):
        if report is not None and report.kind == "backward" or name.endswith("_bw"):
            raise ferrite.FerriteError("injected backward failure")
        return real(gm, static, options, name, report, **kw)

    monkeypatch.setattr(partition, "partition_and_compile", failing)
    torch.manual_seed(0)
    m = nn.Sequential(nn.Linear(6, 5), nn.GELU(), nn.Linear(5, 2))
    eager = copy.deepcopy(m)
    x = r(4, 6)
    compiled = torch.compile(m, backend="ferrite", options={"device": "cpu"})
    with pytest.warns(RuntimeWarning, match="injected backward failure"):
        compiled(x).sum().backward()
    eager(x).sum().backward()
    for p, q in zip(m.parameters(), eager.parameters()):
        assert_close(p.grad, q.grad)
    e = ferrite.explain(copy.deepcopy(eager), x, backward=True, options={"device": "cpu",
                                                                      "fallback": "silent"})
    assert any("injected backward failure" in err for err in e.errors), str(e)


@pytest.mark.parametrize("device", DEVICES)
def test_dynamic_batch_trains_with_two_compiles(device):
    # Three batch sizes: the second compiles the forward and backward with a symbolic batch
    # (SymInt inputs of the backward graph), the third reuses them.
    torch.manual_seed(0)
    m = nn.Sequential(nn.Conv2d(3, 4, 3, padding=1), nn.BatchNorm2d(4), nn.ReLU(),
                      nn.MaxPool2d(2), nn.Flatten(), nn.Linear(4 * 4 * 4, 3)).to(device)
    eager = copy.deepcopy(m)
    compiled, reports = compile_training(m, device)
    for bs in (2, 3, 5):
        x = r(bs, 3, 8, 8).to(device)
        compiled(x).sum().backward()
        eager(x).sum().backward()
        for p, q in zip(m.parameters(), eager.parameters()):
            assert_close(p.grad, q.grad)
    assert [rep.kind for _, rep in reports] == ["forward", "backward"] * 2
    assert_compiled(reports, "backward", [A.convolution_backward.default])


def test_dropout_stays_in_eager_with_reason():
    import ferrite

    m = nn.Sequential(nn.Linear(4, 4), nn.Dropout(0.5), nn.Linear(4, 2))
    e = ferrite.explain(m, r(3, 4), backward=True, options={"device": "cpu"})
    assert "generator" in e.eager_ops[str(A.native_dropout.default)]["reason"], str(e)
    assert not any(k.startswith("backward:") for k in e.eager_ops), str(e)


# ---- the optimizer step ------------------------------------------------------------------------
@pytest.mark.parametrize("make_opt", [
    lambda p: torch.optim.Adam(p, lr=1e-2),
    lambda p: torch.optim.AdamW(p, lr=1e-2, weight_decay=0.1),
    lambda p: torch.optim.SGD(p, lr=1e-2, momentum=0.9),
    lambda p: torch.optim.Adam(p, lr=1e-2, foreach=True),
    lambda p: torch.optim.AdamW(p, lr=1e-2, foreach=True, amsgrad=True),
    lambda p: torch.optim.SGD(p, lr=1e-2, momentum=0.9, nesterov=True, weight_decay=0.1,
                              foreach=True),
], ids=["adam", "adamw", "sgd", "adam-foreach", "adamw-amsgrad-foreach", "sgd-nesterov-foreach"])
@pytest.mark.parametrize("device", DEVICES)
def test_compiled_optimizer_step_matches_eager(make_opt, device):
    # torch.compile(opt.step): the parameters and states it updates are graph inputs (the
    # partition is built once, not at every step) and the update runs in ferrite, the
    # per-tensor loop and the multi-tensor (_foreach_*) implementations alike.
    torch.manual_seed(0)
    m = nn.Sequential(nn.Linear(8, 6), nn.ReLU(), nn.Linear(6, 3)).to(device)
    eager = copy.deepcopy(m)
    opt, opt_eager = make_opt(m.parameters()), make_opt(eager.parameters())
    step, reports = compile_training(opt.step, device)
    x = r(4, 8).to(device)
    for _ in range(6):
        for mod in (m, eager):
            mod.zero_grad(set_to_none=True)
            mod(x).square().sum().backward()
        step()
        opt_eager.step()
    for p, q in zip(m.parameters(), eager.parameters()):
        assert_close(p, q)
    assert_compiled(reports, "inference")
    for _, rep in reports:
        for p in rep.partitions:
            assert p["partition"].builds == 1 and p["static_inputs"] == 0, p


def test_saved_activations_are_reported_and_dumped(tmp_path):
    import ferrite

    torch.manual_seed(0)
    m = nn.Sequential(nn.Conv2d(3, 4, 3, padding=1), nn.BatchNorm2d(4), nn.ReLU())
    e = ferrite.explain(m, r(2, 3, 8, 8), backward=True,
                        options={"device": "cpu", "dump_dir": str(tmp_path)})
    saved = {t["name"]: t for t in e.saved}
    conv = [t for t in e.saved if t["shape"] == (2, 4, 8, 8)]
    assert conv and all(t["bytes"] == 2 * 4 * 8 * 8 * 4 for t in conv), saved
    assert "saved for the backward" in str(e)
    assert all(p["arena_bytes"] > 0 for p in e.partitions), e.partitions
    assert "ferrite memory per training step" in str(e)
    (dump,) = tmp_path.glob("*_bw_saved.txt")
    text = dump.read_text()
    assert text.startswith(f"{len(e.saved)} values saved for the backward")
    assert all(name in text for name in saved)


@pytest.mark.parametrize("device", DEVICES)
def test_gradient_accumulation_and_train_eval_switching(device):
    # Two micro-batches accumulate into .grad before a step, then an eval forward under no_grad
    # (the inference graph reads the running statistics the training graphs updated), then
    # training again: gradients and outputs as eager's throughout.
    torch.manual_seed(0)
    m = nn.Sequential(nn.Conv2d(3, 4, 3, padding=1), nn.BatchNorm2d(4), nn.ReLU(),
                      nn.Flatten(), nn.Linear(4 * 6 * 6, 2)).to(device)
    eager = copy.deepcopy(m)
    compiled, reports = compile_training(m, device)
    xs = [r(4, 3, 6, 6).to(device) for _ in range(3)]
    evals = []
    for mod, fn in ((m, compiled), (eager, eager)):
        mod.train()
        fn(xs[0]).square().sum().backward()
        fn(xs[1]).square().sum().backward()
        mod.eval()
        with torch.no_grad():
            evals.append(fn(xs[2]))
        mod.train()
        fn(xs[2]).sum().backward()
    for p, q in zip(m.parameters(), eager.parameters()):
        assert_close(p.grad, q.grad)
    assert_close(evals[0], evals[1])
    assert_compiled(reports, "backward")
    assert_compiled(reports, "inference")


@pytest.mark.parametrize("device", DEVICES)
def test_bf16_autocast_training_step(device):
    # Convolutions and the linear layer in bf16 under autocast, the loss in f32: ferrite's loss
    # equals eager's autocast loss, and its gradients are as close to the f32 training's as the
    # bf16 chain tolerance (test_aten_table.test_float_dtypes) allows.
    torch.manual_seed(0)
    model = ConvNet().to(device)
    eager, exact = copy.deepcopy(model), copy.deepcopy(model)
    compiled, reports = compile_training(WithLoss(model), device)
    x, y = [t.to(device) for t in _dataset(16)]
    with torch.autocast(device, dtype=torch.bfloat16):
        loss = compiled(x, y)
        want = WithLoss(eager)(x, y)
    assert loss.dtype == torch.float32
    assert_close(loss, want, rtol=1.6e-2, atol=1e-5)
    loss.backward()
    WithLoss(exact)(x, y).backward()
    for p, q in zip(model.parameters(), exact.parameters()):
        assert p.grad.dtype == torch.float32
        assert_close(p.grad, q.grad, rtol=4e-2, atol=4e-2)
    assert_compiled(reports, "forward", [A.convolution.default])
    assert_compiled(reports, "backward", [A.convolution_backward.default])


@pytest.mark.parametrize("device", DEVICES)
def test_fp16_autocast_with_grad_scaler(device):
    # fp16 autocast with a GradScaler whose first scale (2^20) overflows the fp16 gradients: the
    # steps it skips and the scale it backs off to must be eager's (ferrite's fp16 backward
    # overflows where eager's does), and the losses of the steps taken agree within fp16
    # rounding (measured on cpu: 2e-6 before the first update, 4e-5 after it).
    torch.manual_seed(0)
    model = ConvNet().to(device)
    eager = copy.deepcopy(model)
    x, y = [t.to(device) for t in _dataset(16)]
    runs = []
    for m, compiled in ((model, True), (eager, False)):
        fn, reports = compile_training(WithLoss(m), device) if compiled else (WithLoss(m), [])
        opt = torch.optim.SGD(m.parameters(), lr=0.05)
        scaler = torch.amp.GradScaler(device, init_scale=2.0**20)
        history = []
        for _ in range(6):
            opt.zero_grad(set_to_none=True)
            with torch.autocast(device, dtype=torch.float16):
                loss = fn(x, y)
            scaler.scale(loss).backward()
            scaler.step(opt)
            scaler.update()
            history.append((loss.item(), scaler.get_scale()))
        runs.append((history, reports))
    (got, reports), (want, _) = runs
    assert [sc for _, sc in got] == [sc for _, sc in want]
    assert want[0][1] < 2.0**20 and want[-1][0] < want[0][0]  # it overflowed, then learned
    torch.testing.assert_close(torch.tensor([l for l, _ in got]),
                               torch.tensor([l for l, _ in want]), rtol=1e-3, atol=0)
    assert_compiled(reports, "forward", [A.convolution.default])
    assert_compiled(reports, "backward", [A.convolution_backward.default])


def test_strided_tangents_aliased_outputs_and_none_grads():
    # A transposed output whose incoming gradient is itself strided, an output that is a view of
    # the input (AOTAutograd regenerates it outside the graph), an integer input (no gradient)
    # and a parameter the loss does not reach (its gradient stays None).
    class M(nn.Module):
        def __init__(self):
            super().__init__()
            self.lin = nn.Linear(5, 3)
            self.unused = nn.Linear(2, 2)

        def forward(self, x, i):
            y = self.lin(x)
            return y.t() * 2, x.view(-1), y.index_select(0, i)

    torch.manual_seed(0)
    m = M()
    eager = copy.deepcopy(m)
    compiled, reports = compile_training(m)
    x = r(4, 5)
    i = torch.tensor([3, 0, 3])
    xs, xe = x.clone().requires_grad_(), x.clone().requires_grad_()
    outs, exps = compiled(xs, i), eager(xe, i)
    grads = [r(4, 3).t(), r(20), r(3, 3)]  # the first: [3, 4] with strides (1, 3)
    assert not grads[0].is_contiguous()
    torch.autograd.backward(outs, grads)
    torch.autograd.backward(exps, grads)
    for o, e in zip(outs, exps):
        assert_close(o, e)
    assert outs[1]._base is xs  # still a view of the input, as in eager
    assert_close(xs.grad, xe.grad)
    for p, q in zip(m.parameters(), eager.parameters()):
        assert (p.grad is None) == (q.grad is None)
        if q.grad is not None:
            assert_close(p.grad, q.grad)
    assert_compiled(reports, "backward")


def test_same_shaped_parameter_updates_share_kernels(tmp_path):
    # A foreach Adam step over 12 parameters of 2 shapes: the updates of same-shaped parameters
    # run in shared kernels (horizontal fusion: one kernel writing several parameters' states),
    # not one launch per parameter.
    import functools
    import re

    from ferrite.pytorch.backend import ferrite_backend

    torch.manual_seed(0)
    m = nn.Sequential(*[nn.Linear(16, 16) for _ in range(6)])
    opt = torch.optim.Adam(m.parameters(), lr=1e-3, foreach=True)
    m(r(4, 16)).sum().backward()
    options = {"device": "cpu", "fallback": "raise", "dump_dir": str(tmp_path)}
    step = torch.compile(opt.step, backend=functools.partial(ferrite_backend, options=options))
    step()
    step()
    plans = sorted(tmp_path.glob("*/fusion_plan.txt"))
    kernels = [int(re.search(r"-> (\d+) generated kernels", p.read_text()).group(1))
               for p in plans]
    params = len(list(m.parameters()))
    shapes = len({tuple(p.shape) for p in m.parameters()})
    assert kernels and all(k <= 1 + 3 * shapes < params for k in kernels), kernels


def test_boxed_graph_drops_values_after_their_last_use():
    """AOTAutograd hands a compiled backward the list of its inputs (the saved activations) as
    their only references: the runner empties it and drops each value after its last use, so
    that memory is free while the rest of the graph runs."""
    import weakref

    from ferrite.pytorch.partition import BoxedGraph

    alive = {}

    def first(t):
        return t + 1

    def second(t):
        alive["x"] = x_ref() is not None
        alive["y"] = y_ref() is not None
        return t * 2

    graph = torch.fx.Graph()
    x = graph.placeholder("x")
    y = graph.placeholder("y")
    a = graph.call_function(first, (x,))
    b = graph.call_function(second, (a,))
    graph.output((b, y))
    runner = BoxedGraph(torch.fx.GraphModule(torch.nn.Module(), graph))
    xv, yv = torch.ones(4), torch.zeros(2)
    x_ref, y_ref = weakref.ref(xv), weakref.ref(yv)
    args = [xv, yv]
    del xv, yv
    out = runner(args)
    assert args == []
    assert alive == {"x": False, "y": True}  # x died at `first`; y is an output
    assert torch.equal(out[0], torch.full((4,), 4.0)) and out[1] is y_ref()


def test_forward_and_backward_graphs_run_boxed(monkeypatch):
    """AOTAutograd reaches the compiled graphs through wrappers (dynamo's disable() around the
    backward): the graphs must still get the boxed list, and empty it, or the saved activations
    live until the backward ends."""
    from ferrite.pytorch import partition

    calls = []
    real = partition.BoxedGraph.__call__

    def spy(self, args):
        assert isinstance(args, list)
        out = real(self, args)
        calls.append(len(args))
        return out

    monkeypatch.setattr(partition.BoxedGraph, "__call__", spy)
    torch.manual_seed(0)
    m = nn.Sequential(nn.Linear(6, 5), nn.GELU(), nn.Linear(5, 2))
    compiled = torch.compile(m, backend="ferrite", options={"device": "cpu"})
    compiled(r(4, 6)).sum().backward()
    assert calls == [0, 0]  # the forward and the backward, each list emptied


def test_recompute_saves_fewer_activations_than_saving_everything():
    """recompute=True (the default): AOTAutograd's min-cut partitioner saves what is cheapest to
    keep (here the weights themselves rather than their transposes, and no second copy of the
    ReLU output), so fewer bytes are saved for the backward than with recompute=False; the
    gradients are the same."""
    import ferrite

    class M(nn.Module):
        def __init__(self):
            super().__init__()
            self.a, self.b, self.n = nn.Linear(16, 64), nn.Linear(64, 4), nn.LayerNorm(64)

        def forward(self, x):
            h = torch.sin(self.a(x)) * 2 + 1
            return self.b(torch.relu(self.n(h)))

    torch.manual_seed(0)
    m = M()
    x = r(32, 16)
    saved, grads = {}, {}
    for recompute in (True, False):
        e = ferrite.explain(copy.deepcopy(m), x, backward=True,
                            options={"device": "cpu", "recompute": recompute})
        saved[recompute] = sum(t["bytes"] for t in e.saved)
        mc = copy.deepcopy(m)
        compiled = torch.compile(mc, backend="ferrite",
                                 options={"device": "cpu", "recompute": recompute,
                                          "fallback": "raise"})
        compiled(x).sum().backward()
        grads[recompute] = [p.grad for p in mc.parameters()]
    assert saved[True] < saved[False], saved
    for a, b in zip(grads[True], grads[False]):
        assert_close(a, b)
