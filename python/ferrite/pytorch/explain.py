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

    @property
    def eager_op_count(self) -> int:
        return sum(e["count"] for e in self.eager_ops.values())

    def __str__(self) -> str:
        lines = [f"ferrite.explain: {self.graphs} graph(s), {len(self.partitions)} ferrite "
                 f"partition(s), {self.eager_op_count} op(s) in eager PyTorch"]
        for p in self.partitions:
            lines.append(f"  partition {p['name']}: {p['nodes']} ops, {p['inputs']} inputs "
                         f"({p['static_inputs']} parameters/buffers bound in place)")
        if self.eager_ops:
            lines.append("  eager ops:")
            for op, e in sorted(self.eager_ops.items(), key=lambda kv: -kv[1]["count"]):
                lines.append(f"    {op} x{e['count']}: {e['reason']}")
        for err in self.errors:
            lines.append(f"  compile error (graph ran in eager): {err}")
        return "\n".join(lines)


def explain(model: Any, *args: Any, options: Optional[Dict[str, Any]] = None,
            **kwargs: Any) -> Explanation:
    """Compiles `model` with ``backend="ferrite"``, runs it once on `args`, and reports the
    partitions, the ops left in eager PyTorch with the reason for each, and compile errors."""
    import torch._dynamo

    from .backend import ferrite_backend

    collected: List[Any] = []
    backend = functools.partial(ferrite_backend, options=options, _report=collected)
    torch._dynamo.reset()
    compiled = torch.compile(model, backend=backend)
    with torch.no_grad():
        compiled(*args, **kwargs)
    partitions, eager, errors = [], {}, []
    for _, rep in collected:
        if rep is None:
            continue
        partitions += rep.partitions
        for op, e in rep.eager_ops.items():
            slot = eager.setdefault(op, {"count": 0, "reason": e["reason"]})
            slot["count"] += e["count"]
        errors += rep.errors
        for p in rep.partitions:
            cp = p.pop("partition", None)
            if cp is not None and cp._eager:
                errors.append(f"partition {p['name']} fell back to eager")
    torch._dynamo.reset()
    return Explanation(len(collected), partitions, eager, errors)
