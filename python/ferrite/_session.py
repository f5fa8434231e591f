"""The Session API: an ONNX model compiled for one device, run on arrays."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Mapping, Sequence, Union

from . import _core

ArrayLike = Any  # numpy.ndarray, torch.Tensor, or anything with __dlpack__ on the host


def default_device() -> tuple[str, str]:
    """``(name, why)``: the device a Session given none runs on (cuda where a GPU answers, else
    cpu; never the ``reference`` oracle), and the reason."""
    return tuple(_core.default_device())


def devices() -> list[str]:
    """Names of the devices this build can run on (built in, and plugins found)."""
    return list(_core.devices())


def _framework_of(x: Any) -> str:
    mod = type(x).__module__
    return "torch" if mod.startswith("torch") else "numpy"


def _on_cuda(x: Any) -> bool:
    return _framework_of(x) == "torch" and x.device.type == "cuda"


def _contiguous_host(x: Any, what: str) -> Any:
    """The array itself when ferrite can read it in place, else a contiguous host copy."""
    if _framework_of(x) == "torch":
        if x.device.type != "cpu":
            raise _core.UnsupportedError(
                f"{what}: tensor is on {x.device}; a Session on this device reads host memory "
                "(move it with .cpu())")
        if x.requires_grad:
            x = x.detach()
        return x if x.is_contiguous() else x.contiguous()
    import numpy as np

    a = np.asarray(x) if not hasattr(x, "__dlpack__") else x
    if isinstance(a, np.ndarray) and not a.flags.c_contiguous:
        a = np.ascontiguousarray(a)
    return a


def _gpu_index(device: str) -> int:
    """The GPU a Session on ``device`` runs on: its unit (``cuda:1``), else FERRITE_CUDA_DEVICE,
    else 0 (as the cuda device picks it)."""
    name, _, unit = device.partition(":")
    if unit:
        return int(unit)
    return int(os.environ.get("FERRITE_CUDA_DEVICE") or 0)


def _torch_dtypes() -> dict:
    import torch

    # ferrite's dtype names (ir/dtype.cpp) to torch's.
    return {
        "f32": torch.float32, "f16": torch.float16, "bf16": torch.bfloat16,
        "f64": torch.float64, "i8": torch.int8, "i16": torch.int16,
        "i32": torch.int32, "i64": torch.int64, "u8": torch.uint8,
        "u16": torch.uint16, "u32": torch.uint32, "u64": torch.uint64,
        "bool": torch.bool,
    }


_DTYPE_NAMES: dict = {}
# FERRITE_DLPACK_INPUTS=1 passes CUDA tensors to run_device through DLPack as before (A/B runs).
_DLPACK_INPUTS = os.environ.get("FERRITE_DLPACK_INPUTS") == "1"


def _described(t: Any) -> Any:
    """A contiguous CUDA tensor as the (address, dims, dtype name, GPU) tuple that
    ``run_device`` takes (building it costs a fraction of a DLPack export, and the GPU runs of
    the torch.compile backend pass about a thousand tensors a training step); anything else as
    it is. The caller keeps the tensor alive for the run."""
    if _DLPACK_INPUTS:
        return t
    if not _DTYPE_NAMES:
        _DTYPE_NAMES.update({v: k for k, v in _torch_dtypes().items()})
    name = _DTYPE_NAMES.get(t.dtype) if t is not None and t.is_cuda else None
    if name is None or not t.is_contiguous():
        return t
    return (t.data_ptr(), tuple(t.shape), name, t.get_device())


class _LazyTorchDTypes(dict):
    def __missing__(self, key: str) -> Any:
        if not self:
            self.update(_torch_dtypes())
            if key in self:
                return self[key]
        raise _core.UnsupportedError(f"ferrite dtype {key} has no torch equivalent")


_TORCH_DTYPES = _LazyTorchDTypes()


class Session:
    """An ONNX model compiled for one device.

    ``Session(model, device=None, precision="f32", threads=0, autotune=False, passes=None,
    cache_dir=None, dump_dir=None, tensor_parallel=1, contexts=0)``

    * ``model``: a path to an ``.onnx`` file, or its bytes (external data is then resolved
      against ``base_dir``, refused when that is None).
    * ``device``: ``"cpu"``, ``"cuda"`` (``"cuda:1"``: the second GPU), ``"reference"`` (the
      oracle), or a plugin such as ``"gxu"``; :func:`ferrite.devices` lists them. None: the best
      usable one (cuda where a GPU answers, else cpu; :func:`ferrite.default_device` says which
      and why), and :attr:`device` tells.
    * ``precision``: storage precision of float tensors: ``"f32"``, ``"tf32"``, ``"bf16"``,
      ``"fp16"``. The model's interface keeps its dtypes.
    * ``threads``: host threads (0: the device's default). ``autotune``: time kernel launch
      candidates on the first run at each size (persisted). ``passes``: graph passes instead of
      the device's defaults (``[]`` for none). ``cache_dir``: the compile cache's directory
      (process-wide: sets ``FERRITE_CACHE_DIR``). ``dump_dir``: generated code, fusion and
      memory plans are written there.
    * ``tensor_parallel``: split the model over this many ranks (attention by heads, MLPs by
      columns then rows, embeddings by hidden columns, with AllReduce/AllGather between them) and
      run them at once, as threads exchanging data in host memory (docs/distributed.md); a model
      path only. :meth:`split_report` says what was split. Statistics and :meth:`ir` are rank 0's.
      ``"auto"``: one rank per process, inside ``torch.distributed`` (``torchrun``): this
      process keeps only its rank's shard and runs the collectives through the default process
      group (NCCL bootstrapped over it on cuda, where ``cuda`` means ``cuda:LOCAL_RANK``); a
      whole-model Session when ``torch.distributed`` is not initialised or has one rank.
    * ``contexts``: how many runs of this Session may proceed at once when threads call
      :meth:`run` together (each an execution context over the shared code and weights: an
      arena, and on cuda a stream of its own). 0: the device's default (8 on cpu, 4 on cuda).
      Contexts are made only when runs overlap. Not with ``tensor_parallel``.
    * ``communicator``: with one rank per process, the group to use instead of the default one
      (:func:`ferrite.distributed.communicator`, or ``_core.Communicator.from_python`` over any
      object with ``all_reduce``/``all_gather``/``reduce_scatter``).

    Dims the model leaves symbolic compile once for every size. Inputs are read in place (no
    copy) when they are C-contiguous host arrays; outputs come back as arrays of the inputs'
    framework (torch in, torch out) over ferrite's memory, without a copy. On ``cuda``, torch
    tensors on the GPU stay there: outputs are new CUDA tensors, and the run is ordered on
    torch's current stream (it returns once the work is queued, like a torch op).

    Errors raise :class:`ferrite.FerriteError` (:class:`ferrite.UnsupportedError` for valid
    models ferrite does not handle yet) with ferrite's message, naming the node or tensor.
    """

    def __init__(
        self,
        model: Union[str, os.PathLike, bytes],
        device: str | None = None,
        *,
        precision: str = "f32",
        threads: int = 0,
        autotune: bool = False,
        passes: Sequence[str] | None = None,
        cache_dir: Union[str, os.PathLike, None] = None,
        dump_dir: Union[str, os.PathLike, None] = None,
        base_dir: Union[str, os.PathLike, None] = None,
        tensor_parallel: Union[int, str] = 1,
        communicator: Any = None,
        contexts: int = 0,
    ) -> None:
        if cache_dir is not None:
            os.environ["FERRITE_CACHE_DIR"] = str(cache_dir)
        kw = dict(
            device=device or "",
            precision=precision,
            threads=threads,
            autotune=autotune,
            passes=list(passes) if passes is not None else None,
            dump_dir=str(dump_dir) if dump_dir is not None else None,
        )
        from . import distributed

        self._gpu = _gpu_index(device or "")
        one_rank = distributed.resolve(tensor_parallel, communicator, device or "")
        if tensor_parallel != 1 and isinstance(model, (bytes, bytearray, memoryview)):
            raise _core.UnsupportedError("tensor_parallel needs a model path, not bytes")
        if one_rank is not None:
            kw["device"], comm = one_rank
            self._gpu = _gpu_index(kw["device"])
            self._s = _core.TensorParallelSession.load_rank(str(Path(model)), communicator=comm,
                                                            **kw)
        elif tensor_parallel not in (1, "auto"):
            self._s = _core.TensorParallelSession.load(str(Path(model)), size=int(tensor_parallel),
                                                       **kw)
        elif isinstance(model, (bytes, bytearray, memoryview)):
            self._s = _core.Session.from_bytes(
                bytes(model), str(base_dir) if base_dir is not None else "", contexts=contexts,
                **kw)
        else:
            self._s = _core.Session.load(str(Path(model)), contexts=contexts, **kw)

    @classmethod
    def _wrap(cls, core_session: Any) -> "Session":
        self = cls.__new__(cls)
        self._s = core_session
        self._gpu = _gpu_index("")
        return self

    @property
    def device(self) -> str:
        """The device this Session runs on."""
        return self._s.device

    @property
    def inputs(self) -> list[tuple[str, str, list | None]]:
        """``(name, dtype, dims)`` of each graph input; a dim is an int, a symbol (str) or None."""
        return list(self._s.inputs)

    @property
    def outputs(self) -> list[tuple[str, str, list | None]]:
        """``(name, dtype, dims)`` of each graph output, as declared."""
        return list(self._s.outputs)

    @property
    def compiles(self) -> int:
        """How many times the model was compiled (recompiles for new sizes included)."""
        return self._s.compiles

    def stats(self) -> dict:
        """Compiles and the last run's memory, tuning and device-memory statistics."""
        return dict(self._s.stats())

    @property
    def rank(self) -> tuple[int, int]:
        """``(rank, size)``: which rank of how many this Session runs (``(0, 1)`` for a whole
        model; rank 0 for ranks that are threads of this process)."""
        if hasattr(self._s, "rank"):
            return self._s.rank, self._s.size
        return 0, 1

    def split_report(self) -> dict:
        """What a tensor-parallel Session split: counts, per-rank weight bytes, one line per
        decision, the collectives library (``{}`` for a whole-model Session)."""
        return dict(self._s.split_report()) if hasattr(self._s, "split_report") else {}

    def ir(self) -> str:
        """The graph the last run used (after passes), as text."""
        return self._s.ir()

    def run(self, inputs: Union[Mapping[str, ArrayLike], Sequence[ArrayLike]]) -> list[Any]:
        """Runs the model; ``inputs`` by name (a mapping) or in graph-input order (a sequence).

        Returns the outputs in graph-output order, as torch tensors when any input was a torch
        tensor, else as numpy arrays.
        """
        if isinstance(inputs, Mapping):
            names = [str(k) for k in inputs.keys()]
            values = list(inputs.values())
        else:
            names, values = [], list(inputs)
        if self.device == "cuda" and any(_on_cuda(v) for v in values):
            return self._run_cuda(names, values)
        framework = "torch" if any(_framework_of(v) == "torch" for v in values) else "numpy"
        arrays = [
            _contiguous_host(v, f"input '{n}'" if names else f"input {i}")
            for i, (n, v) in enumerate(zip(names or [""] * len(values), values))
        ]
        return list(self._s.run(names, arrays, framework))

    def _run_cuda(self, names: list[str], values: list[Any]) -> list[Any]:
        """Device-resident run: CUDA tensors in and out, on torch's current stream."""
        import torch

        device = next(v.device for v in values if _on_cuda(v))
        arrays = []
        for i, v in enumerate(values):
            if _framework_of(v) != "torch":
                v = torch.as_tensor(v)
            if v.requires_grad:
                v = v.detach()
            arrays.append(v if v.is_contiguous() else v.contiguous())
        outputs: dict[int, Any] = {}

        # Called once per output, in the order the run places them (not necessarily 0, 1, ...).
        def alloc(i: int, dims: tuple, dtype: str) -> int:
            t = torch.empty(dims, dtype=_TORCH_DTYPES[dtype], device=device)
            outputs[i] = t
            return t.data_ptr()

        # Intermediates and scratch of the run from torch's caching allocator, for the run alone.
        lent: list[Any] = []

        def memory(nbytes: int) -> int:
            t = torch.empty(nbytes, dtype=torch.uint8, device=device)
            lent.append(t)
            return t.data_ptr()

        stream = torch.cuda.current_stream(device).cuda_stream
        self._s.run_device(names, [_described(a) for a in arrays], alloc, stream, gpu=self._gpu,
                           memory=memory)
        del lent  # freed on torch's stream, which waits for the run's work
        return [outputs[i] for i in range(len(outputs))]

    def time_resident(self, inputs: Mapping[str, ArrayLike], runs: int = 10) -> dict[str, Any]:
        """Device time of ``runs`` runs on ``inputs`` kept in the device's memory (copied there
        once; each run replays the recorded CUDA graph where the device records runs): a dict of
        ``seconds`` (one sample per run) and ``method`` (how they were taken). A tensor-parallel
        Session times every rank at once; each sample is the slowest rank's. Host devices do not
        time runs themselves: ``UnsupportedError``."""
        names = [str(k) for k in inputs.keys()]
        arrays = [_contiguous_host(v, f"input '{n}'") for n, v in inputs.items()]
        return dict(self._s.time_resident(names, arrays, runs))

    def __call__(self, *args: ArrayLike) -> list[Any]:
        """``session(x, y)`` is ``session.run([x, y])``."""
        return self.run(list(args))

    def __repr__(self) -> str:
        ins = ", ".join(f"{n}: {d}{dims}" for n, d, dims in self.inputs)
        return f"<ferrite.Session device={self.device!r} inputs=({ins}) compiles={self.compiles}>"
