#!/usr/bin/env python3
"""Anchor measurements on the lent GPU, for the CUDA backend (BENCHMARKS.md, "GPU anchors").

    python3 scripts/gpu/anchors.py ceilings [--json OUT.json]   # copy bandwidth, bf16 GEMM, micro
    python3 scripts/gpu/anchors.py models   [--json OUT.json]   # six architectures, eager vs compile

`ceilings` measures the two ceilings (device-to-device copy bandwidth counting bytes read + written;
an 8192^3 bf16 cuBLAS GEMM) and the issue's microbenchmarks in PyTorch eager and torch.compile:
sin((x+1)*2) over 2^28 f32, softmax and layernorm over 16384x4096 f32, gelu(x@W+b) bf16
8192x4096x4096 — each as time, GB/s or TFLOP/s and fraction of the measured ceiling.
`models` builds the six shared-zoo architectures in PyTorch (weights' values do not matter for
latency) at the zoo's test_data_set_0 shapes, and times eager and torch.compile (default mode) in
fp32 and bf16, plus torch.compile's cold compile time. Timing: CUDA events, median of many runs
after warm-up (triton.testing.do_bench).
"""
import argparse
import json
import math
import sys
import time

import torch
import torch.nn as nn
import torch.nn.functional as F
from triton.testing import do_bench

DEV = "cuda"


def bench_ms(fn, warmup=50, rep=300):
    return do_bench(fn, warmup=warmup, rep=rep, return_mode="median")


