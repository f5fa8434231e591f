"""FX graph of ATen ops -> ferrite graph.

Each ``call_function`` node is translated by its entry in the ATen table (``aten_table``), which
emits ferrite IR (ONNX-domain ops and ferrite's internal ops) through :class:`ImportContext`.
Shapes stay symbolic: a SymInt dim of an input becomes a ferrite shape symbol, and sizes computed
from symbols (``view(x, [s0 * 12, 64])``) become small shape subgraphs (Shape, Mul, Concat) that
ferrite's shape inference folds back into symbols, so one compile serves every size.
"""

from __future__ import annotations

import dataclasses
import operator
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

import numpy as np
import sympy
import torch
import torch.fx

from .. import _core

TORCH_TO_FERRITE: Dict[torch.dtype, str] = {
    torch.float32: "f32",
    torch.float16: "f16",
    torch.bfloat16: "bf16",
    torch.float64: "f64",
    torch.int8: "i8",
    torch.int16: "i16",
    torch.int32: "i32",
    torch.int64: "i64",
    torch.uint8: "u8",
    torch.bool: "bool",
}
FERRITE_TO_TORCH = {v: k for k, v in TORCH_TO_FERRITE.items()}
# ONNX TensorProto.DataType of each dtype (for Cast's `to`).
ONNX_DTYPE: Dict[torch.dtype, int] = {
    torch.float32: 1,
    torch.uint8: 2,
    torch.int8: 3,
    torch.int16: 5,
    torch.int32: 6,
    torch.int64: 7,
    torch.bool: 9,
    torch.float16: 10,
    torch.float64: 11,
    torch.bfloat16: 16,
}


class TranslationError(Exception):
    """A node the table cannot translate (an unsupported argument, a shape it cannot express)."""


@dataclasses.dataclass(frozen=True)
class TV:
    """A tensor value in the graph being built: its builder id and torch's view of its type."""

    id: int
    dtype: torch.dtype
    shape: Tuple[Any, ...]  # ints and SymInts, from the FX node's fake value

    @property
    def rank(self) -> int:
        return len(self.shape)


@dataclasses.dataclass(frozen=True)
class Sym:
    """A symbolic integer (a SymInt FX value): its sympy expression."""

    expr: Any


def fake_value(node: torch.fx.Node) -> Any:
    return node.meta.get("val", node.meta.get("example_value"))


def sym_expr(x: Any) -> Any:
    """sympy expression of an int, SymInt or Sym."""
    if isinstance(x, Sym):
        return x.expr
    if isinstance(x, torch.SymInt):
        return x.node.expr
    if isinstance(x, sympy.Basic):  # a term of a compound size expression
        return x
    return sympy.Integer(int(x))


def is_static_int(x: Any) -> bool:
    if isinstance(x, (int, np.integer)) and not isinstance(x, bool):
        return True
    if isinstance(x, torch.SymInt):
        return x.node.expr.is_Integer
    if isinstance(x, Sym):
        return x.expr.is_Integer
    return False


def static_int(x: Any) -> int:
    return int(sym_expr(x)) if not isinstance(x, (int, np.integer)) else int(x)


