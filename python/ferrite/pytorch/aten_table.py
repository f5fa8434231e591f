"""The ATen op table: one entry per ATen overload, mapping it onto ferrite IR.

An entry is registered where its translation is defined (``aten_ops/<family>.py``) with
:func:`aten`::

    @aten(A.relu.default)
    def relu(ctx, node, x):
        return ctx.op("Relu", [x.id])

The function receives the :class:`~ferrite.pytorch.fx_importer.ImportContext`, the FX node and
the node's arguments with tensors as :class:`TV` (builder id + torch dtype/shape), symbolic
integers as :class:`Sym` and everything else as given. It returns an output id, or a tuple of ids
(``None`` for outputs it does not produce) for ops with several outputs. An optional ``check``
says why a particular node cannot be taken (the partitioner then leaves it in eager PyTorch and
``ferrite.explain`` shows the reason).
"""

from __future__ import annotations

import dataclasses
import importlib
import pkgutil
from typing import Any, Callable, Dict, Iterable, Optional

import torch
import torch.fx

from .fx_importer import TORCH_TO_FERRITE, fake_value

FLOATS = frozenset({torch.float32, torch.float16, torch.bfloat16, torch.float64})
INTS = frozenset({torch.int8, torch.int16, torch.int32, torch.int64, torch.uint8})
ALL = FLOATS | INTS | {torch.bool}

Check = Callable[[torch.fx.Node], Optional[str]]


@dataclasses.dataclass(frozen=True)
class AtenEntry:
    overload: Any  # torch._ops.OpOverload
    fn: Callable[..., Any]
    check: Optional[Check]
    dtypes: frozenset  # dtypes of the node's tensors the entry handles (and is tested with)


_TABLE: Dict[Any, AtenEntry] = {}
_loaded = False


def aten(*overloads: Any, check: Optional[Check] = None, dtypes: Iterable = ALL):
    """Registers the decorated function as the translation of each overload (once each)."""

    def register(fn: Callable[..., Any]) -> Callable[..., Any]:
        for o in overloads:
            if o in _TABLE:
                raise RuntimeError(f"ATen table: {o} is registered twice")
            _TABLE[o] = AtenEntry(o, fn, check, frozenset(dtypes))
        return fn

    return register


def _load() -> None:
    global _loaded
    if _loaded:
        return
    from . import aten_ops

    for m in pkgutil.iter_modules(aten_ops.__path__):
        importlib.import_module(f"{aten_ops.__name__}.{m.name}")
    _loaded = True


def table() -> Dict[Any, AtenEntry]:
    _load()
    return _TABLE


def lookup(target: Any) -> Optional[AtenEntry]:
    return table().get(target)


def _tensors_of(v: Any) -> list:
    if isinstance(v, torch.Tensor):
        return [v]
    if isinstance(v, (list, tuple)):
        return [t for e in v for t in _tensors_of(e)]
    return []


_RNG = ("random numbers come from PyTorch's generator (stays in eager so that seeds give "
        "eager's values)")
# Ops left to eager PyTorch on purpose, with the reason explain() gives.
_EAGER_BY_DESIGN = {
    o: f"{o}: {_RNG}" for o in (
        torch.ops.aten.native_dropout.default, torch.ops.aten.bernoulli.default,
        torch.ops.aten.bernoulli.p, torch.ops.aten.rand.default, torch.ops.aten.rand_like.default,
        torch.ops.aten.randn.default, torch.ops.aten.randn_like.default,
        torch.ops.aten.randint.low, torch.ops.aten.randperm.default)
}


def why_unsupported(node: torch.fx.Node) -> Optional[str]:
    """None when ferrite can take the node, else the reason it stays in eager PyTorch."""
    import operator

    if node.op != "call_function":
        return None
    if node.target is operator.getitem:
        return None
    entry = lookup(node.target)
    if entry is None:
        return _EAGER_BY_DESIGN.get(node.target, f"no ferrite translation for {node.target}")
    val = fake_value(node)
    inputs = [t for a in node.all_input_nodes for t in _tensors_of(fake_value(a))]
    outputs = _tensors_of(val)
    for t in inputs + outputs:
        if t.dtype not in TORCH_TO_FERRITE:
            return f"dtype {t.dtype} is not supported by ferrite"
        if t.device.type not in ("cpu", "cuda", "meta"):
            return f"tensor on device {t.device}"
    # The entry's dtypes are those of its tensor operands (of its results when it has none).
    for t in inputs or outputs:
        if t.dtype not in entry.dtypes:
            return f"{node.target} is not supported for {t.dtype}"
    if val is None and node.users:
        return "no fake value (shape unknown)"
    if entry.check is not None:
        return entry.check(node)
    return None