def ceilings():
    out = {"device": torch.cuda.get_device_name(), "sms": torch.cuda.get_device_properties(0).multi_processor_count}
    n = 1 << 30  # 4 GiB of f32 read + 4 GiB written
    src = torch.randn(n // 4, device=DEV).repeat(4)
    dst = torch.empty_like(src)
    ms = bench_ms(lambda: dst.copy_(src))
    copy_gbs = 2 * src.numel() * 4 / ms / 1e6
    out["copy_GBps"] = copy_gbs
    del src, dst
    a = torch.randn(8192, 8192, device=DEV, dtype=torch.bfloat16)
    b = torch.randn(8192, 8192, device=DEV, dtype=torch.bfloat16)
    ms = bench_ms(lambda: a @ b)
    gemm_tflops = 2 * 8192 ** 3 / ms / 1e9
    out["bf16_gemm_TFLOPs"] = gemm_tflops
    del a, b
    rows = []

    def add(name, fn, nbytes=None, flops=None):
        for mode in ("eager", "compile"):
            f = fn if mode == "eager" else torch.compile(fn)
            t0 = time.time()
            f()  # compile / warm
            torch.cuda.synchronize()
            first = time.time() - t0
            ms = bench_ms(f)
            r = {"bench": name, "mode": mode, "ms": ms, "first_call_s": first}
            if nbytes:
                r["GBps"] = nbytes / ms / 1e6
                r["frac_copy"] = r["GBps"] / copy_gbs
            if flops:
                r["TFLOPs"] = flops / ms / 1e9
                r["frac_gemm"] = r["TFLOPs"] / gemm_tflops
            rows.append(r)

    x = torch.randn(1 << 28, device=DEV)
    add("pointwise sin((x+1)*2) 2^28 f32", lambda: torch.sin((x + 1) * 2), nbytes=2 * x.numel() * 4)
    del x
    s = torch.randn(16384, 4096, device=DEV)
    add("softmax 16384x4096 f32", lambda: torch.softmax(s, dim=-1), nbytes=2 * s.numel() * 4)
    w = torch.randn(4096, device=DEV)
    bb = torch.randn(4096, device=DEV)
    add("layernorm 16384x4096 f32", lambda: F.layer_norm(s, (4096,), w, bb), nbytes=2 * s.numel() * 4)
    del s
    xa = torch.randn(8192, 4096, device=DEV, dtype=torch.bfloat16)
    wa = torch.randn(4096, 4096, device=DEV, dtype=torch.bfloat16)
    ba = torch.randn(4096, device=DEV, dtype=torch.bfloat16)
    add("gelu(x@W+b) bf16 8192x4096x4096", lambda: F.gelu(xa @ wa + ba), flops=2 * 8192 * 4096 * 4096)
    out["micro"] = rows
    return out


class MLP(nn.Module):
    def __init__(self):
        super().__init__()
        self.linear1, self.linear2, self.linear3 = nn.Linear(512, 1024), nn.Linear(1024, 512), nn.Linear(512, 10)

    def forward(self, x):
        return self.linear3(F.relu(self.linear2(F.relu(self.linear1(x)))))


class ConvNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1, self.conv2 = nn.Conv2d(3, 64, 3, padding=1), nn.Conv2d(64, 128, 3, padding=1)
        self.fc = nn.Linear(8192, 10)

    def forward(self, x):
        x = F.max_pool2d(F.relu(self.conv1(x)), 2)
        x = F.max_pool2d(F.relu(self.conv2(x)), 2)
        return self.fc(x.reshape(x.shape[0], -1))


def build(name):
    import torchvision
    import transformers
    if name == "mlp":
        return MLP(), (torch.randn(64, 512),)
    if name == "convnet":
        return ConvNet(), (torch.randn(8, 3, 32, 32),)
    if name == "resnet18":
        return torchvision.models.resnet18(weights=None), (torch.randn(2, 3, 224, 224),)
    if name == "mobilenet_v2":
        return torchvision.models.mobilenet_v2(weights=None), (torch.randn(2, 3, 224, 224),)
    if name == "bert_base":
        m = transformers.BertModel(transformers.BertConfig(), add_pooling_layer=False)
        ids = torch.randint(0, 30522, (2, 64))
        return m, (ids, torch.ones(2, 64, dtype=torch.long))
    if name == "gpt2":
        m = transformers.GPT2LMHeadModel(transformers.GPT2Config())
        return m, (torch.randint(0, 50257, (1, 16)),)
    raise ValueError(name)


def models(names):
    rows = []
    for name in names:
        for dtype in (torch.float32, torch.bfloat16):
            torch._dynamo.reset()
            m, args = build(name)
            m = m.to(DEV).eval().to(dtype)
            args = tuple(a.to(DEV) if not a.is_floating_point() else a.to(DEV, dtype) for a in args)
            with torch.inference_mode():
                eager = bench_ms(lambda: m(*args), warmup=20, rep=200)
                cm = torch.compile(m)
                t0 = time.time()
                cm(*args)
                torch.cuda.synchronize()
                compile_s = time.time() - t0
                comp = bench_ms(lambda: cm(*args), warmup=20, rep=200)
            r = {"model": name, "dtype": str(dtype).replace("torch.", ""), "eager_ms": eager,
                 "compile_ms": comp, "compile_s": compile_s}
            rows.append(r)
            print(json.dumps(r), flush=True)
    return rows


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("what", choices=["ceilings", "models"])
    ap.add_argument("--json")
    ap.add_argument("--models", default="mlp,convnet,resnet18,mobilenet_v2,bert_base,gpt2")
    a = ap.parse_args()
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    info = {"torch": torch.__version__, "gpu": torch.cuda.get_device_name(), "date": time.strftime("%Y-%m-%d")}
    if a.what == "ceilings":
        res = ceilings()
        print(f"{info['gpu']}: copy {res['copy_GBps']:.0f} GB/s, bf16 GEMM {res['bf16_gemm_TFLOPs']:.0f} TFLOP/s")
        print("| bench | mode | ms | GB/s or TFLOP/s | fraction of ceiling | first call s |")
        print("|---|---|---:|---:|---:|---:|")
        for r in res["micro"]:
            rate = f"{r['GBps']:.0f} GB/s" if "GBps" in r else f"{r['TFLOPs']:.0f} TFLOP/s"
            frac = r.get("frac_copy", r.get("frac_gemm"))
            print(f"| {r['bench']} | {r['mode']} | {r['ms']:.3f} | {rate} | {100 * frac:.0f}% | {r['first_call_s']:.1f} |")
    else:
        res = {"rows": models(a.models.split(","))}
        print("| model | dtype | eager ms | torch.compile ms | torch.compile cold compile s |")
        print("|---|---|---:|---:|---:|")
        for r in res["rows"]:
            print(f"| {r['model']} | {r['dtype']} | {r['eager_ms']:.3f} | {r['compile_ms']:.3f} | {r['compile_s']:.1f} |")
    res.update(info)
    if a.json:
        json.dump(res, open(a.json, "w"), indent=1)


if __name__ == "__main__":
    main()
