"""Input mutations of an inference graph (a compiled optimizer step): written by ferrite in place.

With ``keep_inference_input_mutations`` AOTAutograd leaves a graph's writes to its inputs in the
graph, as ``aten.copy_(input, new_value)`` nodes at its end, instead of returning the new values
and copying them back itself. Before partitioning those nodes are taken out and their values
become extra graph outputs (partitions stay functional); afterwards each one is either handed to
the ferrite partition that computes the value (its Session stores that output into the input's
memory, `CompiledPartition.writes`) or, where that would be unsafe, put back as an eager
``copy_`` just before the graph's output, where AOTAutograd's own copy would have run.
"""

from __future__ import annotations

import operator
from typing import Any, Callable, List, Tuple

import torch
import torch.fx

from .fx_importer import fake_value

A = torch.ops.aten


Pairs = List[Tuple[torch.fx.Node, torch.fx.Node]]


def has_input_copies(gm: torch.fx.GraphModule) -> bool:
    return any(n.op == "call_function" and n.target is A.copy_.default and
               isinstance(n.args[0], torch.fx.Node) and n.args[0].op == "placeholder"
               for n in gm.graph.nodes)


def clone(gm: torch.fx.GraphModule) -> torch.fx.GraphModule:
    """A copy of `gm` over a copy of its graph (node metadata shared): what runs in eager when
    partitioning the original, which changes it, fails."""
    g = torch.fx.Graph()
    g.output(g.graph_copy(gm.graph, {}))
    return torch.fx.GraphModule(gm, g)


def strip_input_copies(gm: torch.fx.GraphModule) -> Tuple[Pairs, int, bool]:
    """Removes each ``copy_(placeholder, value)`` whose value has the input's dtype and shape and
    makes the value an extra output of `gm`. Returns the (input, value) pairs in output order, the
    number of outputs before them and whether the output was a sequence."""
    pairs = []
    for n in list(gm.graph.nodes):
        if n.op != "call_function" or n.target is not A.copy_.default or n.users:
            continue
        dst, src = n.args[0], n.args[1]
        if not isinstance(dst, torch.fx.Node) or dst.op != "placeholder":
            continue
        if not isinstance(src, torch.fx.Node) or src.op != "call_function":
            continue
        d, s = fake_value(dst), fake_value(src)
        if not isinstance(d, torch.Tensor) or not isinstance(s, torch.Tensor):
            continue
        if d.dtype != s.dtype or tuple(d.shape) != tuple(s.shape):
            continue  # a broadcasting or converting copy stays as it is
        pairs.append((dst, src))
        gm.graph.erase_node(n)
    out = next(n for n in reversed(gm.graph.nodes) if n.op == "output")
    result = out.args[0]
    seq = isinstance(result, (list, tuple))
    items = list(result) if seq else [result]
    if pairs:
        out.args = (tuple(items) + tuple(s for _, s in pairs),)
    return pairs, len(items), seq


def restore_input_copies(fused: torch.fx.GraphModule, pairs: Pairs, num_outputs: int, seq: bool,
                         partition_of: Callable[[str], Any]) -> int:
    """After partitioning: gives each (input, value) pair to the ferrite partition computing the
    value when that partition reads the input and every other reader of the input runs before it
    (the Session then decides, by liveness inside the partition, whether the value's kernel can
    store straight into the input). The others become eager ``copy_`` nodes before the output.
    Restores `fused`'s outputs to the first `num_outputs` (a sequence when `seq`); returns the
    number of eager copies."""
    out = next(n for n in reversed(fused.graph.nodes) if n.op == "output")
    extras = list(out.args[0])[num_outputs:]
    # Partitioning builds a new graph: the inputs are found again by position.
    before = [n for n in pairs[0][0].graph.nodes if n.op == "placeholder"] if pairs else []
    after = [n for n in fused.graph.nodes if n.op == "placeholder"]
    pairs = [(after[before.index(dst)], src) for dst, src in pairs]
    order = {n: i for i, n in enumerate(fused.graph.nodes)}
    kept = list(out.args[0])[:num_outputs]
    eager = []
    for (dst, _), value in zip(pairs, extras):
        cm, k = value, 0
        if value.op == "call_function" and value.target is operator.getitem:
            cm, k = value.args[0], value.args[1]
        cp = partition_of(cm.target) if cm.op == "call_module" else None
        # A value the graph also returns keeps its own memory (the output must not alias the
        # input): that write is an eager copy.
        ok = cp is not None and dst in cm.args and k not in cp.writes and value not in kept and \
            all(order[u] < order[cm] for u in dst.users if u is not cm and u is not out)
        if ok:
            cp.writes[k] = list(cm.args).index(dst)
        else:
            eager.append((dst, value))
    out.args = (tuple(kept) if seq else kept[0],)
    with fused.graph.inserting_before(out):
        for dst, value in eager:
            fused.graph.call_function(A.copy_.default, (dst, value))
    for value in extras:
        if value.op == "call_function" and value.target is operator.getitem and not value.users:
            fused.graph.erase_node(value)
    return len(eager)
