#!/usr/bin/env python3
"""Exports the architecture-family benchmark set to ONNX, with random weights (no downloads).

    .venv/bin/python scripts/families/export_families.py OUT_DIR [--only NAME,...] [--list]

Each family becomes OUT_DIR/<name>/model.onnx with a dynamic batch dim (and a dynamic sequence
dim for text models), plus one input set per benchmark shape:

    OUT_DIR/<name>/b1/input_*.pb     batch 1   (images 224x224; tokens 1x128)
    OUT_DIR/<name>/b2/input_*.pb     the zoo's batch (images 2x3x224x224; tokens 2x64)

The families are the ones people deploy, built from torchvision and transformers the way a user
would build them (torchvision's constructors with weights=None; transformers configs of the
published small sizes). Weights are seeded, so every run exports the same models. The exporter
is torch.onnx.export as a user calls it in PyTorch 2.x (the dynamo exporter, opset 18, one file
with the weights inside).
Models that exist already are kept unless --force.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
import warnings

import numpy as np
import torch

# name -> (family, builder). Builders return (module, input names, example inputs(batch)).
VISION_SIZE = 224
# Bumped when a builder changes the weights it makes (2: ViT's head no longer zero).
RECIPE = 2


def _tv(ctor, **kw):
    def build():
        from torchvision import models as M

        return getattr(M, ctor)(weights=None, **kw)

    return build


def _vit_b_16():
    from torchvision import models as M

    m = M.vit_b_16(weights=None)
    # torchvision zero-initialises the classification head: every output would be 0, and no
    # comparison of two runtimes could fail.
    torch.nn.init.normal_(m.heads.head.weight, std=0.02)
    return m


VISION = {
    "resnet50": ("residual", _tv("resnet50")),
    "mobilenet_v3_large": ("depthwise/SE, hardswish", _tv("mobilenet_v3_large")),
    "efficientnet_b0": ("depthwise/SE, SiLU", _tv("efficientnet_b0")),
    "regnet_y_800mf": ("grouped conv + SE", _tv("regnet_y_800mf")),
    "densenet121": ("dense", _tv("densenet121")),
    "shufflenet_v2_x1_0": ("channel shuffle", _tv("shufflenet_v2_x1_0")),
    "squeezenet1_1": ("fire modules, concat", _tv("squeezenet1_1")),
    "convnext_tiny": ("ConvNeXt", _tv("convnext_tiny")),
    "vit_b_16": ("ViT", _vit_b_16),
    "swin_t": ("window attention", _tv("swin_t")),
}


def _distilbert():
    from transformers import DistilBertConfig, DistilBertModel

    return DistilBertModel(DistilBertConfig())  # 6 layers, 768 hidden, 12 heads


def _roberta():
    from transformers import RobertaConfig, RobertaModel

    return RobertaModel(RobertaConfig(num_hidden_layers=4))


def _llama():
    from transformers import LlamaConfig, LlamaModel

    # A small rotary/GQA decoder with Llama's block (RMSNorm, SwiGLU, RoPE, 4 query heads per
    # key/value head), TinyLlama's head layout at a quarter of its width.
    cfg = LlamaConfig(vocab_size=32000, hidden_size=512, intermediate_size=1408,
                      num_hidden_layers=6, num_attention_heads=8, num_key_value_heads=2,
                      max_position_embeddings=1024)
    return LlamaModel(cfg)


def _t5():
    from transformers import T5Config, T5Model

    return T5Model(T5Config(vocab_size=32128, d_model=512, d_kv=64, d_ff=2048, num_layers=6,
                            num_heads=8))  # t5-small


def _gpt2_medium_like():
    from transformers import GPT2Config, GPT2Model

    return GPT2Model(GPT2Config(n_layer=6, n_embd=1024, n_head=16))


TEXT = {
    "distilbert": ("encoder", _distilbert),
    "roberta_4l": ("encoder", _roberta),
    "llama_gqa": ("rotary/GQA decoder", _llama),
    "gpt2_1024": ("decoder", _gpt2_medium_like),
    "t5_small": ("encoder-decoder", _t5),
}

FAMILIES = {**VISION, **TEXT}
SHAPES = {"b1": (1, 128), "b2": (2, 64)}  # images: batch 1 / 2; tokens: (batch, seq)


class _TextWrapper(torch.nn.Module):
    """Returns the last hidden state only, so every runtime has one output to compare."""

    def __init__(self, model, encoder_decoder):
        super().__init__()
        self.model = model
        self.encoder_decoder = encoder_decoder

    def forward(self, input_ids, attention_mask, decoder_input_ids=None):
        if self.encoder_decoder:
            out = self.model(input_ids=input_ids, attention_mask=attention_mask,
                             decoder_input_ids=decoder_input_ids, use_cache=False)
        else:
            kw = {} if "DistilBert" in type(self.model).__name__ else {"use_cache": False}
            kw = {} if "Roberta" in type(self.model).__name__ else kw
            out = self.model(input_ids=input_ids, attention_mask=attention_mask, **kw)
        return out.last_hidden_state


def _calibrate_batchnorm(model):
    """Sets every BatchNorm's running statistics to those of the activations it sees on random
    images. Freshly initialised statistics (mean 0, variance 1) leave the activations of a deep
    net shrinking layer by layer into denormal floats, which no trained model has: they would make
    both the comparison of outputs (all ~1e-10) and the timings (denormal arithmetic) meaningless."""
    bns = [m for m in model.modules() if isinstance(m, torch.nn.modules.batchnorm._BatchNorm)]
    if not bns:
        return
    for m in bns:
        m.reset_running_stats()
        m.momentum = None  # a cumulative average over the calibration batches
    model.train()
    g = torch.Generator().manual_seed(99)
    with torch.no_grad():
        for _ in range(3):
            model(torch.randn(4, 3, VISION_SIZE, VISION_SIZE, generator=g))
    model.eval()


def _inputs(name, key):
    g = torch.Generator().manual_seed(1234)
    if name in VISION:
        batch = 1 if key == "b1" else 2
        return {"input": torch.randn(batch, 3, VISION_SIZE, VISION_SIZE, generator=g)}
    batch, seq = SHAPES[key]
    ids = torch.randint(0, 1000, (batch, seq), generator=g)
    mask = torch.ones(batch, seq, dtype=torch.int64)
    if batch > 1:
        mask[1, seq * 3 // 4:] = 0  # a padded row, as a served batch has
    feeds = {"input_ids": ids, "attention_mask": mask}
    if name == "t5_small":
        feeds["decoder_input_ids"] = torch.randint(0, 1000, (batch, seq // 2), generator=g)
    return feeds


def _write_inputs(feeds, d):
    from onnx import numpy_helper

    os.makedirs(d, exist_ok=True)
    for i, (k, v) in enumerate(feeds.items()):
        t = numpy_helper.from_array(np.ascontiguousarray(v.numpy()), name=k)
        with open(os.path.join(d, f"input_{i}.pb"), "wb") as f:
            f.write(t.SerializeToString())


def build_module(name):
    """The module export() exports, in eval mode on the CPU in f32: seeded random weights,
    BatchNorm statistics calibrated (vision), text models wrapped by _TextWrapper."""
    _, build = FAMILIES[name]
    torch.manual_seed(0)
    model = build().eval()
    if name in VISION:
        _calibrate_batchnorm(model)
    if name in TEXT:
        model = _TextWrapper(model, name == "t5_small").eval()
    return model


def export(name, out_dir, force=False):
    family = FAMILIES[name][0]
    d = os.path.join(out_dir, name)
    path = os.path.join(d, "model.onnx")
    os.makedirs(d, exist_ok=True)
    model = build_module(name)
    feeds = _inputs(name, "b2")
    if force or not os.path.exists(path):
        t0 = time.time()
        names = list(feeds)
        dyn = {}
        for k in names:
            dyn[k] = {0: "batch"} if name in VISION else {0: "batch", 1: "seq" if k != "decoder_input_ids" else "dec_seq"}
        out_name = "output" if name in VISION else "last_hidden_state"
        dyn[out_name] = {0: "batch"}
        with torch.no_grad(), warnings.catch_warnings():
            warnings.simplefilter("ignore")
            torch.onnx.export(model, tuple(feeds.values()), path, input_names=names,
                              output_names=[out_name], dynamic_axes=dyn, opset_version=18,
                              dynamo=True, external_data=False, verbose=False)
        print(f"exported {name} ({family}) in {time.time() - t0:.1f} s", file=sys.stderr)
    for key in SHAPES:
        _write_inputs(_inputs(name, key), os.path.join(d, key))
    return path


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("out_dir", nargs="?")
    ap.add_argument("--only", help="comma-separated family names (default: all)")
    ap.add_argument("--force", action="store_true", help="re-export existing models")
    ap.add_argument("--list", action="store_true", help="print the families and exit")
    args = ap.parse_args()
    if args.list:
        for n, (fam, _) in FAMILIES.items():
            print(f"{n}\t{fam}")
        return 0
    if not args.out_dir:
        ap.error("OUT_DIR is required")
    names = args.only.split(",") if args.only else list(FAMILIES)
    bad = [n for n in names if n not in FAMILIES]
    if bad:
        ap.error(f"unknown family {bad}; --list shows them")
    torch.set_num_threads(min(2, os.cpu_count() or 1))
    for n in names:
        export(n, args.out_dir, args.force)
    return 0


if __name__ == "__main__":
    sys.exit(main())
