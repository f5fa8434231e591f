"""Splitting an ATen FX graph into ferrite partitions and eager PyTorch ops."""

from __future__ import annotations

import collections
import dataclasses
import operator
from typing import Any, Dict, List, Optional, Sequence, Set

import torch
import torch.fx
from torch.fx.passes.infra.partitioner import CapabilityBasedPartitioner
from torch.fx.passes.operator_support import OperatorSupportBase

from .aten_table import why_unsupported
from .compiled import CompiledPartition
from .fx_importer import fake_value
from .mutations import restore_input_copies, strip_input_copies
from .options import CompileOptions

A = torch.ops.aten
# Ops that move no data worth a kernel: a partition of only these stays in eager PyTorch.
_TRIVIAL = {
    A.view.default, A._unsafe_view.default, A.reshape.default, A.permute.default, A.t.default,
    A.transpose.int, A.expand.default, A.unsqueeze.default, A.squeeze.dim, A.squeeze.dims,
    A.squeeze.default, A.clone.default, A.alias.default, A.detach.default, A.slice.Tensor,
    A.select.int, A.lift_fresh_copy.default, operator.getitem,
}


def _is_symbolic_scalar(node: torch.fx.Node) -> bool:
    v = fake_value(node)
    return isinstance(v, (torch.SymInt, torch.SymFloat, torch.SymBool, int, float, bool))


class _Support(OperatorSupportBase):
    def __init__(self) -> None:
        self.reasons: Dict[torch.fx.Node, str] = {}

    def is_node_supported(self, submodules: Any, node: torch.fx.Node) -> bool:
        if node.op != "call_function":
            return False
        if node.target is operator.getitem:
            src = node.args[0]
            return isinstance(src, torch.fx.Node) and src not in self.reasons and \
                self.is_node_supported(submodules, src)
        if _is_symbolic_scalar(node):
            self.reasons[node] = "symbolic size arithmetic stays in PyTorch"
            return False
        r = why_unsupported(node)
        if r is not None:
            self.reasons[node] = r
            return False
        return True


@dataclasses.dataclass
class PartitionReport:
    """What one graph became: ferrite partitions and the ops left to eager PyTorch."""

    # "inference", or "forward" / "backward" of a training graph (AOTAutograd's joint split)
    kind: str = "inference"
    # backward graphs: the values the forward saved for it (backend.saved_tensors)
    saved: List[Dict[str, Any]] = dataclasses.field(default_factory=list)
    partitions: List[Dict[str, Any]] = dataclasses.field(default_factory=list)
    eager_ops: Dict[str, Dict[str, Any]] = dataclasses.field(default_factory=dict)
    errors: List[str] = dataclasses.field(default_factory=list)
    # input mutations (copy_ into a graph input) left to eager copies (mutations.py)
    eager_input_copies: int = 0

    def add_eager(self, node: torch.fx.Node, reason: str) -> None:
        key = str(node.target)
        e = self.eager_ops.setdefault(key, {"count": 0, "reason": reason})
        e["count"] += 1


