"""PyTorch frontend: ``torch.compile(model, backend="ferrite")``, ``ferrite.export`` and
``ferrite.explain``.

The backend is registered through the ``torch_dynamo_backends`` entry point, so
``backend="ferrite"`` works without importing ferrite first. Dynamo hands over an FX graph,
AOTAutograd turns it into a functional ATen graph, the ATen table (``aten_table``) maps each
supported node onto ferrite IR, nodes ferrite cannot take stay in eager PyTorch, and each ferrite
partition becomes a Session compiled for the chosen device.
"""

from .backend import ferrite_backend
from .options import CompileOptions

__all__ = ["ferrite_backend", "CompileOptions"]
