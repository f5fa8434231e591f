"""Training steps of whole models through ferrite against eager on cpu (and cuda with a GPU): ResNet-18 and a
GPT-2-architecture model from a small config, 20 SGD steps each (forward, backward and the
optimizer step compiled), parameters after the last step compared with eager's (ResNet-18's
through the same training in f64, see its test)."""

from __future__ import annotations

import copy

import pytest
import torch

from conftest import DEVICES, MODEL_TOL
from test_training import assert_compiled, compile_training

tv = pytest.importorskip("torchvision")
transformers = pytest.importorskip("transformers")


def _train(model, loss_fn, batches, compiled, device="cpu"):
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    reports = []
    fn = loss_fn
    step = opt.step
    if compiled:
        fn, r1 = compile_training(loss_fn, device)
        step, r2 = compile_training(opt.step, device)
        reports = [r1, r2]
    losses = []
    for batch in batches:
        opt.zero_grad(set_to_none=True)
        loss = fn(*batch)
        loss.backward()
        step()
        losses.append(loss.item())
    return losses, reports


def _compare(model, loss_of, batches, device):
    eager = copy.deepcopy(model)
    got, (r_model, r_step) = _train(model, loss_of(model), batches, True, device)
    want, _ = _train(eager, loss_of(eager), batches, False)
    torch.testing.assert_close(torch.tensor(got), torch.tensor(want), **MODEL_TOL[torch.float32])
    for (name, p), (_, q) in zip(model.named_parameters(), eager.named_parameters()):
        torch.testing.assert_close(p, q, **MODEL_TOL[torch.float32], msg=lambda m: f"{name}: {m}")
    assert_compiled(r_model, "forward")
    assert_compiled(r_model, "backward")
    assert_compiled(r_step, "inference")
    return got


@pytest.mark.parametrize("device", DEVICES)
def test_resnet18_trains_like_eager(device):
    # Fitting one batch with ResNet-18's batch norms amplifies rounding: after 20 steps eager in
    # f32 is ~2.5e-3 (relative to the largest parameter) away from the same training in f64, and
    # ferrite in f32 as far, in another direction. So both are measured against the f64 run:
    # ferrite's deviation must stay within twice eager's (a wrong gradient anywhere moves
    # parameters by far more).
    torch.manual_seed(0)
    model = tv.models.resnet18(num_classes=10).to(device)
    gen = torch.Generator().manual_seed(3)
    x, y = torch.randn(8, 3, 32, 32, generator=gen), torch.randint(0, 10, (8,), generator=gen)
    x, y = x.to(device), y.to(device)
    batches = [(x, y)] * 20
    eager, oracle = copy.deepcopy(model), copy.deepcopy(model).double()

    def loss_of(m):
        return lambda x, y: torch.nn.functional.cross_entropy(m(x), y)

    got, (r_model, r_step) = _train(model, loss_of(model), batches, True, device)
    want, _ = _train(eager, loss_of(eager), batches, False)
    exact, _ = _train(oracle, loss_of(oracle), [(x.double(), y)] * 20, False)

    def deviation(losses, m):
        loss_dev = max(abs(a - b) for a, b in zip(losses, exact))
        scale = max(q.abs().max().item() for q in oracle.parameters())
        par_dev = max((p.double() - q).abs().max().item()
                      for p, q in zip(m.parameters(), oracle.parameters())) / scale
        return loss_dev, par_dev

    (loss_f, par_f), (loss_e, par_e) = deviation(got, model), deviation(want, eager)
    assert loss_f <= 2 * loss_e + 1e-6 and par_f <= 2 * par_e + 1e-6, (loss_f, loss_e, par_f,
                                                                       par_e)
    assert exact[-1] < 0.01 * exact[0] and got[-1] < 0.01 * got[0]  # the batch is fitted
    assert_compiled(r_model, "forward")
    assert_compiled(r_model, "backward")
    assert_compiled(r_step, "inference")


@pytest.mark.parametrize("attn", ["eager", "sdpa"])
@pytest.mark.parametrize("device", DEVICES)
def test_gpt2_trains_like_eager(device, attn):
    # Attention as its math (matmul, softmax, matmul) and through SDPA (PyTorch's cpu flash
    # kernel: its logsumexp and backward translated). On cuda SDPA's overloads (flash, efficient,
    # cuDNN) keep their own logsumexp layouts and stay in eager in training.
    if device == "cuda" and attn == "sdpa":
        pytest.skip("cuda's SDPA overloads stay in eager in training (docs/training.md)")
    torch.manual_seed(0)
    cfg = transformers.GPT2Config(n_layer=2, n_head=2, n_embd=32, vocab_size=100, n_positions=32,
                                  bos_token_id=0, eos_token_id=0, resid_pdrop=0.0,
                                  embd_pdrop=0.0, attn_pdrop=0.0)
    cfg._attn_implementation = attn
    model = transformers.GPT2LMHeadModel(cfg).to(device)
    gen = torch.Generator().manual_seed(4)
    batches = [(torch.randint(0, 100, (2, 16), generator=gen).to(device),)] * 20  # fitted

    def loss_of(m):
        return lambda ids: m(ids, labels=ids).loss

    losses = _compare(model, loss_of, batches, device)
    assert losses[-1] < losses[0]