def partition_and_compile(gm: torch.fx.GraphModule, static_indices: Set[int],
                          options: CompileOptions, graph_name: str,
                          report: Optional[PartitionReport] = None,
                          training: bool = False) -> torch.fx.GraphModule:
    """Replaces each supported region of `gm` by a CompiledPartition; the rest stays eager.
    Writes into graph inputs (AOTAutograd's kept input mutations) go to the partition computing
    the new value where that is safe (mutations.py). `gm` is changed in place."""
    pairs, num_outputs, seq = strip_input_copies(gm)
    support = _Support()
    partitioner = CapabilityBasedPartitioner(gm, support, allows_single_node_partition=True)
    proposed = partitioner.propose_partitions()
    kept = []
    for p in proposed:
        compute = [n for n in p.nodes if n.target not in _TRIVIAL]
        if len(compute) >= max(1, options.min_partition_ops):
            kept.append(p)
    kept_nodes = {n for p in kept for n in p.nodes}
    if report is not None:
        for n in gm.graph.nodes:
            if n.op == "call_function" and n not in kept_nodes and n.target is not operator.getitem:
                reason = support.reasons.get(n)
                if reason is None:
                    reason = "a region too small to be worth a ferrite kernel"
                if not _is_symbolic_scalar(n):
                    report.add_eager(n, reason)
    fused = partitioner.fuse_partitions(kept)
    placeholders = [n for n in fused.graph.nodes if n.op == "placeholder"]
    static_nodes = {placeholders[i] for i in static_indices if i < len(placeholders)}
    for n in list(fused.graph.nodes):
        if n.op != "call_module" or not n.target.startswith("fused_"):
            continue
        sub = getattr(fused, n.target)
        static = [k for k, a in enumerate(n.args) if a in static_nodes]
        name = f"{graph_name}_{n.target}"
        cp = CompiledPartition(sub, static, options, name, training)
        setattr(fused, n.target, _PartitionModule(cp))
        if report is not None:
            ops = collections.Counter(str(m.target) for m in sub.graph.nodes
                                      if m.op == "call_function" and m.target is not operator.getitem)
            report.partitions.append({"name": name, "nodes": sum(ops.values()),
                                      "inputs": len(n.args), "static_inputs": len(static),
                                      "ops": dict(ops), "partition": cp})
    if pairs:
        copies = restore_input_copies(fused, pairs, num_outputs, seq,
                                      lambda target: getattr(getattr(fused, target), "cp", None))
        if report is not None:
            report.eager_input_copies = copies
            for p in report.partitions:
                p["writes"] = len(p["partition"].writes)
    fused.recompile()
    return fused


class _PartitionModule(torch.nn.Module):
    def __init__(self, cp: CompiledPartition) -> None:
        super().__init__()
        self.cp = cp

    def forward(self, *args: Any) -> Any:
        return self.cp(*args)


class BoxedGraph:
    """Runs a partitioned graph in AOTAutograd's boxed calling convention: it takes the list of
    inputs, empties it, and drops every value after its last use, inputs included, so that a
    backward's saved activations are freed while it runs (as Inductor's generated code does).
    A ferrite partition gets its inputs as a list of their only references (call_boxed): on
    cuda it drops each once its Session has read it (DeviceRun::input_done)."""

    def __init__(self, gm: torch.fx.GraphModule) -> None:
        # An instance attribute: wrappers made with functools.wraps (dynamo's disable() around
        # a backward) copy the instance's __dict__, not its class's attributes.
        self._boxed_call = True
        self.gm = gm
        nodes = list(gm.graph.nodes)
        self._placeholders = [n for n in nodes if n.op == "placeholder"]
        last: Dict[torch.fx.Node, torch.fx.Node] = {}
        for n in nodes:
            for a in n.all_input_nodes:
                last[a] = n
        dead: Dict[torch.fx.Node, List[torch.fx.Node]] = collections.defaultdict(list)
        for v, n in last.items():
            dead[n].append(v)
        self._unused = [p for p in self._placeholders if p not in last]
        # (node, what to call, values dead after it) for every node that computes.
        self._steps = []
        for n in nodes:
            if n.op in ("placeholder", "output"):
                continue
            fn: Any = n.target
            if n.op == "call_module":
                fn = gm.get_submodule(n.target)
                if isinstance(fn, _PartitionModule):
                    fn = fn.cp
            self._steps.append((n, fn, dead.get(n, [])))
        self._output = next(n for n in reversed(nodes) if n.op == "output")

    def __call__(self, args: List[Any]) -> Any:
        env: Dict[torch.fx.Node, Any] = dict(zip(self._placeholders, args))
        args.clear()
        for p in self._unused:
            del env[p]
        load = env.__getitem__
        for n, fn, dead in self._steps:
            if n.op == "get_attr":
                env[n] = _fetch_attr(self.gm, n.target)
                continue
            a = torch.fx.node.map_arg(n.args, load)
            kw = torch.fx.node.map_arg(n.kwargs, load)
            for v in dead:  # the call's arguments are their only references now
                del env[v]
            if isinstance(fn, CompiledPartition):
                boxed = list(a)
                del a
                env[n] = fn.call_boxed(boxed)
            elif n.op == "call_method":
                env[n] = getattr(a[0], n.target)(*a[1:], **kw)
            else:
                env[n] = fn(*a, **kw)
        return torch.fx.node.map_arg(self._output.args[0], load)


def _fetch_attr(gm: torch.fx.GraphModule, target: str) -> Any:
    obj: Any = gm
    for part in target.split("."):
        obj = getattr(obj, part)
    return obj