class ImportContext:
    """What an ATen table entry emits through: ops, constants, casts and shape values."""

    def __init__(self, builder: Any, name_prefix: str = "") -> None:
        self.b = builder
        self._sym_sources: Dict[str, Tuple[int, int]] = {}  # symbol -> (value id, dim)
        self._sym_cache: Dict[Any, int] = {}
        self._const_cache: Dict[Tuple[Any, ...], int] = {}
        self.node: Optional[torch.fx.Node] = None  # the node being translated
        self.env: Dict[torch.fx.Node, Any] = {}  # FX node -> TV / Sym / python value

    def transposed_source(self, arg: Any) -> Optional["TV"]:
        """If the FX argument is a 2-d transpose (t, transpose(0, 1), permute([1, 0])) of a value,
        that value: GEMMs then read it with transB instead of a transposed copy (for weights,
        which constant folding would otherwise duplicate)."""
        A = torch.ops.aten
        if not isinstance(arg, torch.fx.Node) or arg.op != "call_function":
            return None
        src = arg.args[0] if arg.args else None
        if not isinstance(src, torch.fx.Node) or not isinstance(self.env.get(src), TV):
            return None
        v = self.env[src]
        if v.rank != 2:
            return None
        t = arg.target
        if t == A.t.default or (t == A.transpose.int and sorted(
                int(d) % 2 for d in arg.args[1:3]) == [0, 1]) or (
                t == A.permute.default and [int(d) % 2 for d in arg.args[1]] == [1, 0]):
            return v
        return None

    # ---- emitting ----------------------------------------------------------------------------
    def op(self, op_type: str, inputs: Sequence[Optional[int]], outputs: int = 1,
           domain: str = "", **attrs: Any) -> Any:
        """Adds a node; returns its output id (a list of ids when outputs > 1)."""
        name = ""
        if self.node is not None:
            name = f"{self.node.name}.{op_type}"
        ids = self.b.add_node(op_type, list(inputs), attrs, outputs, domain, name)
        return ids[0] if outputs == 1 else ids

    def dtype_of(self, vid: int) -> torch.dtype:
        return FERRITE_TO_TORCH[self.b.value_type(vid)[0]]

    def dims_of(self, vid: int) -> Optional[list]:
        return self.b.value_type(vid)[1]

    def const(self, value: Any, dtype: torch.dtype) -> int:
        """A constant tensor (python scalar or nested list) of the given dtype."""
        arr = np.asarray(value, dtype=_numpy_dtype(dtype)) if dtype != torch.bfloat16 else None
        key = (repr(value), dtype)
        if key in self._const_cache:
            return self._const_cache[key]
        if arr is None:
            t = torch.tensor(value, dtype=torch.bfloat16)
            vid = self.b.add_constant("c", t)
        else:
            vid = self.b.add_constant("c", np.require(arr, requirements="C"))
        self._const_cache[key] = vid
        return vid

    def const_i64(self, values: Sequence[int]) -> int:
        return self.const([int(v) for v in values], torch.int64)

    def cast(self, vid: int, dtype: torch.dtype) -> int:
        if self.dtype_of(vid) == dtype:
            return vid
        return self.op("Cast", [vid], to=ONNX_DTYPE[dtype])

    def operand(self, x: Any, dtype: torch.dtype) -> int:
        """A tensor or python scalar as a value of `dtype` (scalars become constants)."""
        if isinstance(x, TV):
            return self.cast(x.id, dtype)
        if isinstance(x, (Sym, torch.SymInt)) and not is_static_int(x):
            return self.cast(self.op("Squeeze", [self.sym(x), self.const_i64([0])]), dtype)
        if isinstance(x, (torch.SymInt, Sym)):
            x = static_int(x)
        if isinstance(x, torch.SymFloat) or isinstance(x, torch.SymBool):
            raise TranslationError("symbolic float/bool scalars are not supported")
        return self.const(x, dtype)

    # ---- symbolic sizes ------------------------------------------------------------------------
    def add_sym_source(self, symbol: str, vid: int, dim: int) -> None:
        self._sym_sources.setdefault(symbol, (vid, dim))

    def has_sym_source(self, symbol: str) -> bool:
        return symbol in self._sym_sources

    def sym(self, x: Any) -> int:
        """A 1-d int64 value [1] holding the integer x (int, SymInt or Sym)."""
        e = sympy.sympify(sym_expr(x))
        if e in self._sym_cache:
            return self._sym_cache[e]
        vid = self._sym_uncached(e)
        self._sym_cache[e] = vid
        return vid

    def _sym_uncached(self, e: Any) -> int:
        from torch.utils._sympy.functions import FloorDiv, Mod, PythonMod

        if e.is_Integer:
            return self.const_i64([int(e)])
        if e.is_Symbol:
            src = self._sym_sources.get(e.name)
            if src is None:
                raise TranslationError(f"size symbol {e.name} has no tensor dim to read it from")
            vid, d = src
            return self.op("Shape", [vid], start=d, end=d + 1)
        if e.is_Add or e.is_Mul:
            op = "Add" if e.is_Add else "Mul"
            args = [self.sym(a) for a in e.args]
            acc = args[0]
            for a in args[1:]:
                acc = self.op(op, [acc, a])
            return acc
        if isinstance(e, FloorDiv):
            # Sizes are non-negative, where integer Div's truncation is floor.
            return self.op("Div", [self.sym(e.args[0]), self.sym(e.args[1])])
        if isinstance(e, (Mod, PythonMod)):
            return self.op("Mod", [self.sym(e.args[0]), self.sym(e.args[1])])
        raise TranslationError(f"size expression {e} is not supported")

    def shape_value(self, sizes: Sequence[Any]) -> int:
        """A 1-d int64 value holding a list of sizes (ints, SymInts, Syms)."""
        if all(is_static_int(s) for s in sizes):
            return self.const_i64([static_int(s) for s in sizes])
        parts = [self.sym(s) for s in sizes]
        return parts[0] if len(parts) == 1 else self.op("Concat", parts, axis=0)


