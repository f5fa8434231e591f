"""Whole models with random weights (no downloads), compiled with backend="ferrite" on cpu (and
on cuda where a GPU is present: tensors and model on the GPU) and compared with eager PyTorch;
partitions and eager fallbacks are asserted."""

from __future__ import annotations

import pytest
import torch

from conftest import MODEL_TOL, assert_close, compile_report, has_cuda

tv = pytest.importorskip("torchvision")
transformers = pytest.importorskip("transformers")


def _vision(name):
    from torchvision import models as M

    torch.manual_seed(0)
    if name == "vit":
        m = M.VisionTransformer(image_size=32, patch_size=8, num_layers=2, num_heads=4,
                                hidden_dim=64, mlp_dim=128, num_classes=10)
        return m, (torch.randn(2, 3, 32, 32),)
    if name == "swin":
        m = M.SwinTransformer(patch_size=[4, 4], embed_dim=32, depths=[2, 2], num_heads=[2, 4],
                              window_size=[4, 4], num_classes=10)
        return m, (torch.randn(2, 3, 64, 64),)
    if name == "convnext":
        from torchvision.models.convnext import CNBlockConfig, ConvNeXt

        m = ConvNeXt([CNBlockConfig(32, 64, 2), CNBlockConfig(64, None, 2)], num_classes=10)
        return m, (torch.randn(2, 3, 64, 64),)
    m = getattr(M, name)(weights=None, num_classes=10)
    return m, (torch.randn(2, 3, 64, 64),)


VISION = ["resnet18", "regnet_y_400mf", "mobilenet_v2", "mobilenet_v3_small", "efficientnet_b0",
          "densenet121", "shufflenet_v2_x0_5", "squeezenet1_1", "vit", "swin", "convnext"]


def _text(name):
    from transformers import (BartConfig, BartModel, BertConfig, BertModel, GPT2Config, GPT2Model,
                              LlamaConfig, LlamaModel, T5Config, T5EncoderModel)

    torch.manual_seed(0)
    ids = torch.randint(0, 100, (2, 16))
    if name == "bert":
        cfg = BertConfig(vocab_size=100, hidden_size=64, num_hidden_layers=2, num_attention_heads=4,
                         intermediate_size=128, max_position_embeddings=64)
        return BertModel(cfg), (ids,)
    if name == "gpt2":
        cfg = GPT2Config(vocab_size=100, n_embd=64, n_layer=2, n_head=4, n_positions=64)
        return GPT2Model(cfg), (ids,)
    if name == "t5_encoder":
        cfg = T5Config(vocab_size=100, d_model=64, d_kv=16, d_ff=128, num_layers=2, num_heads=4)
        return T5EncoderModel(cfg), (ids,)
    if name == "llama_gqa":
        cfg = LlamaConfig(vocab_size=100, hidden_size=64, intermediate_size=128,
                          num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
                          max_position_embeddings=64)
        return LlamaModel(cfg), (ids,)
    if name == "bart":
        cfg = BartConfig(vocab_size=100, d_model=64, encoder_layers=2, decoder_layers=2,
                         encoder_attention_heads=4, decoder_attention_heads=4,
                         encoder_ffn_dim=128, decoder_ffn_dim=128, max_position_embeddings=64)
        return BartModel(cfg), (ids,)
    raise KeyError(name)


TEXT = ["bert", "gpt2", "t5_encoder", "llama_gqa", "bart"]
# Dynamo graphs per model where it is not one (graph breaks in the model's Python code).
GRAPHS = {"bart": 3}


def _outputs(o):
    if isinstance(o, torch.Tensor):
        return [o]
    if hasattr(o, "last_hidden_state"):
        return [o.last_hidden_state]
    return [t for t in o if isinstance(t, torch.Tensor)]


DEVICES = ["cpu"] + (["cuda"] if has_cuda() else [])


def _run(model, args, device):
    model.eval().to(device)
    args = tuple(a.to(device) for a in args)
    torch.backends.cudnn.allow_tf32 = False  # eager in true f32, as ferrite at precision f32
    torch.backends.cuda.matmul.allow_tf32 = False
    with torch.no_grad():
        expected = _outputs(model(*args))
    out, reports, _ = compile_report(model, *args, device=device)
    assert all(o.device.type == device for o in _outputs(out))
    assert_close(_outputs(out), expected, **MODEL_TOL[torch.float32])
    per_graph = [len(r.partitions) for r in reports]
    eager = {op: e for r in reports for op, e in r.eager_ops.items()}
    return per_graph, eager


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("name", VISION)
def test_vision_model(name, device):
    per_graph, eager = _run(*_vision(name), device)
    assert per_graph == [1], f"{name}: partitions per graph {per_graph}, eager ops {eager}"
    assert not eager, f"{name}: ops left in eager PyTorch: {eager}"


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("name", TEXT)
def test_text_model(name, device):
    per_graph, eager = _run(*_text(name), device)
    # Dynamo may split a model into several graphs (BART's decoder: its cache logic breaks the
    # graph); each graph must be one ferrite partition with nothing left in eager.
    assert per_graph and all(p == 1 for p in per_graph), \
        f"{name}: partitions per graph {per_graph}, eager ops {eager}"
    assert len(per_graph) == GRAPHS.get(name, 1), f"{name}: {len(per_graph)} graphs"
    assert not eager, f"{name}: ops left in eager PyTorch: {eager}"
