#!/usr/bin/env python3
"""ferrite on exported ONNX against PyTorch eager and torch.compile, at batch 1 and a serving batch.

    python3 scripts/gpu/onnx_serving_bench.py --jsonl OUT.jsonl [--cases NAME,...]
        [--shapes serving,b1,serving512] [--precisions f32,bf16]
        [--modes eager,inductor,inductor-cg,inductor-at,ferrite]
    python3 scripts/gpu/onnx_serving_bench.py --summarize OUT.jsonl [MORE.jsonl ...]

What runs. The architecture families of scripts/families/export_families.py (10 torchvision and 5
transformers models, seeded random weights, BatchNorm statistics calibrated, text models returning
their last hidden state), each built once in PyTorch (export_families.build_module) and exported
once to ONNX in f32 with a dynamic batch (and sequence) axis (export_families.export; the file is
cached under --onnx-dir, and re-exported when it was made by other torch / torchvision /
transformers versions, whose seeded weights could differ). For each shape and precision:

* eager: the PyTorch module (f32; bf16 = ``model.to(torch.bfloat16)`` with image inputs cast to
  bf16, token ids left int64).
* inductor / inductor-cg / inductor-at: ``torch.compile`` of that module with mode ``default`` /
  ``reduce-overhead`` (CUDA graphs) / ``max-autotune-no-cudagraphs``, each after
  ``torch._dynamo.reset()``. The table takes the fastest of those that ran and passed the check.
* ferrite: ``ferrite.Session(model.onnx, device, precision=...)`` on the same f32 ONNX file;
  bf16 is ``precision="bf16"`` (ferrite stores float tensors in bf16 and keeps the model's f32
  interface, so it is fed the f32 inputs). CUDA torch tensors in, CUDA torch tensors out, the run
  ordered on torch's current stream.

Shapes: ``b1`` = 1 image 3x224x224 / 1x128 tokens; ``serving`` = 32 images / 8x128 tokens;
``serving512`` = 8x512 tokens (text models only; skipped for images). Token inputs: input_ids
random in [0, 1000), attention_mask all ones, and for t5_small decoder_input_ids of half the
sequence length (as export_families makes them). Inputs are random, seeded, made once per
(case, shape) and kept on the device.

How it is measured (TF32 off: torch.backends.cuda.matmul.allow_tf32 = cudnn.allow_tf32 = False;
cudnn.benchmark off unless --cudnn-benchmark; everything under torch.no_grad()):

* first_call_s: wall time of the first call including compilation (torch.compile is lazy; for
  ferrite it includes building the Session, reported alone as load_s), synchronized.
* device_ms: triton.testing.do_bench median (CUDA events around each call, the L2 cache flushed
  between calls, inputs resident, outputs left on the device) over --rep-ms after --warmup-ms.
* wall_ms: mean of N back-to-back calls timed with time.perf_counter, torch.cuda.synchronize()
  only before and after them (N = --wall-reps, fewer for slow rows: about --rep-ms in all, at
  least 10): what a serving loop that does not wait on each call sees, host overhead included.
* check: each compiled mode's output (ferrite's included) against eager's in the same precision:
  max |diff| and max |diff| / max |eager|. FAIL: a shape mismatch, a NaN/Inf, or (f32) a relative
  diff above 1e-3; bf16 is judged as PyTorch's benchmark harness judges low precision: against
  the f32 eager output, a mode's relative error may be at most 3x bf16 eager's own plus 1e-3.
* fallbacks (ferrite): host fallbacks of the first run (steps that ran on the host over device
  values, copying them back), with the host steps over data and the fallback op types, read from
  the ``[fallback]`` summary line that ferrite prints under FERRITE_LOG=fallback (ferrite's
  stats() does not carry them), captured from stderr during the first run.

Each (case, shape, precision, mode) row is appended to --jsonl as soon as it is measured (a killed
job keeps what it measured; --resume skips rows already there), and a mode that fails (compile
error, OOM) records {"error": ...} and the rest go on. Progress goes to stderr with timestamps.
The end prints one markdown table: per (case, shape, precision) eager ms, the best torch.compile
ms and its mode, ferrite ms, their ratio (best compile / ferrite: > 1 means ferrite is faster),
the same ratio of wall times, ferrite's wall ms, fallbacks and the checks; then the geomean of the
ratios per (shape, precision). --summarize prints that table from jsonl files alone (merged from
several jobs: the last good row of each key wins).

A full run (15 cases x 2 shapes, + serving512 for the 5 text models, x 2 precisions x 5 modes,
with max-autotune) takes hours; split it into jobs of a few cases each, all appending to the same
--jsonl (--resume lets a job that was cut off be run again as it was), e.g.:

    python3 scripts/gpu/onnx_serving_bench.py --export-only --cases resnet50,...  # ONNX only
    python3 scripts/gpu/onnx_serving_bench.py --cases resnet50,squeezenet1_1 --jsonl r.jsonl
    python3 scripts/gpu/onnx_serving_bench.py --cases distilbert --modes eager,inductor,ferrite \\
        --shapes serving,serving512 --jsonl r.jsonl --resume
    python3 scripts/gpu/onnx_serving_bench.py --summarize r.jsonl

Local smoke test without a GPU: --device cpu (timing with time.perf_counter medians; the
torch.compile modes are skipped there with a note unless --cpu-compile):

    nice .venv/bin/python scripts/gpu/onnx_serving_bench.py --device cpu --cases squeezenet1_1 \\
        --shapes b1 --precisions f32 --modes eager,ferrite --jsonl /tmp/osb.jsonl
"""