def _numpy_dtype(dtype: torch.dtype) -> Any:
    return {
        torch.float32: np.float32,
        torch.float16: np.float16,
        torch.float64: np.float64,
        torch.int8: np.int8,
        torch.int16: np.int16,
        torch.int32: np.int32,
        torch.int64: np.int64,
        torch.uint8: np.uint8,
        torch.bool: np.bool_,
    }[dtype]


def ferrite_dim(d: Any) -> Any:
    """An input dim for the builder: int, a symbol name, or None (compound expressions)."""
    if isinstance(d, int):
        return d
    e = d.node.expr
    if e.is_Integer:
        return int(e)
    if e.is_Symbol:
        return e.name
    return None


# ---- the driver ----------------------------------------------------------------------------------
@dataclasses.dataclass
class ImportedGraph:
    """A graph built from an FX graph module, ready to become a Session."""

    builder: Any
    # For each ferrite graph input, where its value comes from at run time: ("arg", i) the i-th
    # placeholder (a tensor), ("sym", i) the i-th placeholder (a SymInt, fed as int64 [1]).
    feeds: List[Tuple[str, int]]
    # For each FX output: ("out", k) the k-th ferrite output, ("arg", i) a placeholder passed
    # through, ("value", v) a python value.
    outputs: List[Tuple[str, Any]]
    num_nodes: int


def _map_args(a: Any, env: Dict[torch.fx.Node, Any]) -> Any:
    if isinstance(a, torch.fx.Node):
        return env[a]
    if isinstance(a, (list, tuple)):
        return type(a)(_map_args(e, env) for e in a)
    if isinstance(a, dict):
        return {k: _map_args(v, env) for k, v in a.items()}
    return a


def _wrap_output(ctx: ImportContext, node: torch.fx.Node, out: Any, val: Any) -> Any:
    """Checks an entry's result against torch's fake value; casts where dtypes differ."""
    if isinstance(val, (list, tuple)):
        outs = out if isinstance(out, (list, tuple)) else (out,)
        return tuple(_wrap_output(ctx, node, o, v) if o is not None else None
                     for o, v in zip(list(outs) + [None] * (len(val) - len(outs)), val))
    if out is None or not isinstance(val, torch.Tensor):
        return None
    if isinstance(out, TV):
        out = out.id
    if not isinstance(out, int):
        raise TranslationError(f"{node.target} returned {type(out).__name__}, not a value id")
    got_dtype, got_dims = ctx.b.value_type(out)
    if got_dims is not None:
        if len(got_dims) != val.dim():
            raise TranslationError(
                f"{node.format_node()}: ferrite infers rank {len(got_dims)}, torch {val.dim()}")
        for g, t in zip(got_dims, val.shape):
            if isinstance(g, int) and is_static_int(t) and g != static_int(t):
                raise TranslationError(f"{node.name} ({node.target}): ferrite infers shape "
                                       f"{got_dims}, torch {list(val.shape)}")
    if FERRITE_TO_TORCH.get(got_dtype) != val.dtype:
        out = ctx.cast(out, val.dtype)
    return TV(out, val.dtype, tuple(val.shape))


