"""``ferrite.explain(model, *args)``: what ferrite runs of a PyTorch model, and why the rest
stays in eager PyTorch."""

from __future__ import annotations

import dataclasses
import functools
from typing import Any, Dict, List, Optional

import torch


@dataclasses.dataclass
class Explanation:
    """The result of :func:`explain`; ``print()`` it for a readable report."""

    graphs: int
    partitions: List[Dict[str, Any]]
    eager_ops: Dict[str, Dict[str, Any]]
    errors: List[str]
    # the kind of each graph: "inference", or "forward" / "backward" with backward=True
    kinds: List[str] = dataclasses.field(default_factory=list)
    # values the forward graphs saved for the backward (name, shape, dtype, bytes)
    saved: List[Dict[str, Any]] = dataclasses.field(default_factory=list)

    @property
    def eager_op_count(self) -> int:
        return sum(e["count"] for e in self.eager_ops.values())

    def __str__(self) -> str:
        kinds = ""
        if any(k != "inference" for k in self.kinds):
            kinds = " (" + ", ".join(f"{self.kinds.count(k)} {k}" for k in
                                     ("inference", "forward", "backward") if k in self.kinds) + ")"
        lines = [f"ferrite.explain: {self.graphs} graph(s){kinds}, {len(self.partitions)} ferrite "
                 f"partition(s), {self.eager_op_count} op(s) in eager PyTorch"]
        for p in self.partitions:
            kind = f" [{p['kind']}]" if p.get("kind", "inference") != "inference" else ""
            lines.append(f"  partition {p['name']}{kind}: {p['nodes']} ops, {p['inputs']} inputs "
                         f"({p['static_inputs']} parameters/buffers bound in place)")
        if self.saved:
            mib = sum(t["bytes"] for t in self.saved) / 2**20
            # AOTAutograd names the forward's own inputs (parameters, user inputs) primals_*:
            # saving them keeps them alive, it allocates nothing
            acts = sum(t["bytes"] for t in self.saved if not t["name"].startswith("primals"))
            lines.append(f"  saved for the backward: {len(self.saved)} values, {mib:.2f} MiB "
                         f"({acts / 2**20:.2f} MiB computed, the rest inputs and parameters)")
            arena = {k: sum(p.get("arena_bytes", 0) for p in self.partitions if p["kind"] == k)
                     / 2**20 for k in ("forward", "backward")}
            lines.append(f"  ferrite memory per training step: forward intermediates "
                         f"{arena['forward']:.2f} MiB, saved activations {acts / 2**20:.2f} MiB, "
                         f"backward intermediates {arena['backward']:.2f} MiB (arenas; outputs "
                         f"apart)")
        if self.eager_ops:
            lines.append("  eager ops:")
            for op, e in sorted(self.eager_ops.items(), key=lambda kv: -kv[1]["count"]):
                lines.append(f"    {op} x{e['count']}: {e['reason']}")
        for err in self.errors:
            lines.append(f"  compile error (graph ran in eager): {err}")
        return "\n".join(lines)


def explain(model: Any, *args: Any, options: Optional[Dict[str, Any]] = None,
            backward: bool = False, **kwargs: Any) -> Explanation:
    """Compiles `model` with ``backend="ferrite"``, runs it once on `args`, and reports the
    partitions, the ops left in eager PyTorch with the reason for each, and compile errors.

    With ``backward=True`` the run records gradients and backpropagates the sum of the float
    outputs, so the training graphs (AOTAutograd's forward and backward) are reported; a
    backward op that stays in eager is listed as ``backward: <op>``."""
    import torch._dynamo

    from .backend import ferrite_backend

    collected: List[Any] = []
    backend = functools.partial(ferrite_backend, options=options, _report=collected)
    torch._dynamo.reset()
    compiled = torch.compile(model, backend=backend)
    if backward:
        _run_backward(compiled(*args, **kwargs))
    else:
        with torch.no_grad():
            compiled(*args, **kwargs)
    partitions, eager, errors, kinds, saved = [], {}, [], [], []
    for _, rep in collected:
        if rep is None:
            continue
        kinds.append(rep.kind)
        saved += rep.saved
        partitions += [dict(p, kind=rep.kind) for p in rep.partitions]
        for op, e in rep.eager_ops.items():
            key = op if rep.kind != "backward" else f"backward: {op}"
            slot = eager.setdefault(key, {"count": 0, "reason": e["reason"]})
            slot["count"] += e["count"]
        errors += rep.errors
    for p in partitions:
        cp = p.pop("partition", None)
        if cp is not None and cp._eager:
            errors.append(f"partition {p['name']} fell back to eager")
        if cp is not None and cp._session is not None and not cp._eager:
            # the arena its intermediates were planned into for the run (outputs not included)
            p["arena_bytes"] = cp._session.stats().get("memory", {}).get("arena_capacity_bytes", 0)
    torch._dynamo.reset()
    return Explanation(len(collected), partitions, eager, errors, kinds, saved)


def _run_backward(out: Any) -> None:
    leaves = [t for t in torch.utils._pytree.tree_leaves(out)
              if isinstance(t, torch.Tensor) and t.requires_grad and t.is_floating_point()]
    if not leaves:
        raise ValueError("ferrite.explain(backward=True): no output requires grad")
    torch.autograd.backward([t.float().sum() for t in leaves])