from __future__ import annotations

import argparse
import contextlib
import copy
import datetime
import gc
import json
import math
import os
import re
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "families"))

import torch  # noqa: E402

import export_families as ef  # noqa: E402

SHAPES = ("serving", "b1", "serving512")
PRECISIONS = ("f32", "bf16")
MODES = ("eager", "inductor", "inductor-cg", "inductor-at", "ferrite")
COMPILE_MODES = {"inductor": "default", "inductor-cg": "reduce-overhead",
                 "inductor-at": "max-autotune-no-cudagraphs"}
DTYPES = {"f32": torch.float32, "bf16": torch.bfloat16}
TOLERANCE = {"f32": 1e-3, "bf16": 5e-2}  # max |diff| / max |eager| above this: FAIL
BF16_MULTIPLIER = 3.0  # bf16: error vs f32 eager at most this times bf16 eager's (see check)
SERVING_IMAGES = 32
TOKENS = {"b1": (1, 128), "serving": (8, 128), "serving512": (8, 512)}
INPUT_SEED = 1234


def log(msg):
    print(f"[{datetime.datetime.now().strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


# ---------------------------------------------------------------------------------------------
# Models, ONNX files and inputs


def _versions():
    import torchvision
    import transformers

    return {"torch": torch.__version__, "torchvision": torchvision.__version__,
            "transformers": transformers.__version__, "recipe": ef.RECIPE}


def onnx_path(name, onnx_dir, force=False):
    """The family's f32 ONNX file under onnx_dir, exported by export_families unless a file
    stamped with this environment's versions is there already. An unstamped file (exported by
    export_families.py itself) is used as it is: the check against eager catches other weights."""
    d = os.path.join(onnx_dir, name)
    path = os.path.join(d, "model.onnx")
    stamp = os.path.join(d, "versions.json")
    want = _versions()
    if os.path.exists(path) and not force:
        if not os.path.exists(stamp):
            log(f"{name}: using {path} as it is (no versions.json: not exported by this script)")
            return path
        with open(stamp) as f:
            if json.load(f) == want:
                return path
        log(f"{name}: {path} was exported with other versions; exporting again")
    t0 = time.time()
    log(f"{name}: exporting to {path}")
    ef.export(name, onnx_dir, force=True)
    with open(stamp, "w") as f:
        json.dump(want, f)
    log(f"{name}: exported in {time.time() - t0:.1f} s")
    return path


def applies(name, shape):
    return not (shape == "serving512" and name in ef.VISION)


def shape_dims(name, shape):
    if name in ef.VISION:
        return f"{1 if shape == 'b1' else SERVING_IMAGES}x3x{ef.VISION_SIZE}x{ef.VISION_SIZE}"
    return "%dx%d" % TOKENS[shape]


def make_inputs(name, shape, device):
    """Named f32 / int64 inputs, seeded, on the device, named as export_families exports them."""
    g = torch.Generator().manual_seed(INPUT_SEED)
    if name in ef.VISION:
        batch = 1 if shape == "b1" else SERVING_IMAGES
        feeds = {"input": torch.randn(batch, 3, ef.VISION_SIZE, ef.VISION_SIZE, generator=g)}
    else:
        batch, seq = TOKENS[shape]
        feeds = {"input_ids": torch.randint(0, 1000, (batch, seq), generator=g),
                 "attention_mask": torch.ones(batch, seq, dtype=torch.int64)}
        if name == "t5_small":
            feeds["decoder_input_ids"] = torch.randint(0, 1000, (batch, seq // 2), generator=g)
    want = list(ef._inputs(name, "b1"))  # the exported input names, in order
    assert list(feeds) == want, (list(feeds), want)
    return {k: v.to(device) for k, v in feeds.items()}


def cast_inputs(feeds, dtype):
    return {k: v.to(dtype) if v.is_floating_point() else v for k, v in feeds.items()}


# ---------------------------------------------------------------------------------------------
# Timing


class Timer:
    def __init__(self, device, warmup_ms, rep_ms, wall_reps):
        self.cuda = device.startswith("cuda")
        self.warmup_ms, self.rep_ms, self.wall_reps = warmup_ms, rep_ms, wall_reps

    def sync(self):
        if self.cuda:
            torch.cuda.synchronize()

    def device_ms(self, fn):
        if self.cuda:
            from triton.testing import do_bench

            return do_bench(fn, warmup=self.warmup_ms, rep=self.rep_ms, return_mode="median")
        # CPU smoke test: perf_counter median, about rep_ms in all, at least 3 calls.
        t_end = time.perf_counter() + self.warmup_ms / 1e3
        fn()
        while time.perf_counter() < t_end:
            fn()
        samples, t_end = [], time.perf_counter() + self.rep_ms / 1e3
        while len(samples) < 3 or time.perf_counter() < t_end:
            t0 = time.perf_counter()
            fn()
            samples.append((time.perf_counter() - t0) * 1e3)
        samples.sort()
        return samples[len(samples) // 2]

    def wall_ms(self, fn, device_ms):
        n = self.wall_reps
        if device_ms and device_ms > 0:
            n = max(10 if self.cuda else 3, min(n, math.ceil(self.rep_ms / device_ms)))
        fn()
        self.sync()
        t0 = time.perf_counter()
        for _ in range(n):
            fn()
        self.sync()
        return (time.perf_counter() - t0) * 1e3 / n, n


# ---------------------------------------------------------------------------------------------
# Checks and ferrite's fallback count


def _rel(out, ref):
    """max |out - ref| / max |ref| (in f32), and the max |diff|."""
    o, r = out.detach().float(), ref.detach().float()
    max_abs = (o - r).abs().max().item() if o.numel() else 0.0
    scale = r.abs().max().item() if r.numel() else 0.0
    return (max_abs / scale if scale > 0 else (0.0 if max_abs == 0 else math.inf)), max_abs, scale


def check(out, ref, precision, ref32=None):
    """out vs eager's ref (same precision): {max_abs, rel, status}. FAIL on a shape mismatch,
    NaN/Inf, or too large an error. f32: rel above TOLERANCE["f32"]. bf16, as PyTorch's own
    benchmark harness judges low precision (torch._dynamo.utils.same with an fp64 reference):
    against the f32 eager output ref32, the mode's error may be at most BF16_MULTIPLIER times
    bf16 eager's own error plus TOLERANCE["f32"] (two bf16 computations of a deep net with random
    weights differ by several percent of the output range: no fixed bound fits every model)."""
    if not isinstance(out, torch.Tensor):
        return {"status": "FAIL", "why": f"output is {type(out).__name__}"}
    if tuple(out.shape) != tuple(ref.shape):
        return {"status": "FAIL", "why": f"shape {list(out.shape)} vs eager {list(ref.shape)}"}
    if not torch.isfinite(out.detach().float()).all():
        return {"status": "FAIL", "why": "NaN/Inf in output"}
    rel, max_abs, scale = _rel(out, ref)
    res = {"max_abs": max_abs, "max_ref": scale, "rel": rel}
    if precision == "f32" or ref32 is None:
        res["status"] = "ok" if rel <= TOLERANCE[precision] else "FAIL"
    else:
        rel32 = _rel(out, ref32)[0]
        eager_rel32 = _rel(ref, ref32)[0]
        bound = BF16_MULTIPLIER * eager_rel32 + TOLERANCE["f32"]
        res.update(rel_f32=rel32, eager_rel_f32=eager_rel32, bound_f32=bound,
                   status="ok" if rel32 <= bound else "FAIL")
    if not math.isfinite(scale):
        res.update(status="no-ref", why="eager output has NaN/Inf")
    return res


@contextlib.contextmanager
def captured_stderr(into):
    """Everything written to file descriptor 2 (C++ included) goes to a file; its text is put
    in into["text"] and echoed to stderr afterwards. The file is named and kept if the process
    dies meanwhile (a crash in ferrite's first run), so its messages can still be read."""
    sys.stderr.flush()
    fd, name = tempfile.mkstemp(prefix="onnx_serving_bench.stderr.", suffix=".log")
    log(f"  (stderr goes to {name} until the first run returns)")
    saved = os.dup(2)
    os.dup2(fd, 2)
    try:
        yield into
    finally:
        sys.stderr.flush()
        os.dup2(saved, 2)
        os.close(saved)
        os.lseek(fd, 0, os.SEEK_SET)
        with os.fdopen(fd, "rb") as f:
            into["text"] = f.read().decode(errors="replace")
        os.unlink(name)
        if into["text"]:
            sys.stderr.write(into["text"][-4000:])
            sys.stderr.flush()


_SUMMARY = re.compile(
    r"\[fallback\] .*?: (\d+) kernel launches, (\d+) device library steps, (\d+) host steps on "
    r"host-resident values \((\d+) reused[^)]*\), (\d+) host fallbacks copying (\d+) bytes back; "
    r"(\d+) host steps on data[^:;\n]*(?:: ([^;\n]*))?(?:; fallbacks: ([^\n]*))?")


def parse_fallbacks(text):
    """Sums ferrite's FERRITE_LOG=fallback summary lines (one per compiled model, printed after
    its first run; model.cpp log_run); None when there is none."""
    found = _SUMMARY.findall(text or "")
    if not found:
        return None
    res = {"kernels": 0, "library_steps": 0, "host_resident_steps": 0, "fallbacks": 0,
           "fallback_d2h_bytes": 0, "host_data_steps": 0, "host_data_ops": "", "fallback_ops": ""}
    for k, lib, hr, _cached, fb, nbytes, nd, data_ops, fb_ops in found:
        res["kernels"] += int(k)
        res["library_steps"] += int(lib)
        res["host_resident_steps"] += int(hr)
        res["fallbacks"] += int(fb)
        res["fallback_d2h_bytes"] += int(nbytes)
        res["host_data_steps"] += int(nd)
        res["host_data_ops"] = " ".join(filter(None, [res["host_data_ops"], data_ops.strip()]))
        res["fallback_ops"] = " ".join(filter(None, [res["fallback_ops"], fb_ops.strip()]))
    return res


# ---------------------------------------------------------------------------------------------
# One row


def free_memory(device):
    import torch._dynamo

    torch._dynamo.reset()
    gc.collect()
    if device.startswith("cuda"):
        torch.cuda.empty_cache()


def run_mode(mode, model, feeds, feeds_f32, path, precision, ref, timer, args, ref32=None):
    """Times one mode and checks it against ref; returns the row's measurements."""
    row = {}
    fn = sess = compiled = out = None
    try:
        free_memory(args.device)
        if mode == "ferrite":
            import ferrite

            cap = {}
            old_log = os.environ.get("FERRITE_LOG")
            os.environ["FERRITE_LOG"] = ",".join(filter(None, [old_log, "fallback"]))
            try:
                with captured_stderr(cap):
                    t0 = time.perf_counter()
                    sess = ferrite.Session(path, device=args.device, precision=precision)
                    row["load_s"] = time.perf_counter() - t0
                    out = sess.run(feeds_f32)
                    timer.sync()
                    row["first_call_s"] = time.perf_counter() - t0
            finally:
                if old_log is None:
                    os.environ.pop("FERRITE_LOG", None)
                else:
                    os.environ["FERRITE_LOG"] = old_log
            fb = parse_fallbacks(cap.get("text"))
            row["fallbacks"] = fb["fallbacks"] if fb else None
            row["fallback_detail"] = fb
            row["n_outputs"] = len(out)
            out = out[0]

            def fn():
                return sess.run(feeds_f32)
        else:
            if mode == "eager":
                fn = model
            else:
                compiled = torch.compile(model, mode=COMPILE_MODES[mode])
                fn = compiled
            pos = tuple(feeds.values())  # positional, as export_families exports them
            t0 = time.perf_counter()
            out = fn(*pos)
            timer.sync()
            row["first_call_s"] = time.perf_counter() - t0
            call = fn

            def fn():
                return call(*pos)
        if ref is not None and mode != "eager":
            row["check"] = check(out.clone(), ref, precision, ref32)
        elif mode == "eager":
            row["check"] = {"status": "ref"}
        else:
            row["check"] = {"status": "no-ref", "why": "eager failed"}
        out = None
        row["device_ms"] = timer.device_ms(fn)
        row["wall_ms"], row["wall_calls"] = timer.wall_ms(fn, row["device_ms"])
        if sess is not None:
            try:
                row["ferrite_stats"] = sess.stats()
            except Exception as e:  # noqa: BLE001
                row["ferrite_stats"] = {"error": str(e)[:200]}
    except Exception as e:  # noqa: BLE001  (a mode that fails is recorded, the rest go on)
        row["error"] = f"{type(e).__name__}: {str(e)[:600]}"
    finally:
        del fn, sess, compiled, out
        free_memory(args.device)
    return row


# ---------------------------------------------------------------------------------------------
# The job


def row_key(r):
    return (r.get("case"), r.get("shape"), r.get("precision"), r.get("mode"))


def read_rows(paths):
    """Rows of jsonl files, the last good row per key (an error row only where none is good)."""
    rows = {}
    for p in paths:
        with open(p) as f:
            for line in f:
                line = line.strip()
                if not line:
                    continue
                try:
                    r = json.loads(line)
                except json.JSONDecodeError:
                    continue  # a line cut by a killed job
                k = row_key(r)
                if "error" in r and k in rows and "error" not in rows[k]:
                    continue
                rows[k] = r
    return list(rows.values())


def env_info(device):
    info = {"torch": torch.__version__, "device": device}
    if device.startswith("cuda"):
        info["gpu"] = torch.cuda.get_device_name()
    else:
        info["torch_threads"] = torch.get_num_threads()
    return info


def run(args):
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    torch.backends.cudnn.benchmark = bool(args.cudnn_benchmark)
    if args.threads:
        torch.set_num_threads(args.threads)
    cases, shapes, precisions, modes = args.cases, args.shapes, args.precisions, args.modes
    if args.device == "cpu" and not args.cpu_compile:
        skipped = [m for m in modes if m in COMPILE_MODES]
        if skipped:
            log(f"note: --device cpu: skipping {','.join(skipped)} (a GPU benchmark; "
                "--cpu-compile runs them)")
        modes = [m for m in modes if m not in COMPILE_MODES]
    done = set()
    if args.resume and args.jsonl and os.path.exists(args.jsonl):
        done = {row_key(r) for r in read_rows([args.jsonl]) if "error" not in r}
        log(f"--resume: {len(done)} rows already in {args.jsonl}")
    env = env_info(args.device)
    log(f"{env}; cases {','.join(cases)}; shapes {','.join(shapes)}; precisions "
        f"{','.join(precisions)}; modes {','.join(modes)}")
    rows = []
    timer = Timer(args.device, args.warmup_ms, args.rep_ms, args.wall_reps)
    for name in cases:
        todo = [(s, p, m) for s in shapes if applies(name, s) for p in precisions for m in modes
                if (name, s, p, m) not in done]
        for s in shapes:
            if not applies(name, s):
                log(f"{name}: shape {s} is for text models; skipped")
        if not todo and not args.export_only:
            log(f"{name}: every row done already")
            continue
        t_case = time.time()
        log(f"{name}: start ({ef.FAMILIES[name][0]})")
        try:
            path = onnx_path(name, args.onnx_dir, args.force_export)
        except Exception as e:  # noqa: BLE001
            log(f"{name}: export failed: {type(e).__name__}: {e}")
            for s, p, m in todo:
                r = {"case": name, "shape": s, "precision": p, "mode": m,
                     "error": f"export: {type(e).__name__}: {str(e)[:600]}"}
                rows.append(r)
                emit(r, args.jsonl)
            continue
        if args.export_only:
            continue
        base = ef.build_module(name)  # f32, CPU; the weights the ONNX file has
        with torch.no_grad():
            for s in shapes:
                if not applies(name, s):
                    continue
                feeds_f32 = make_inputs(name, s, args.device)
                for p in precisions:
                    want = [m for m in modes if (s, p, m) in todo]
                    if not want:
                        continue
                    rows += run_group(name, s, p, want, base, feeds_f32, path, timer, env, args)
                del feeds_f32
        del base
        free_memory(args.device)
        log(f"{name}: end ({time.time() - t_case:.0f} s)")
    return rows


def run_group(name, shape, precision, modes, base, feeds_f32, path, timer, env, args):
    """Every mode of one (case, shape, precision)."""
    rows = []
    dims = shape_dims(name, shape)
    tag = f"{name} {shape} ({dims}) {precision}"
    model = feeds = ref = ref32 = ref_first_s = None
    need_torch = any(m != "ferrite" for m in modes)
    try:
        model = copy.deepcopy(base).to(args.device, DTYPES[precision]).eval()
        feeds = cast_inputs(feeds_f32, DTYPES[precision])
        log(f"{tag}: eager reference")
        t0 = time.perf_counter()
        ref = model(*feeds.values())
        timer.sync()
        ref_first_s = time.perf_counter() - t0  # eager's first call
        ref = ref.detach().clone()
        ref_error = None
        ref32 = None
        if precision != "f32":  # the f32 eager output, for check()
            with torch.no_grad():
                m32 = copy.deepcopy(base).to(args.device).eval()
                ref32 = m32(*feeds_f32.values()).detach().float().clone()
            del m32
    except Exception as e:  # noqa: BLE001
        ref_error = f"{type(e).__name__}: {str(e)[:600]}"
        log(f"{tag}: eager reference failed: {ref_error}")
        ref = None
        if need_torch:
            model = feeds = None
            free_memory(args.device)
    if not need_torch:
        model = feeds = None
        free_memory(args.device)
    for mode in modes:
        log(f"{tag} {mode}: start")
        r = {"case": name, "family": ef.FAMILIES[name][0], "shape": shape, "dims": dims,
             "precision": precision, "mode": mode}
        if mode != "ferrite" and model is None:
            r["error"] = f"eager model: {ref_error}"
        else:
            r.update(run_mode(mode, model, feeds, feeds_f32, path, precision, ref, timer, args,
                                      ref32))
            if mode == "eager" and "error" not in r and ref_first_s is not None:
                r["first_call_s"] = ref_first_s
        r.update(env)
        r["time"] = datetime.datetime.now().isoformat(timespec="seconds")
        rows.append(r)
        emit(r, args.jsonl)
        log(f"{tag} {mode}: end {brief(r)}")
    del model, feeds, ref
    free_memory(args.device)
    return rows


def brief(r):
    if "error" in r:
        return "ERROR " + r["error"][:200]
    c = r.get("check", {})
    fb = f" fallbacks {r['fallbacks']}" if "fallbacks" in r else ""
    diff = f" rel {c['rel']:.2e} abs {c['max_abs']:.2e}" if "rel" in c else ""
    return (f"device {r['device_ms']:.3f} ms, wall {r['wall_ms']:.3f} ms, first call "
            f"{r['first_call_s']:.1f} s, check {c.get('status')}{diff} {c.get('why', '')}{fb}")


def emit(r, path):
    if path:
        os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
        with open(path, "a") as f:
            f.write(json.dumps(r) + "\n")


# ---------------------------------------------------------------------------------------------
# The table


def _check_text(c):
    if "rel_f32" in c:  # bf16: error vs f32 eager, and the bound from bf16 eager's
        return f"rel {c['rel_f32']:.1e} vs f32, bound {c['bound_f32']:.1e}"
    return f"rel {c['rel']:.1e}"


def _ok(r):
    return r is not None and "error" not in r and r.get("check", {}).get("status") in ("ok", "ref")


def _fmt(x, spec=".3f"):
    return "–" if x is None else format(x, spec)


def table(rows):
    groups = {}
    for r in rows:
        groups.setdefault((r["case"], r["shape"], r["precision"]), {})[r["mode"]] = r
    order_c = {n: i for i, n in enumerate(ef.FAMILIES)}
    order_s = {n: i for i, n in enumerate(SHAPES)}
    order_p = {n: i for i, n in enumerate(PRECISIONS)}
    keys = sorted(groups, key=lambda k: (order_s.get(k[1], 9), order_p.get(k[2], 9),
                                         order_c.get(k[0], 99), k))
    lines = ["| case | shape | precision | eager ms | best compile ms (mode) | ferrite ms | "
             "compile/ferrite | ferrite wall ms | wall compile/ferrite | fallbacks | check |",
             "|---|---|---|---|---|---|---|---|---|---|---|"]
    ratios, wall_ratios = {}, {}
    for k in keys:
        g = groups[k]
        eager, fer = g.get("eager"), g.get("ferrite")
        good = [(g[m]["device_ms"], m) for m in COMPILE_MODES if _ok(g.get(m))]
        best = min(good) if good else None
        good_wall = [g[m]["wall_ms"] for m in COMPILE_MODES if _ok(g.get(m))]
        checks = []
        for m in MODES:
            r = g.get(m)
            if r is None:
                continue
            if "error" in r:
                checks.append(f"{m}: error")
            elif r.get("check", {}).get("status") not in ("ok", "ref"):
                c = r["check"]
                why = _check_text(c) if "rel" in c else c.get("why", "")
                checks.append(f"{m}: {c['status']} ({why})")
        fer_c = fer.get("check", {}) if fer and "error" not in fer else {}
        if "rel" in fer_c and fer_c.get("status") == "ok":
            checks.insert(0, f"ok (ferrite {_check_text(fer_c)})")
        ratio = wall_ratio = None
        if best and _ok(fer):
            ratio = best[0] / fer["device_ms"]
            ratios.setdefault(k[1:], []).append(ratio)
            wall_ratio = min(good_wall) / fer["wall_ms"]
            wall_ratios.setdefault(k[1:], []).append(wall_ratio)
        dims = next(iter(g.values())).get("dims", "")
        fb = fer.get("fallbacks") if fer and "error" not in fer else None
        lines.append(
            f"| {k[0]} | {k[1]} {dims} | {k[2]} | "
            f"{_fmt(eager['device_ms'] if _ok(eager) else None)} | "
            f"{_fmt(best[0]) + ' (' + best[1] + ')' if best else '–'} | "
            f"{_fmt(fer['device_ms'] if fer and 'error' not in fer else None)} | "
            f"{_fmt(ratio, '.2f')} | "
            f"{_fmt(fer['wall_ms'] if fer and 'error' not in fer else None)} | "
            f"{_fmt(wall_ratio, '.2f')} | {'–' if fb is None else fb} | "
            f"{'; '.join(checks) or 'ok'} |")
    lines += ["", "ms: device time (do_bench median on cuda); best compile: the fastest torch.compile "
              "mode that ran and passed the check; compile/ferrite > 1: ferrite faster; wall "
              "compile/ferrite: the best compile mode's wall time over ferrite's (means of "
              "back-to-back calls); fallbacks: ferrite's host fallbacks in its first run; check: "
              "ferrite's relative diff vs eager, then every mode that failed or errored.",
              "", "Geomean of best torch.compile / ferrite (> 1: ferrite faster), over the rows "
              "where both ran and passed the check:", "",
              "| shape | precision | rows | device-time ratio | wall-time ratio |",
              "|---|---|---|---|---|"]
    for sp in sorted(ratios, key=lambda k: (order_s.get(k[0], 9), order_p.get(k[1], 9))):
        gm = math.exp(sum(map(math.log, ratios[sp])) / len(ratios[sp]))
        gw = math.exp(sum(map(math.log, wall_ratios[sp])) / len(wall_ratios[sp]))
        lines.append(f"| {sp[0]} | {sp[1]} | {len(ratios[sp])} | {gm:.2f} | {gw:.2f} |")
    if not ratios:
        lines.append("| – | – | 0 | – | – |")
    envs = sorted({f"{r.get('gpu', r.get('device', '?'))}, torch {r.get('torch', '?')}"
                   for r in rows if "torch" in r})
    if envs:
        lines += ["", "Measured on: " + "; ".join(envs)]
    return "\n".join(lines)


# ---------------------------------------------------------------------------------------------


def _list(value, allowed, what):
    items = [x.strip() for x in value.split(",") if x.strip()]
    bad = [x for x in items if x not in allowed]
    if bad:
        raise argparse.ArgumentTypeError(f"unknown {what} {bad}; one of {', '.join(allowed)}")
    return items


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--cases", default=",".join(ef.FAMILIES),
                    type=lambda v: _list(v, list(ef.FAMILIES), "case"),
                    help="comma-separated families (default: all 15; --list shows them)")
    ap.add_argument("--shapes", default="serving,b1", type=lambda v: _list(v, SHAPES, "shape"),
                    help="serving (32 images / 8x128 tokens), b1 (1 image / 1x128 tokens), "
                         "serving512 (8x512 tokens, text models only) (default: serving,b1)")
    ap.add_argument("--precisions", default="f32,bf16",
                    type=lambda v: _list(v, PRECISIONS, "precision"), help="default: f32,bf16")
    ap.add_argument("--modes", default=",".join(MODES), type=lambda v: _list(v, MODES, "mode"),
                    help="default: all of " + ",".join(MODES))
    ap.add_argument("--onnx-dir", default="/tmp/onnx-serving",
                    help="where the exported ONNX files are cached (default: %(default)s)")
    ap.add_argument("--force-export", action="store_true", help="export again even if cached")
    ap.add_argument("--export-only", action="store_true",
                    help="only export the cases' ONNX files (e.g. in a job of its own)")
    ap.add_argument("--jsonl", help="append one JSON object per measured row to this file")
    ap.add_argument("--resume", action="store_true",
                    help="skip rows that --jsonl already has without an error")
    ap.add_argument("--summarize", nargs="+", metavar="FILE.jsonl",
                    help="only print the table of these jsonl files (merged) and exit")
    ap.add_argument("--device", default="cuda",
                    help="cuda (default), or cpu for a local smoke test only")
    ap.add_argument("--warmup-ms", type=float, default=50.0,
                    help="do_bench warm-up, ms (default %(default)s)")
    ap.add_argument("--rep-ms", type=float, default=300.0,
                    help="do_bench measuring time, ms; also bounds the wall-time loop "
                         "(default %(default)s)")
    ap.add_argument("--wall-reps", type=int, default=200,
                    help="back-to-back calls for wall time, at most (default %(default)s; fewer "
                         "when they would take longer than --rep-ms, at least 10)")
    ap.add_argument("--cudnn-benchmark", action="store_true",
                    help="torch.backends.cudnn.benchmark = True for the torch modes")
    ap.add_argument("--cpu-compile", action="store_true",
                    help="with --device cpu, run the torch.compile modes too")
    ap.add_argument("--threads", type=int, default=0, help="torch.set_num_threads (0: default)")
    ap.add_argument("--list", action="store_true", help="print the cases and exit")
    args = ap.parse_args()

    if args.list:
        for n, (fam, _) in ef.FAMILIES.items():
            print(f"{n}\t{'image' if n in ef.VISION else 'text'}\t{fam}")
        return 0
    if args.summarize:
        print(table(read_rows(args.summarize)))
        return 0
    if args.device.startswith("cuda") and not torch.cuda.is_available():
        ap.error("--device cuda but torch sees no GPU (--device cpu for a local smoke test)")
    if not args.device.startswith(("cuda", "cpu")):
        ap.error("--device is cuda or cpu")
    rows = run(args)
    if args.export_only:
        return 0
    if args.jsonl:  # the table of everything the file holds, earlier jobs included
        print(table(read_rows([args.jsonl])))
    else:
        print(table(rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