def import_graph(gm: torch.fx.GraphModule, static_args: Dict[int, torch.Tensor],
                 name: str = "graph", lookup: Optional[Callable[[Any], Any]] = None,
                 mirror: Optional[torch.device] = None) -> ImportedGraph:
    """Builds a ferrite graph from an ATen-level FX graph.

    `static_args` maps placeholder positions to real tensors that become constants (parameters
    and buffers, bound without a copy); the other tensor placeholders become graph inputs.
    Static tensors on `mirror` (the GPU the Session runs on) are also bound in place there: the
    Session reads them in GPU memory instead of uploading copies.
    """
    from .aten_table import lookup as table_lookup

    lookup = lookup or table_lookup
    b = _core.GraphBuilder(name)
    ctx = ImportContext(b)
    env: Dict[torch.fx.Node, Any] = ctx.env
    feeds: List[Tuple[str, int]] = []
    placeholders = [n for n in gm.graph.nodes if n.op == "placeholder"]
    sym_placeholders = []
    for i, ph in enumerate(placeholders):
        val = fake_value(ph)
        if isinstance(val, torch.Tensor):
            if val.dtype not in TORCH_TO_FERRITE:
                raise TranslationError(f"input {ph.name}: dtype {val.dtype} is not supported")
            if i in static_args:
                real = static_args[i].detach()
                if not real.is_contiguous():
                    real = real.contiguous()
                host = real.cpu() if real.device.type != "cpu" else real
                vid = b.add_constant(ph.name, host)
                if mirror is not None and real.device == mirror:
                    # The Session reads the parameter where it already is; the host copy serves
                    # compile-time work (folding) and host steps only.
                    b.mirror_constant(vid, real.data_ptr())
                env[ph] = TV(vid, real.dtype, tuple(real.shape))
                continue
            dims = [ferrite_dim(d) for d in val.shape]
            vid = b.add_input(ph.name, TORCH_TO_FERRITE[val.dtype], dims)
            for d, s in enumerate(val.shape):
                if isinstance(s, torch.SymInt) and s.node.expr.is_Symbol:
                    ctx.add_sym_source(s.node.expr.name, vid, d)
            env[ph] = TV(vid, val.dtype, tuple(val.shape))
            feeds.append(("arg", i))
        elif isinstance(val, torch.SymInt):
            env[ph] = Sym(val.node.expr)
            sym_placeholders.append((i, ph, val))
        elif isinstance(val, (int, float, bool)) or val is None:
            env[ph] = val
        else:
            raise TranslationError(f"input {ph.name}: {type(val).__name__} is not supported")
    # A size symbol no tensor dim carries is fed at run time as an int64 [1] input.
    for i, ph, val in sym_placeholders:
        e = val.node.expr
        if e.is_Symbol and not ctx.has_sym_source(e.name):
            vid = b.add_input(ph.name, "i64", [1])
            ctx._sym_cache[e] = vid
            feeds.append(("sym", i))
    count = 0
    for n in gm.graph.nodes:
        if n.op == "call_function":
            if n.target is operator.getitem:
                env[n] = env[n.args[0]][n.args[1]]
                continue
            entry = lookup(n.target)
            if entry is None:
                raise TranslationError(f"{n.name}: no ferrite translation for {n.target}")
            args, kwargs = _map_args(n.args, env), _map_args(n.kwargs, env)
            ctx.node = n
            val = fake_value(n)
            if isinstance(val, (torch.SymInt, int)) and not isinstance(val, bool):
                raise TranslationError(f"{n.name}: symbolic integer results stay in PyTorch")
            out = entry.fn(ctx, n, *args, **kwargs)
            env[n] = _wrap_output(ctx, n, out, val)
            count += 1
        elif n.op == "get_attr":
            t = getattr(gm, n.target)
            if not isinstance(t, torch.Tensor):
                raise TranslationError(f"{n.name}: attribute {n.target} is not a tensor")
            vid = b.add_constant(n.name, t.detach().contiguous().cpu())
            env[n] = TV(vid, t.dtype, tuple(t.shape))
        elif n.op == "output":
            outputs, graph_outs = _plan_outputs(ctx, n.args[0], env, placeholders)
            b.set_outputs(graph_outs)
            return ImportedGraph(b, feeds, outputs, count)
        elif n.op != "placeholder":
            raise TranslationError(f"{n.name}: FX op {n.op} is not supported")
    raise TranslationError("graph has no output node")


def _plan_outputs(ctx: ImportContext, result: Any, env: Dict[torch.fx.Node, Any],
                  placeholders: List[torch.fx.Node]) -> Tuple[List[Tuple[str, Any]], List[int]]:
    items = list(result) if isinstance(result, (list, tuple)) else [result]
    outputs: List[Tuple[str, Any]] = []
    graph_outs: List[int] = []
    for item in items:
        if isinstance(item, torch.fx.Node) and item.op == "placeholder":
            # Passed straight through: hand back the caller's tensor (no copy, same as eager).
            outputs.append(("arg", placeholders.index(item)))
            continue
        v = env.get(item) if isinstance(item, torch.fx.Node) else item
        if isinstance(item, torch.fx.Node) and isinstance(fake_value(item), torch.Tensor) and \
                not isinstance(v, TV):
            raise TranslationError(f"output {item.name}: its translation does not produce it")
        if isinstance(v, TV):
            vid = v.id
            if vid in graph_outs:
                vid = ctx.op("Identity", [vid])
            graph_outs.append(vid)
            outputs.append(("out", len(graph_outs) - 1))
        else:
            outputs.append(("value", v))
    return outputs, graph_outs
