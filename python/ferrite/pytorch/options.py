"""Options of the ``torch.compile`` backend: ``torch.compile(m, backend="ferrite",
options={...})``."""

from __future__ import annotations

import dataclasses
from typing import Any, Mapping, Optional, Sequence

_PRECISIONS = ("f32", "tf32", "bf16", "fp16")


@dataclasses.dataclass(frozen=True)
class CompileOptions:
    """What ``options=`` may hold.

    * ``device``: the ferrite device (``"cpu"``, ``"cuda"``, ``"reference"``, ``"gxu"``, ...).
      Default: the device of the model's tensors (``cuda`` for CUDA tensors, else ``cpu``).
    * ``precision``: ``"f32"`` (default), ``"tf32"``, ``"bf16"``, ``"fp16"``: storage precision
      ferrite uses for float tensors inside the compiled graph (the interface keeps torch's dtypes).
    * ``threads``: host threads for ferrite's kernels (0: the device's default).
    * ``autotune``: time kernel launch candidates on the first run at each size.
    * ``passes``: graph passes instead of the device's defaults.
    * ``dump_dir``: generated code, fusion and memory plans of each partition go there.
    * ``fallback``: ``"warn"`` (default: a partition that fails to compile runs in eager PyTorch
      with one warning), ``"silent"``, or ``"raise"`` (for tests and debugging).
    * ``min_partition_ops``: partitions with fewer compute ops stay in eager (default 1).
    * ``tensor_parallel``: ``1`` (default), or ``"auto"``: inside ``torch.distributed``
      (``torchrun``), every rank compiles the whole model and each partition keeps this rank's
      shard, its collectives through ``process_group`` (docs/distributed.md). A partition that
      cannot be split on some rank runs whole on every rank, with one warning.
    * ``process_group``: the group of ``tensor_parallel="auto"`` (None: the default group).
    * ``recompute``: training: ``True`` (default) lets AOTAutograd's min-cut partitioner
      recompute cheap ops (pointwise, reshapes) in the backward graph instead of saving their
      outputs, as Inductor does: fewer saved activations, and the recomputation fuses into the
      backward's kernels. ``False`` saves every value the backward reads.
    """

    device: Optional[str] = None
    precision: str = "f32"
    threads: int = 0
    autotune: bool = False
    passes: Optional[Sequence[str]] = None
    dump_dir: Optional[str] = None
    fallback: str = "warn"
    min_partition_ops: int = 1
    tensor_parallel: Any = 1
    process_group: Any = None
    recompute: bool = True

    @classmethod
    def from_mapping(cls, options: Optional[Mapping[str, Any]]) -> "CompileOptions":
        options = dict(options or {})
        names = {f.name for f in dataclasses.fields(cls)}
        unknown = sorted(set(options) - names)
        if unknown:
            raise ValueError(
                f"ferrite: unknown torch.compile option(s) {unknown}; known: {sorted(names)}")
        o = cls(**options)
        if o.precision not in _PRECISIONS:
            raise ValueError(f"ferrite: precision must be one of {_PRECISIONS}, not {o.precision!r}")
        if o.fallback not in ("warn", "silent", "raise"):
            raise ValueError("ferrite: fallback must be 'warn', 'silent' or 'raise'")
        if o.tensor_parallel not in (1, "auto"):
            raise ValueError("ferrite: tensor_parallel must be 1 or 'auto' (one rank per process "
                             f"of torch.distributed), not {o.tensor_parallel!r}")
        return o
