"""The ``torch.compile`` backend: ``torch.compile(model, backend="ferrite", options={...})``."""

from __future__ import annotations

import functools
import itertools
import warnings
from typing import Any, Callable, Dict, List, Optional, Sequence, Set

import torch
import torch.fx

from .options import CompileOptions

_graph_ids = itertools.count()
_SUFFIX = {"forward": "fw", "backward": "bw"}


def _decompositions() -> Dict[Any, Callable]:
    """Core ATen decompositions for the ops the table does not translate itself, so that ops with
    a native ferrite form (layer norm, softmax, SDPA, GELU, convolution, matmul) stay whole."""
    from torch._decomp import core_aten_decompositions

    from .aten_table import table

    mine = table()
    decomps = {op: fn for op, fn in core_aten_decompositions().items() if op not in mine}
    return decomps


def _static_indices(example_inputs: Sequence[Any]) -> Set[int]:
    """Inputs Dynamo lifted from the module: parameters and buffers (bound as constants)."""
    static = set()
    try:
        from torch._guards import TracingContext

        tc = TracingContext.try_get()
        meta = getattr(tc, "fw_metadata", None) if tc is not None else None
        if meta is not None and getattr(meta, "static_input_indices", None) is not None:
            static.update(meta.static_input_indices)
    except Exception:  # older/newer torch without these internals: fall back to types below
        pass
    for i, t in enumerate(example_inputs):
        if isinstance(t, torch.nn.Parameter) or getattr(t, "_dynamo_static_input_type", None):
            static.add(i)
    return static


def _mutated_indices() -> Set[int]:
    """Inputs the graph writes (an optimizer step's parameters and states, batch-norm buffers):
    AOTAutograd returns their new values and copies them back, so they change at every call."""
    try:
        from torch._guards import TracingContext

        tc = TracingContext.try_get()
        meta = getattr(tc, "fw_metadata", None) if tc is not None else None
        if meta is not None:
            return {i for i, info in enumerate(meta.input_info) if info.mutates_data}
    except Exception:  # older/newer torch without these internals: nothing known mutated
        pass
    return set()


def saved_tensors(bw_gm: torch.fx.GraphModule) -> List[Dict[str, Any]]:
    """What the forward saved for a backward graph (AOTAutograd's choice of saved versus
    recomputed values): its inputs other than the tangents, with shape, dtype and bytes (the
    size hint where a dim is symbolic)."""
    out = []
    for n in bw_gm.graph.nodes:
        if n.op != "placeholder" or n.name.startswith("tangents"):
            continue
        v = n.meta.get("val")
        if not isinstance(v, torch.Tensor):
            out.append({"name": n.name, "shape": (), "dtype": type(v).__name__, "bytes": 0})
            continue
        numel = 1
        for d in v.shape:
            numel *= d.node.hint if isinstance(d, torch.SymInt) else int(d)
        out.append({"name": n.name, "shape": tuple(v.shape), "dtype": str(v.dtype),
                    "bytes": numel * v.element_size()})
    return out


def _dump_saved(path: str, saved: List[Dict[str, Any]]) -> None:
    import os

    os.makedirs(os.path.dirname(path), exist_ok=True)
    total = sum(t["bytes"] for t in saved)
    with open(path, "w") as f:
        f.write(f"{len(saved)} values saved for the backward, {total} bytes\n")
        for t in saved:
            f.write(f"{t['name']}: {t['dtype']} {list(t['shape'])} {t['bytes']} bytes\n")


def ferrite_backend(gm: torch.fx.GraphModule, example_inputs: List[Any],
                    options: Optional[Dict[str, Any]] = None, _report: Any = None,
                    **kwargs: Any) -> Callable:
    """Dynamo backend entry point (registered as ``"ferrite"``)."""
    opts = CompileOptions.from_mapping(options)
    from functorch.compile import make_boxed_func
    from torch._dynamo.backends.common import aot_autograd

    from .mutations import clone, has_input_copies
    from .partition import BoxedGraph, PartitionReport, partition_and_compile

    outer_static = _static_indices(example_inputs)
    graph_name = f"g{next(_graph_ids)}"
    # AOTAutograd calls `fw_compiler` and `bw_compiler` for a graph that needs gradients and
    # `inference_compiler` for one that does not (no_grad, or no input requiring grad).

    def compile_graph(kind: str, aten_gm: torch.fx.GraphModule, static: Set[int]) -> Callable:
        name = graph_name if kind == "inference" else f"{graph_name}_{_SUFFIX[kind]}"
        report = PartitionReport(kind=kind) if _report is not None else None
        # Partitioning moves the graph's writes into its inputs (mutations.py): keep the graph
        # as it came for the eager fallback.
        eager_gm = clone(aten_gm) if has_input_copies(aten_gm) else aten_gm
        try:
            compiled = BoxedGraph(partition_and_compile(aten_gm, static, opts, name, report,
                                                        training=kind != "inference"))
        except Exception as e:  # never break the user's model: run this graph in eager
            if opts.fallback == "raise":
                raise
            if opts.fallback == "warn":
                warnings.warn(f"ferrite: {kind} graph {name} runs in eager PyTorch: "
                              f"{type(e).__name__}: {e}", RuntimeWarning)
            if report is not None:
                report.errors.append(f"{type(e).__name__}: {e}")
            compiled = make_boxed_func(eager_gm)
        if _report is not None:
            _report.append((name, report))
        return compiled

    def compile_inference(aten_gm: torch.fx.GraphModule, aten_inputs: List[Any]) -> Callable:
        # Parameters and buffers become constants over their memory (rebuilt if they change),
        # except those the graph itself updates (a compiled optimizer step): graph inputs.
        static = (_static_indices(aten_inputs) | outer_static) - _mutated_indices()
        return compile_graph("inference", aten_gm, static)

    def compile_forward(aten_gm: torch.fx.GraphModule, aten_inputs: List[Any]) -> Callable:
        # Training: parameters change at every optimizer step, so they are graph inputs (binding
        # them as constants would rebuild the partition at every step).
        return compile_graph("forward", aten_gm, set())

    def compile_backward(aten_gm: torch.fx.GraphModule, aten_inputs: List[Any]) -> Callable:
        # Saved activations, parameters and tangents are all graph inputs.
        compiled = compile_graph("backward", aten_gm, set())
        saved = saved_tensors(aten_gm)
        if _report is not None and _report[-1][1] is not None:
            _report[-1][1].saved = saved
        if opts.dump_dir:
            _dump_saved(f"{opts.dump_dir}/{graph_name}_bw_saved.txt", saved)
        return compiled

    # keep_inference_input_mutations: an optimizer step's writes to its parameters and states
    # stay in the graph (copy_ into the inputs) for ferrite to do in place, instead of
    # AOTAutograd returning the new values and copying them back (mutations.py).
    extra = {}
    if opts.recompute:
        from torch._functorch.partitioners import min_cut_rematerialization_partition

        extra["partition_fn"] = min_cut_rematerialization_partition
    return aot_autograd(fw_compiler=compile_forward, bw_compiler=compile_backward,
                        inference_compiler=compile_inference, decompositions=_decompositions(),
                        keep_inference_input_mutations=True, **extra)(gm, example_inputs)
