#!/usr/bin/env python3
"""torch.compile(backend="ferrite") against PyTorch's own modes, on the lent GPU, in one job.

    python3 scripts/gpu/torch_backends.py [--json OUT.json] [--cases NAME,...] [--modes ...]

Each case is a model built with random weights (torchvision / transformers), at a deployed shape
and dtype. Each mode compiles it afresh and is timed the same way: CUDA events around one
forward (inputs already on the GPU, outputs left there), median of many runs after warm-up
(triton.testing.do_bench). Modes: eager; inductor (torch.compile default); inductor-cg
(mode="reduce-overhead": CUDA graphs); inductor-at (mode="max-autotune-no-cudagraphs");
ferrite. Every mode's output is compared with eager's (max abs diff printed). Cold compile time
is the first call's wall time; extra GPU memory is what the device's free memory dropped by from
before the compile to after the first runs (parameters and inputs excluded). Results go to
stdout as a table and to --json.
"""
import argparse
import gc
import json
import sys
import time

import torch
from triton.testing import do_bench

DEV = "cuda"


def resnet50(batch, dtype):
    return vision("resnet50", batch, dtype)


def vision(arch, batch, dtype):
    """A torchvision classifier with random weights (BatchNorm statistics left at init)."""
    import torchvision

    m = getattr(torchvision.models, arch)().eval().to(DEV, dtype)
    return m, (torch.randn(batch, 3, 224, 224, device=DEV, dtype=dtype),)


def bert_base(batch, seq, dtype):
    import transformers as tr

    cfg = tr.BertConfig()  # bert-base: 12 layers, hidden 768, 12 heads
    m = tr.BertModel(cfg, add_pooling_layer=False).eval().to(DEV, dtype)
    ids = torch.randint(0, cfg.vocab_size, (batch, seq), device=DEV)
    return m, (ids,)


def llama_gqa(batch, seq, dtype):
    import transformers as tr

    cfg = tr.LlamaConfig(hidden_size=1024, intermediate_size=2816, num_hidden_layers=8,
                         num_attention_heads=16, num_key_value_heads=4, vocab_size=32000)
    m = tr.LlamaForCausalLM(cfg).eval().to(DEV, dtype)
    ids = torch.randint(0, cfg.vocab_size, (batch, seq), device=DEV)
    return m, (ids,)


CASES = {
    "resnet50-b32-f32": lambda: resnet50(32, torch.float32),
    "resnet50-b32-bf16": lambda: resnet50(32, torch.bfloat16),
    "resnet50-b1-bf16": lambda: resnet50(1, torch.bfloat16),
    "bert-8x128-f32": lambda: bert_base(8, 128, torch.float32),
    "bert-8x128-bf16": lambda: bert_base(8, 128, torch.bfloat16),
    "bert-1x128-bf16": lambda: bert_base(1, 128, torch.bfloat16),
    "llama-gqa-8x128-bf16": lambda: llama_gqa(8, 128, torch.bfloat16),
}
# The convolutional and vision-transformer families at the serving batch, both dtypes.
for _arch, _tag in [("convnext_tiny", "convnext-t"), ("efficientnet_b0", "efficientnet-b0"),
                    ("mobilenet_v3_large", "mobilenetv3-l"), ("regnet_y_800mf", "regnety-800mf"),
                    ("densenet121", "densenet121"), ("vit_b_16", "vit-b16"), ("swin_t", "swin-t")]:
    for _dt, _dn in [(torch.float32, "f32"), (torch.bfloat16, "bf16")]:
        CASES[f"{_tag}-b32-{_dn}"] = (lambda a=_arch, d=_dt: vision(a, 32, d))


def first_tensor(out):
    if isinstance(out, torch.Tensor):
        return out
    if hasattr(out, "last_hidden_state"):
        return out.last_hidden_state
    if hasattr(out, "logits"):
        return out.logits
    if isinstance(out, (list, tuple)):
        return first_tensor(out[0])
    raise TypeError(type(out))


def compiled(model, mode):
    import torch._dynamo

    torch._dynamo.reset()
    if mode == "eager":
        return model
    if mode == "inductor":
        return torch.compile(model)
    if mode == "inductor-cg":
        return torch.compile(model, mode="reduce-overhead")
    if mode == "inductor-at":
        return torch.compile(model, mode="max-autotune-no-cudagraphs")
    if mode == "ferrite":
        return torch.compile(model, backend="ferrite")
    raise ValueError(mode)


def run_case(name, modes):
    torch.manual_seed(0)
    model, args = CASES[name]()
    rows = []
    with torch.no_grad():
        ref = first_tensor(model(*args)).float()
        for mode in modes:
            row = {"case": name, "mode": mode}
            try:
                gc.collect()  # the previous mode's compiled code and memory are gone
                torch.cuda.empty_cache()
                free0 = torch.cuda.mem_get_info()[0]
                fn = compiled(model, mode)
                t0 = time.time()
                out = fn(*args)
                torch.cuda.synchronize()
                row["first_call_s"] = time.time() - t0
                for _ in range(3):
                    out = fn(*args)
                torch.cuda.synchronize()
                # GPU memory the mode holds beyond eager's model and inputs, after its first runs
                # (device-wide: torch's allocator and ferrite's own pool alike).
                row["extra_gpu_mib"] = (free0 - torch.cuda.mem_get_info()[0]) / 2**20
                row["max_abs_diff"] = (first_tensor(out).float() - ref).abs().max().item()
                row["ms"] = do_bench(lambda: fn(*args), warmup=50, rep=300, return_mode="median")
            except Exception as e:  # a mode that fails is reported, the others still run
                row["error"] = f"{type(e).__name__}: {str(e)[:300]}"
            rows.append(row)
            print(json.dumps(row), flush=True)
    del model
    torch.cuda.empty_cache()
    return rows


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--json")
    ap.add_argument("--cases", default=",".join(CASES))
    ap.add_argument("--modes", default="eager,inductor,inductor-cg,ferrite")
    a = ap.parse_args()
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    import ferrite  # noqa: F401  (registers the backend)

    print(f"# {torch.cuda.get_device_name()}, torch {torch.__version__}", flush=True)
    rows = []
    for c in a.cases.split(","):
        rows += run_case(c, a.modes.split(","))
        if a.json:
            with open(a.json, "w") as f:
                json.dump(rows, f, indent=1)
    print("\n| case | mode | ms | first call s | extra GPU MiB | max abs diff vs eager |")
    print("|---|---|---|---|---|---|")
    nan = float("nan")
    for r in rows:
        print(f"| {r['case']} | {r['mode']} | {r.get('ms', nan):.3f} | "
              f"{r.get('first_call_s', nan):.1f} | {r.get('extra_gpu_mib', nan):.0f} | "
              f"{r.get('max_abs_diff', r.get('error'))} |")


if __name__ == "__main__":
    sys.exit(main())
