"""Decoder-stack ONNX models of any size without ever holding their weights: the graph is exported
from a model on PyTorch's meta device, and the weights are random bf16 values in one file that
the initializers point into (external data), written separately.

    python3 scripts/gpu/make_decoder_onnx.py graph llama-7b DIR     # DIR/model.onnx (no weights)
    python3 scripts/gpu/make_decoder_onnx.py weights DIR            # DIR/weights.bin
    python3 scripts/gpu/make_decoder_onnx.py eager DIR --ids 2x16   # torch eager on the same weights
    python3 scripts/gpu/make_decoder_onnx.py graph llama-7b DIR --decode  # one decoding step

Why: a 70B-parameter model is 141 GB in bf16. Exporting it the usual way needs those weights in
host memory (twice), and writing them takes minutes of disk. Here the graph of any size exports
in seconds on a laptop, and `weights.bin` is at most a few GiB: every matrix is a 4096-aligned
window into it, so the windows of different layers overlap. The numbers are random either way;
what matters for timing and memory is that every initializer is its own tensor of the model's
real shape (ferrite maps external data, so loading costs nothing until a rank copies its shard).

Norm weights are ones, the rotary table is the real one, biases and matrices are N(0, 0.02).
`eager` loads the same values into the transformers model, so a small config checks ferrite
against PyTorch on exactly these weights.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import sys
import time

import numpy as np

# name: (family, hidden, layers, heads, kv heads, intermediate, vocab)
CONFIGS = {
    "llama-tiny": ("llama", 64, 2, 8, 4, 128, 96),
    "llama-small": ("llama", 512, 8, 8, 4, 1408, 4096),  # for CPU checks of the bf16 drift
    "llama-1b": ("llama", 2048, 16, 32, 8, 5632, 32000),
    "llama-7b": ("llama", 4096, 32, 32, 32, 11008, 32000),  # Llama-2-7B's shape
    "llama-70b": ("llama", 8192, 80, 64, 8, 28672, 128256),  # Llama-3-70B's shape
    "llama-70b-40l": ("llama", 8192, 40, 64, 8, 28672, 128256),  # its first 40 layers
    # Qwen1.5-110B's shape as a Llama (no q/k/v biases): 111 B parameters, 207 GiB in bf16, more
    # than one H200 (140 GiB) or H100 holds
    "llama-110b": ("llama", 8192, 80, 64, 8, 49152, 152064),
    "gpt2-tiny": ("gpt2", 64, 2, 8, 8, 256, 96),
    "gpt2-xl": ("gpt2", 1600, 48, 25, 25, 6400, 50257),
}

WINDOW_ALIGN = 4096
MIN_EXTERNAL = 1 << 20
CHUNK = 64 << 20  # random bytes generated once, repeated through weights.bin


def hf_config(name: str):
    fam, h, layers, heads, kv, inter, vocab = CONFIGS[name]
    if fam == "llama":
        from transformers import LlamaConfig
        theta = 500000.0 if vocab == 128256 else 10000.0
        cfg = LlamaConfig(vocab_size=vocab, hidden_size=h, intermediate_size=inter,
                          num_hidden_layers=layers, num_attention_heads=heads,
                          num_key_value_heads=kv, max_position_embeddings=8192, rope_theta=theta)
    else:
        from transformers import GPT2Config
        cfg = GPT2Config(vocab_size=vocab, n_embd=h, n_layer=layers, n_head=heads,
                         n_inner=inter, n_positions=1024)
    # Eager attention: its matmuls and softmax export as themselves (ferrite fuses them), where the
    # exporter's SDPA decomposition merges batch and heads in a view no head split can follow.
    cfg._attn_implementation = "eager"
    return fam, cfg


def hf_model(name: str, device: str = "meta"):
    import torch
    fam, cfg = hf_config(name)
    if fam == "llama":
        from transformers import LlamaModel as cls
    else:
        from transformers import GPT2Model as cls
    with torch.device(device):
        return cls(cfg).to(torch.bfloat16).eval()


class Hidden:  # built lazily so that `weights` needs only numpy
    @staticmethod
    def wrap(m):
        import torch

        class H(torch.nn.Module):
            def __init__(self):
                super().__init__()
                self.m = m

            def forward(self, ids):
                return self.m(input_ids=ids, use_cache=False).last_hidden_state
        return H()


class Decode:
    """One decoding step: the new tokens' ids and every layer's past keys and values in
    (`past_key_<i>`, `past_value_<i>`: batch x kv heads x past x head dim), the new tokens'
    hidden state out. The step appends its keys and values to the past (the concatenation
    transformers' DynamicCache makes) and attends over all of them; the grown cache is not an
    output, so that a timed step moves no more than the model's own work."""

    @staticmethod
    def wrap(m):
        import torch
        from transformers import DynamicCache

        class D(torch.nn.Module):
            def __init__(self):
                super().__init__()
                self.m = m

            def forward(self, ids, *past):
                cache = DynamicCache(ddp_cache_data=[(past[2 * i], past[2 * i + 1])
                                                     for i in range(len(past) // 2)])
                return self.m(input_ids=ids, past_key_values=cache,
                              use_cache=True).last_hidden_state
        return D()

    @staticmethod
    def past_shape(config: str, batch: int, past: int) -> list[int]:
        _, h, _, heads, kv, _, _ = CONFIGS[config]
        return [batch, kv, past, h // heads]

    @staticmethod
    def names(config: str) -> list[str]:
        return [f"past_{w}_{i}" for i in range(CONFIGS[config][2]) for w in ("key", "value")]


def export_program(config: str, decode: bool, device: str):
    """torch.onnx's program of the family model: the prefill graph (token ids -> hidden) or, with
    `decode`, one decoding step (see Decode). Batch, sequence and past lengths are symbolic."""
    import torch
    m = hf_model(config, device=device)
    batch = torch.export.Dim("batch", max=64)
    if not decode:
        ids = torch.zeros((2, 16), dtype=torch.int64, device=device)
        dims = ({0: batch, 1: torch.export.Dim("seq", max=1024)},)
        return m, torch.onnx.export(Hidden.wrap(m), (ids,), None, input_names=["input_ids"],
                                    output_names=["hidden"], dynamic_shapes=dims,
                                    opset_version=18, dynamo=True, optimize=False)
    ids = torch.zeros((2, 1), dtype=torch.int64, device=device)
    names = Decode.names(config)
    past = tuple(torch.zeros(Decode.past_shape(config, 2, 16), dtype=torch.bfloat16,
                             device=device) for _ in names)
    plen = torch.export.Dim("past", max=8192)
    dims = ({0: batch}, tuple({0: batch, 2: plen} for _ in names))  # forward(ids, *past)
    return m, torch.onnx.export(Decode.wrap(m), (ids,) + past, None,
                                input_names=["input_ids"] + names, output_names=["hidden"],
                                dynamic_shapes=dims, opset_version=18, dynamo=True,
                                optimize=False)


def rotary_table(name: str) -> np.ndarray:
    """The Llama rotary inverse frequencies, from transformers itself, as bf16 bits."""
    import torch
    from transformers.models.llama.modeling_llama import LlamaRotaryEmbedding
    _, cfg = hf_config(name)
    inv = LlamaRotaryEmbedding(cfg).inv_freq.to(torch.bfloat16)
    return inv.view(torch.int16).numpy().view(np.uint16)


def cmd_graph(a) -> None:
    import onnx
    import torch
    from onnx import TensorProto

    t0 = time.time()
    decode = getattr(a, "decode", False)
    m, prog = export_program(a.config, decode, "meta")
    # The weights are on the meta device: take their names and shapes, then let the exporter's
    # optimizer run with them as values it cannot fold (it would read them otherwise).
    weights = prog.model.graph.initializers
    inits = {n: (list(v.shape), v.dtype) for n, v in weights.items()}
    for v in weights.values():
        v.const_value = None
    prog.optimize()
    for name in inits:
        weights.pop(name, None)  # saved by this script, below; the optimizer's own constants stay
    os.makedirs(a.dir, exist_ok=True)
    path = os.path.join(a.dir, "model.onnx")
    prog.save(path)
    model = onnx.load(path, load_external_data=False)
    g = model.graph

    # Transpose(W) of a weight used only there becomes the transposed weight itself: the values
    # are random, so only the shape changes, and no graph keeps a 2x copy of its matrices.
    uses: dict[str, int] = {}
    for n in g.node:
        for i in n.input:
            uses[i] = uses.get(i, 0) + 1
    keep, folded = [], {}
    for n in g.node:
        perm = [list(x.ints) for x in n.attribute if x.name == "perm"]
        w = n.input[0] if n.input else ""
        if n.op_type == "Transpose" and w in inits and uses[w] == 1 and perm == [[1, 0]]:
            shape, dt = inits.pop(w)
            inits[n.output[0]] = (shape[::-1], dt)
            folded[n.output[0]] = w
            continue
        keep.append(n)
    del g.node[:]
    g.node.extend(keep)

    fam = CONFIGS[a.config][0]
    params = {"m." + n for n, _ in m.named_parameters()} | set(folded)
    lifted = real_constants(a.config, decode, [n for n in inits if n not in params and
                                               "inv_freq" not in n])
    layout, window_bytes = [], 0
    for name, (shape, dt) in inits.items():
        assert str(dt) == "BFLOAT16", (name, dt)
        count = int(np.prod(shape)) if shape else 1
        nbytes = 2 * count
        proto = TensorProto(name=name, data_type=TensorProto.BFLOAT16, dims=shape)
        if "inv_freq" in name:
            proto.raw_data = rotary_table(a.config).tobytes()
        elif name in lifted:
            proto.raw_data = lifted[name]
        elif name.endswith("norm.weight") or (fam == "gpt2" and ".ln_" in name and
                                               name.endswith(".weight")):
            proto.raw_data = np.full(count, 0x3F80, np.uint16).tobytes()  # 1.0
        elif nbytes < MIN_EXTERNAL:
            bits = random_bits(count, seed=int(hashlib.sha1(name.encode()).hexdigest()[:8], 16))
            proto.raw_data = bits.tobytes()
        else:
            layout.append((name, nbytes, proto))
            window_bytes = max(window_bytes, nbytes)
            continue
        g.initializer.append(proto)
    # weights.bin: the largest matrix plus 1 GiB of room to place windows at different offsets.
    file_bytes = -(-(window_bytes + (1 << 30)) // CHUNK) * CHUNK if layout else 0
    slots = max(1, (file_bytes - window_bytes) // WINDOW_ALIGN)
    total = 0
    for name, nbytes, proto in layout:
        slot = int(hashlib.sha1(name.encode()).hexdigest()[:12], 16) % slots
        proto.data_location = TensorProto.EXTERNAL
        for k, v in (("location", "weights.bin"), ("offset", str(slot * WINDOW_ALIGN)),
                     ("length", str(nbytes))):
            e = proto.external_data.add()
            e.key, e.value = k, v
        g.initializer.append(proto)
        total += nbytes
    onnx.save(model, path)
    params = sum(int(np.prod(s)) if s else 1 for s, _ in inits.values())
    meta = {"config": a.config, "decode": decode, "params": params, "weight_bytes": 2 * params,
            "weights_bin_bytes": file_bytes, "windows": len(layout),
            "folded_transposes": folded, "weights": sorted(inits)}
    with open(os.path.join(a.dir, "model.json"), "w") as f:
        json.dump(meta, f, indent=1)
    print(f"{path}: {a.config}, {params / 1e9:.2f} B parameters ({2 * params / 2**30:.1f} GiB "
          f"bf16), {len(g.node)} nodes, {len(layout)} matrices as windows into a "
          f"{file_bytes / 2**30:.1f} GiB weights.bin; {time.time() - t0:.1f} s", flush=True)


def real_constants(config: str, decode: bool, names: list[str]) -> dict[str, bytes]:
    """Constants the exporter lifted out of the code (GPT-2's attention mask value, ...): on the
    meta device they have no value, so they are taken from the same export of the family's tiny
    config on the CPU, where they are the same scalars."""
    if not names:
        return {}
    tiny = CONFIGS[config][0] + "-tiny"
    _, prog = export_program(tiny, decode, "cpu")
    out = {}
    for n in names:
        v = prog.model.graph.initializers.get(n)
        if v is None or v.const_value is None or list(v.shape) != []:
            raise SystemExit(f"{n}: a lifted constant this script cannot reproduce")
        out[n] = v.const_value.tobytes()
    return out


def random_bits(count: int, seed: int) -> np.ndarray:
    """N(0, 0.02) as bf16 bit patterns (f32 rounded to nearest even)."""
    x = (np.random.default_rng(seed).standard_normal(count, dtype=np.float32) * 0.02)
    u = x.view(np.uint32).astype(np.uint64)
    return ((u + 0x7FFF + ((u >> 16) & 1)) >> 16).astype(np.uint16)


def cmd_weights(a) -> None:
    with open(os.path.join(a.dir, "model.json")) as f:
        size = json.load(f)["weights_bin_bytes"]
    path = os.path.join(a.dir, "weights.bin")
    if os.path.exists(path) and os.path.getsize(path) == size:
        print(f"{path}: present", flush=True)
        return
    t0 = time.time()
    if size == 0:
        print(f"{a.dir}: no matrix of 1 MiB or more: no weights.bin", flush=True)
        return
    chunk = random_bits(CHUNK // 2, seed=0).tobytes()
    with open(path + ".tmp", "wb") as f:
        for _ in range(size // CHUNK):
            f.write(chunk)
    os.replace(path + ".tmp", path)
    print(f"{path}: {size / 2**30:.1f} GiB in {time.time() - t0:.1f} s", flush=True)


def load_weights(d: str) -> dict[str, np.ndarray]:
    """Every initializer of DIR/model.onnx as a bf16-bits array (uint16) of its ONNX shape."""
    import onnx
    from onnx import TensorProto
    model = onnx.load(os.path.join(d, "model.onnx"), load_external_data=False)
    with open(os.path.join(d, "model.json")) as f:
        weights = set(json.load(f)["weights"])
    blob = None
    out = {}
    for t in model.graph.initializer:
        if t.name not in weights:
            continue  # the exporter's own constants
        if t.data_location == TensorProto.EXTERNAL:
            if blob is None:
                blob = np.memmap(os.path.join(d, "weights.bin"), dtype=np.uint16, mode="r")
            kv = {e.key: int(e.value) for e in t.external_data if e.key != "location"}
            a = blob[kv["offset"] // 2: (kv["offset"] + kv["length"]) // 2]
        else:
            a = np.frombuffer(t.raw_data, dtype=np.uint16)
        out[t.name] = np.asarray(a).reshape(list(t.dims))
    return out


def eager_model(config: str, d: str, device: str = "cpu", wrap: bool = True):
    """The transformers model with DIR's weights (transposed back where the graph folded it),
    wrapped as the prefill graph is (token ids -> hidden) unless `wrap` is false."""
    import torch
    m = hf_model(config, device="cpu")
    with open(os.path.join(d, "model.json")) as f:
        folded = json.load(f)["folded_transposes"]  # graph name -> "m.<parameter>"
    sd = {}
    for name, bits in load_weights(d).items():
        t = torch.from_numpy(bits.view(np.int16)).view(torch.bfloat16)
        if name in folded:
            name, t = folded[name], t.T.contiguous()
        sd[name.removeprefix("m.")] = t
    own = m.state_dict()
    sd = {k: v for k, v in sd.items() if k in own}  # buffers and lifted constants: its own
    missing, unexpected = m.load_state_dict(sd, strict=False)
    assert not unexpected and all("inv_freq" in k for k in missing), (missing, unexpected)
    return (Hidden.wrap(m) if wrap else m).to(device)


def cmd_eager(a) -> None:
    import torch
    b, s = (int(x) for x in a.ids.split("x"))
    vocab = CONFIGS[a.config][6]
    ids = np.random.default_rng(0).integers(0, vocab, size=(b, s), dtype=np.int64)
    with torch.no_grad():
        out = eager_model(a.config, a.dir)(torch.from_numpy(ids)).float().numpy()
    np.savez(os.path.join(a.dir, f"eager_{a.ids}.npz"), input_ids=ids, hidden=out)
    print(f"eager {a.config} {a.ids}: |hidden| max {np.abs(out).max():.3g}")


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("what", choices=["graph", "weights", "eager"])
    p.add_argument("config", nargs="?", choices=sorted(CONFIGS))
    p.add_argument("dir")
    p.add_argument("--ids", default="2x16", help="eager: batch x sequence of the token ids")
    p.add_argument("--decode", action="store_true",
                   help="graph: one decoding step over a past (KV cache) instead of the prefill")
    a = p.parse_args()
    if a.what != "weights" and not a.config:
        p.error(f"{a.what} needs a config")
    {"graph": cmd_graph, "weights": cmd_weights, "eager": cmd_eager}[a.what](a)
    return 0


if __name__ == "__main__":
    sys.exit(main())
