"""ferrite's C++ runtime (use the `ferrite` package, not this module)"""

from collections.abc import Callable, Sequence
from typing import Annotated

from numpy.typing import NDArray


class FerriteError(RuntimeError):
    pass

class UnsupportedError(FerriteError):
    pass

def devices() -> list[str]:
    """
    Names of the devices this build can run on (built in and plugins found).
    """

def default_device() -> tuple[str, str]:
    """
    The device a Session without one runs on (cuda where a GPU answers, else cpu), and why.
    """

def device_origin(name: str) -> str: ...

class Communicator:
    @staticmethod
    def from_python(impl: object, rank: int, size: int, name: str = 'python') -> Communicator:
        """
        Collectives through impl.all_reduce / all_gather / reduce_scatter (inp, out), called with 1-D torch tensors over ferrite's buffers, valid only during the call.
        """

    @staticmethod
    def device_id(device: str) -> bytes:
        """
        A new group id of the device's collectives library (rank 0 makes it; NCCL on cuda).
        """

    @staticmethod
    def from_device(device: str, id: bytes, rank: int, size: int) -> Communicator:
        """
        Joins the group of `id` as `rank` of `size` on `device` (every rank calls it; NCCL blocks until all have).
        """

    @property
    def rank(self) -> int: ...

    @property
    def size(self) -> int: ...

    def describe(self) -> str: ...

class Session:
    @staticmethod
    def load(path: str, device: str, precision: str = 'f32', threads: int = 0, autotune: bool = False, passes: Sequence[str] | None = None, dump_dir: str | None = None, contexts: int = 0) -> Session: ...

    @staticmethod
    def from_bytes(data: bytes, base_dir: str, device: str, precision: str = 'f32', threads: int = 0, autotune: bool = False, passes: Sequence[str] | None = None, dump_dir: str | None = None, contexts: int = 0) -> Session: ...

    def run(self, names: Sequence[str], arrays: Sequence[Annotated[NDArray, dict(writable=False)]], framework: str) -> list[object]: ...

    def run_device(self, names: Sequence[str], arrays: Sequence[object], alloc: Callable, stream: int, gpu: int = 0, memory: Callable | None = None, input_done: Callable | None = None, memory_free: Callable | None = None) -> None: ...

    def time_resident(self, names: Sequence[str], arrays: Sequence[Annotated[NDArray, dict(writable=False)]], runs: int) -> dict: ...

    @property
    def inputs(self) -> list: ...

    @property
    def outputs(self) -> list: ...

    @property
    def device(self) -> str: ...

    @property
    def compiles(self) -> int: ...

    def stats(self) -> dict: ...

    def guards(self) -> str: ...

    def ir(self) -> str: ...

class TensorParallelSession:
    @staticmethod
    def load(path: str, device: str, size: int, precision: str = 'f32', threads: int = 0, autotune: bool = False, passes: Sequence[str] | None = None, dump_dir: str | None = None) -> TensorParallelSession: ...

    @staticmethod
    def load_rank(path: str, device: str, communicator: Communicator, precision: str = 'f32', threads: int = 0, autotune: bool = False, passes: Sequence[str] | None = None, dump_dir: str | None = None) -> TensorParallelSession:
        """
        Rank communicator.rank of communicator.size; the other ranks are other processes.
        """

    def run(self, names: Sequence[str], arrays: Sequence[Annotated[NDArray, dict(writable=False)]], framework: str) -> list[object]: ...

    def run_device(self, names: Sequence[str], arrays: Sequence[object], alloc: Callable, stream: int, gpu: int = 0, memory: Callable | None = None, input_done: Callable | None = None, memory_free: Callable | None = None) -> None: ...

    def time_resident(self, names: Sequence[str], arrays: Sequence[Annotated[NDArray, dict(writable=False)]], runs: int) -> dict: ...

    @property
    def inputs(self) -> list: ...

    @property
    def outputs(self) -> list: ...

    @property
    def device(self) -> str: ...

    @property
    def compiles(self) -> int: ...

    @property
    def size(self) -> int: ...

    @property
    def rank(self) -> int: ...

    @property
    def collectives(self) -> str: ...

    def stats(self) -> dict: ...

    def ir(self) -> str: ...

    def split_report(self) -> dict: ...

class GraphBuilder:
    def __init__(self, name: str = 'graph') -> None: ...

    def add_input(self, name: str, dtype: str, dims: Sequence) -> int: ...

    def add_constant(self, name: str, array: Annotated[NDArray, dict(writable=False)]) -> int: ...

    def mirror_constant(self, id: int, address: int) -> None: ...

    def add_node(self, op: str, inputs: Sequence[int | None], attrs: dict, num_outputs: int = 1, domain: str = '', name: str = '') -> list[int]: ...

    def value_type(self, id: int) -> tuple: ...

    def set_outputs(self, ids: Sequence[int]) -> None: ...

    def text(self) -> str: ...

    def build_session(self, device: str, precision: str = 'f32', threads: int = 0, autotune: bool = False, passes: Sequence[str] | None = None, dump_dir: str | None = None, outputs_into_inputs: Sequence[int] = []) -> Session: ...

    def build_rank_session(self, communicator: Communicator, device: str, precision: str = 'f32', threads: int = 0, autotune: bool = False, passes: Sequence[str] | None = None, dump_dir: str | None = None) -> TensorParallelSession: ...
