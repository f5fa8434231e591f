"""A compiled ferrite partition: the callable that replaces one FX submodule at run time."""

from __future__ import annotations

import warnings
from typing import Any, Dict, List, Optional, Sequence

import torch
import torch.fx

from .. import _core, distributed
from .._session import _TORCH_DTYPES, _described, _gpu_index
from .fx_importer import ImportedGraph, TranslationError, import_graph
from .options import CompileOptions

# torch's C++ check of data pointers at given indices (what CUDA-graph trees use), where present.
_ptrs_equal = getattr(torch._C, "_tensors_data_ptrs_at_indices_equal", None)


def _torch_dtype(name: str) -> torch.dtype:
    return _TORCH_DTYPES[name]


def _default_device(args: Sequence[Any]) -> str:
    for a in args:
        if isinstance(a, torch.Tensor) and a.device.type == "cuda":
            return "cuda"
    return "cpu"


def _mirror_device(device: str) -> Optional[torch.device]:
    """The GPU whose memory a `device` Session reads (`cuda:N`; for `cuda`, FERRITE_CUDA_DEVICE
    picks the ordinal)."""
    if device.split(":")[0] != "cuda":
        return None
    return torch.device("cuda", _gpu_index(device))


class CompiledPartition:
    """Runs an FX graph module through a ferrite Session.

    The Session is built on the first call, when the real values of the static inputs
    (parameters and buffers) are known: they become graph constants over the same memory (no
    copy; on cuda the Session reads GPU parameters where they are). A static input whose storage or version changes later (``load_state_dict``, an
    optimizer step, ``.copy_()``) makes the next call rebuild the Session over the new values.
    """

    def __init__(self, gm: torch.fx.GraphModule, static_indices: Sequence[int],
                 options: CompileOptions, name: str, training: bool = False) -> None:
        self.gm = gm
        self.training = training  # of a training step's forward or backward graph
        self.static_indices = sorted(set(static_indices))
        self.options = options
        self.name = name
        self._session: Any = None
        self._imported: Optional[ImportedGraph] = None
        self._static_keys: List[Any] = []
        self._statics: Dict[int, Any] = {}
        self._eager = False  # compile failed: run the FX module itself
        self._ran = False  # the Session has run once (later runs may release their inputs)
        self.builds = 0
        self.device: Optional[str] = None
        # tensor_parallel="auto": what the split did (split_report()), or why the partition runs
        # whole on every rank.
        self.split: Optional[Dict[str, Any]] = None
        self.unsharded_reason: Optional[str] = None
        # Writes into inputs (mutations.py): FX output k is the new value of placeholder a. The
        # Session stores those it can into the input's memory (`_into`: ferrite output -> feed);
        # the rest are copied here after the run. Counts over all runs: `ferrite_writes` left in
        # the input by the Session (write_stats() tells its kernels' from its copies) and
        # `python_copies` copied here.
        self.writes: Dict[int, int] = {}
        self._into: Dict[int, int] = {}
        self.ferrite_writes = 0
        self.python_copies = 0
        out = next(n for n in reversed(gm.graph.nodes) if n.op == "output")
        self._tuple_out = isinstance(out.args[0], (list, tuple))

    # ---- building ------------------------------------------------------------------------------
    def _keys(self, args: Sequence[Any]) -> List[Any]:
        # Everything the static inputs are checked by: each tensor's data pointer and version
        # counter (a new shape or dtype means new storage; resize_ and every in-place write bump
        # the version), the value of anything else.
        T = torch.Tensor
        return [(a.data_ptr(), a._version) if isinstance(a, T) else a
                for a in [args[i] for i in self.static_indices]]

    def _remember_statics(self, args: Sequence[Any]) -> None:
        T = torch.Tensor
        self._static_keys = self._keys(args)
        self._tensor_statics = [i for i in self.static_indices if isinstance(args[i], T)]
        self._static_ptrs = [args[i].data_ptr() for i in self._tensor_statics]
        self._static_positions = list(range(len(self._tensor_statics)))
        self._static_versions = [args[i]._version for i in self._tensor_statics]
        self._other_statics = [(i, args[i]) for i in self.static_indices
                               if not isinstance(args[i], T)]

    def _build(self, args: Sequence[Any]) -> None:
        self._ran = False
        o = self.options
        device = o.device or _default_device(args)
        one_rank = distributed.resolve(o.tensor_parallel, None, device, o.process_group)
        if one_rank is not None:
            device = one_rank[0]
        statics = {i: args[i] for i in self.static_indices if isinstance(args[i], torch.Tensor)}
        kw = dict(precision=o.precision, threads=o.threads, autotune=o.autotune,
                  passes=list(o.passes) if o.passes is not None else None,
                  dump_dir=f"{o.dump_dir}/{self.name}" if o.dump_dir else None)
        imported = import_graph(self.gm, statics, self.name, mirror=_mirror_device(device))
        self._session = None
        if one_rank is not None:
            self._session = self._build_rank(imported, device, one_rank[1], kw)
            if self._session is None:  # a whole-model Session over a fresh import
                imported = import_graph(self.gm, statics, self.name,
                                        mirror=_mirror_device(device))
        if self._session is None:
            into = self._plan_writes(imported, device)
            self._session = imported.builder.build_session(device=device,
                                                           outputs_into_inputs=into, **kw)
        self._imported = imported
        self._statics = statics  # the Session may read these in place: keep them alive
        self._remember_statics(args)
        self.device = device
        self.builds += 1

    def _build_rank(self, imp: ImportedGraph, device: str, comm: Any, kw: Dict[str, Any]) -> Any:
        """This rank's shard of the partition, or None (after one warning) when some rank could
        not build its own: then every rank runs the partition whole, since ranks that split
        and ranks that do not would wait for each other's collectives forever."""
        self._into = {}
        session, why = None, ""
        try:
            session = imp.builder.build_rank_session(comm, device=device, **kw)
        except Exception as e:  # whatever it is, the other ranks must hear of it
            why = f"{type(e).__name__}: {e}"
        if distributed.all_agree(session is not None, self.options.process_group):
            self.split = dict(session.split_report())
            return session
        self.unsharded_reason = why or "another rank could not split it"
        warnings.warn(f"ferrite: partition {self.name} runs unsharded on every rank: "
                      f"{self.unsharded_reason}", RuntimeWarning, stacklevel=4)
        return None

    def _plan_writes(self, imp: ImportedGraph, device: str) -> List[int]:
        """The Session's outputs_into_inputs: per ferrite output, the feed it is written into.
        On cpu, whose Session reads the caller's tensors in place, and on cuda, whose run takes
        the input's memory as that output's (_run_on_gpu): the kernels store into them. f32
        storage only (other precisions convert the inputs)."""
        self._into = {}
        self._into_feeds = {}
        on_device = device == "cpu" or device.split(":")[0] == "cuda"
        if not self.writes or not on_device or self.options.precision != "f32":
            return []
        into = [-1] * sum(1 for kind, _ in imp.outputs if kind == "out")
        for k, a in self.writes.items():
            kind, v = imp.outputs[k]
            if kind == "out" and ("arg", a) in imp.feeds:
                into[v] = imp.feeds.index(("arg", a))
                self._into[k] = into[v]
                self._into_feeds[v] = into[v]
        return into if self._into else []

    def _copy_writes(self, args: Sequence[Any], result: Sequence[Any], done: Any = ()) -> None:
        """Writes each new input value that ferrite did not (`done`: FX outputs written)."""
        with torch.no_grad():
            for k, a in self.writes.items():
                if k in done:
                    continue
                args[a].detach().copy_(result[k])
                self.python_copies += 1

    def _run_eager(self, args: Sequence[Any]) -> Any:
        result = self.gm(*args)
        if self.writes:
            self._copy_writes(args, result if self._tuple_out else (result,))
        return result

    def write_stats(self) -> Dict[str, int]:
        """The last run's writes into inputs as the Session counted them (0s before a run)."""
        m = self._session.stats().get("memory", {}) if self._session is not None else {}
        return {k: int(m.get(k, 0)) for k in ("outputs_in_place", "outputs_copied_into_inputs",
                                              "output_bytes_copied_into_inputs")}

    def _stale(self, args: Sequence[Any]) -> bool:
        # On every call, over hundreds of parameters: the data pointers in one C++ call (as
        # CUDA-graph trees check theirs), the versions in one comprehension (5x cheaper than
        # building a key per tensor; the GPU path is launch-bound at small batches).
        if _ptrs_equal is None:
            return self._keys(args) != self._static_keys
        statics = [args[i] for i in self._tensor_statics]
        if not _ptrs_equal(statics, self._static_ptrs, self._static_positions):
            return True
        if [a._version for a in statics] != self._static_versions:
            return True
        return any(args[i] != v for i, v in self._other_statics)

    def _fall_back(self, e: BaseException) -> None:
        if self.options.fallback == "raise":
            raise e
        if self.options.fallback == "warn":
            warnings.warn(f"ferrite: partition {self.name} runs in eager PyTorch: "
                          f"{type(e).__name__}: {e}", RuntimeWarning, stacklevel=3)
        self._eager = True

    # ---- running -------------------------------------------------------------------------------
    def _run_on_gpu(self, feeds: List[Any], device: torch.device, release: bool) -> List[Any]:
        """Inputs and outputs in GPU memory, ordered on torch's current stream. `release`: the
        caller holds no other reference to the inputs, and each is dropped from `feeds` once the
        run no longer reads it, so that torch can reuse its memory (a backward's saved
        activations) for what the run allocates later."""
        outs: Dict[int, Any] = {}
        # Outputs the Session writes into their inputs (an optimizer step's parameters and
        # states): their memory is the input's own, so the kernel updates it in place.
        into = {v: feeds[f] for v, f in self._into_feeds.items()} if self._into else {}

        # Called once per output, in the order the run places them (not necessarily 0, 1, ...):
        # step by step, ferrite computes each output in the tensor made here.
        def alloc(i: int, dims: tuple, dtype: str) -> int:
            t = into.get(i)
            if t is None or tuple(t.shape) != tuple(dims) or t.dtype != _torch_dtype(dtype):
                t = torch.empty(dims, dtype=_torch_dtype(dtype), device=device)
            outs[i] = t
            return t.data_ptr()

        # The run's intermediates and scratch come from torch's caching allocator too, for the
        # run alone, so partitions and eager code share one pool, as Inductor's kernels do.
        # In a training graph every value has a block of its own, given back after its last
        # reader (memory_free), so that what the run holds shrinks as its inputs die; an
        # inference graph's intermediates take one block (its planned arena) for the run.
        lent: Dict[int, Any] = {}

        def memory(nbytes: int) -> int:
            t = torch.empty(nbytes, dtype=torch.uint8, device=device)
            lent[t.data_ptr()] = t
            return t.data_ptr()

        def memory_free(ptr: int) -> None:
            del lent[ptr]

        def input_done(i: int) -> None:
            feeds[i] = None

        # Described, not exported: `feeds` keeps the tensors alive until input_done drops them.
        self._session.run_device([], [_described(t) for t in feeds], alloc,
                                 torch.cuda.current_stream(device).cuda_stream,
                                 gpu=_gpu_index(self.device), memory=memory,
                                 input_done=input_done if release else None,
                                 memory_free=memory_free if self.training else None)
        del lent  # freed on torch's stream, which waits for the run's work
        return [outs[i] for i in range(len(outs))]

    def __call__(self, *args: Any) -> Any:
        return self.call_boxed(list(args))

    def call_boxed(self, args: List[Any]) -> Any:
        """A run that may drop the inputs from `args` (the caller's only references, as in
        AOTAutograd's boxed calling convention) once ferrite has read them."""
        if self._eager:
            return self._run_eager(args)
        if self._session is None or self._stale(args):
            try:
                self._build(args)
            except (_core.FerriteError, TranslationError, NotImplementedError, ValueError,
                    KeyError, TypeError) as e:
                self._fall_back(e)
                return self._run_eager(args)
        imp = self._imported
        feeds = []
        out_device = None
        resident = self.device.split(":")[0] == "cuda"  # CUDA tensors stay on the GPU
        into = self._into
        for kind, i in imp.feeds:
            a = args[i]
            if kind == "sym":
                feeds.append(torch.tensor([int(a)], dtype=torch.int64))
                continue
            if a.requires_grad:
                a = a.detach()
            if a.device.type != "cpu":
                out_device = a.device
                if not (resident and a.device.type == "cuda"):
                    a = a.cpu()  # staged: this device's Session reads host memory
            # Sessions read dense row-major tensors; a strided view (x.T, a slice) is packed once
            # (then a write into it must be copied back: not counted as done in place).
            if not a.is_contiguous():
                a = a.contiguous()
                into = {}
            feeds.append(a)
        a = None  # noqa: F841  (no reference beyond `feeds` and `args`)
        # After a first good run (an error could fall back to eager, which needs the inputs),
        # inputs needed only by ferrite leave `args`: only `feeds` holds them, until read.
        release = resident and out_device is not None and self._ran
        if release:
            keep = set(self.writes.values()) | {v for kind, v in imp.outputs if kind == "arg"}
            for i in range(len(args)):
                if i not in keep:
                    args[i] = None
        try:
            if resident and out_device is not None:
                outs = self._run_on_gpu(feeds, out_device, release)
                out_device = None
            else:
                outs = self._session.run([], feeds, "torch")
        except _core.FerriteError as e:
            if self.options.fallback == "raise" or release:
                raise
            self._fall_back(e)
            return self._run_eager(args)
        self._ran = True
        result = []
        for kind, v in imp.outputs:
            if kind == "out":
                t = outs[v]
                result.append(t.to(out_device) if out_device is not None else t)
            elif kind == "arg":
                result.append(args[v])
            else:
                result.append(v)
        if self.writes:
            # The Session hands back the input it wrote (its memory): anything else (an input
            # that reached it as a copy) is copied here.
            done = {k for k in into if result[k].data_ptr() == args[self.writes[k]].data_ptr()}
            self.ferrite_writes += len(done)
            self._copy_writes(args, result, done)
        return tuple(result) if self._tuple_out else result[0]
