"""Tensor parallelism across processes: one rank per process, launched by ``torchrun``.

Every process loads (or compiles) the whole model; ferrite keeps this rank's shard
(``shard-tensor-parallel{rank=R size=N}``, docs/distributed.md) and runs its collectives through
the ``torch.distributed`` process group:

* on host devices (cpu, reference, plugins) through the process group itself
  (:class:`ProcessGroupCommunicator`: ``all_reduce``/``all_gather_into_tensor``/
  ``reduce_scatter_tensor`` on tensors over ferrite's buffers, no copies); gloo in CI;
* on cuda through an NCCL communicator of ferrite's own, bootstrapped over the process group
  (rank 0's ``ncclUniqueId`` broadcast with ``broadcast_object_list``, then ``ncclCommInitRank``
  on every rank), so that the collectives stay library ops on the rank's stream, captured into
  its CUDA graphs. PyTorch does not expose its own ``ncclComm_t`` portably, so the group's NCCL
  communicator is not shared: the job holds two NCCL communicators per GPU.
"""

from __future__ import annotations

import os
from typing import Any, Dict, Optional, Tuple

from . import _core


def _dist() -> Any:
    import torch.distributed as dist

    return dist


def initialized() -> bool:
    """Whether ``torch.distributed`` is available and its default process group initialised."""
    try:
        dist = _dist()
    except ImportError:
        return False
    return dist.is_available() and dist.is_initialized()


def world(group: Any = None) -> Tuple[int, int]:
    """``(rank, size)`` of this process in ``group`` (None: the default group)."""
    dist = _dist()
    return dist.get_rank(group), dist.get_world_size(group)


class ProcessGroupCommunicator:
    """Collectives of a host-memory rank through a ``torch.distributed`` process group.

    ferrite calls these with 1-D CPU tensors over its own buffers, valid only during the call;
    a raised exception fails the run with a :class:`ferrite.FerriteError` naming the collective.
    """

    def __init__(self, group: Any = None) -> None:
        self.group = group

    def all_reduce(self, inp: Any, out: Any) -> None:
        if out.data_ptr() != inp.data_ptr():
            out.copy_(inp)
        _dist().all_reduce(out, group=self.group)

    def all_gather(self, inp: Any, out: Any) -> None:
        _dist().all_gather_into_tensor(out, inp, group=self.group)

    def reduce_scatter(self, inp: Any, out: Any) -> None:
        _dist().reduce_scatter_tensor(out, inp, group=self.group)


def rank_device(device: str) -> str:
    """The device this process's rank runs on: ``cuda`` without a unit becomes ``cuda:LOCAL_RANK``
    (torchrun's local rank, else torch's current GPU); any other name is kept."""
    if device != "cuda":
        return device
    local = os.environ.get("LOCAL_RANK")
    if local is None:
        import torch

        local = str(torch.cuda.current_device())
    return f"cuda:{int(local)}"


# One communicator per (device, group): partitions of a compiled model share it (an NCCL
# communicator holds GPU memory and takes a collective to make).
_communicators: Dict[Tuple[str, int], Any] = {}


def communicator(device: str, group: Any = None) -> Any:
    """This process's rank of ``group`` (None: the default group) for a Session on ``device``
    (as :func:`rank_device` names it): NCCL on cuda, the process group itself elsewhere. Every
    rank of the group must call it (on cuda it is a collective)."""
    key = (device, id(group))
    if key not in _communicators:
        rank, size = world(group)
        if device.split(":")[0] == "cuda":
            c = _nccl_rank(device, group, rank, size)
        else:
            name = f"torch.distributed ({_dist().get_backend(group)})"
            c = _core.Communicator.from_python(ProcessGroupCommunicator(group), rank, size, name)
        _communicators[key] = c
    return _communicators[key]


def _nccl_rank(device: str, group: Any, rank: int, size: int) -> Any:
    """Rank 0 makes the NCCL id; it reaches the others over the process group; all join."""
    dist = _dist()
    box: list = [None]
    if rank == 0:
        try:
            box[0] = ("id", _core.Communicator.device_id(device))
        except _core.FerriteError as e:  # every rank raises it, rather than waiting for an id
            box[0] = ("error", str(e))
    dist.broadcast_object_list(box, src=dist.get_global_rank(group, 0) if group else 0,
                               group=group)
    kind, value = box[0]
    if kind == "error":
        raise _core.FerriteError(f"rank 0 could not make the NCCL group: {value}")
    return _core.Communicator.from_device(device, value, rank, size)


def all_agree(ok: bool, group: Any = None) -> bool:
    """Whether ``ok`` holds on every rank of ``group`` (a collective): ranks that decide to run a
    model sharded or whole must all decide alike, or one would wait for the others forever."""
    import torch

    dist = _dist()
    backend = str(dist.get_backend(group))
    on = "cuda" if backend == "nccl" else "cpu"
    flag = torch.tensor([1 if ok else 0], dtype=torch.int32, device=on)
    dist.all_reduce(flag, op=dist.ReduceOp.MIN, group=group)
    return bool(flag.item())


def resolve(tensor_parallel: Any, communicator_: Optional[Any], device: str,
            group: Any = None) -> Optional[Tuple[str, Any]]:
    """``(rank device, communicator)`` for a one-rank Session, or None for a whole-model one.

    ``tensor_parallel="auto"``: the default process group's world when ``torch.distributed`` is
    initialised with more than one rank, else a whole-model Session. An explicit communicator
    sets the group; ``tensor_parallel`` must then be left at 1, or be ``"auto"`` or its size."""
    device = device or _core.default_device()[0]
    if communicator_ is not None:
        if tensor_parallel not in (1, "auto", communicator_.size):
            raise ValueError(f"tensor_parallel={tensor_parallel!r} but the communicator has "
                             f"{communicator_.size} ranks")
        return device, communicator_
    if tensor_parallel != "auto":
        return None
    if not initialized() or world(group)[1] == 1:
        return None
    dev = rank_device(device)
    return dev, communicator(dev, group)
