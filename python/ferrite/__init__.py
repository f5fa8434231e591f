"""ferrite: a deep-learning compiler and runtime.

Three ways in:

* ``ferrite.Session("model.onnx", device="cpu")`` runs an ONNX model on numpy arrays or any
  DLPack tensor (torch included), without copying inputs or outputs on the host.
* ``torch.compile(model, backend="ferrite")`` compiles PyTorch models through ferrite; options go
  in ``torch.compile(..., options={"device": "cpu", "precision": "bf16"})``.
* ``ferrite.export(model, args)`` exports ahead of time (``torch.export`` + the ONNX exporter) and
  returns a Session.

``ferrite.explain(model, *args)`` reports which parts of a PyTorch model ferrite runs and why the
rest stays in eager PyTorch. See docs/python.md and docs/pytorch.md.
"""

from __future__ import annotations

import os as _os
from pathlib import Path as _Path


def _plugin_dirs() -> list[str]:
    # Device plugins (e.g. gxu) sit in ferrite/backends: installed there in a wheel, linked to the
    # build tree's lib/ferrite/backends by a development install (scripts/dev_install_python.sh).
    d = _Path(__file__).resolve().parent / "backends"
    return [str(d)] if d.is_dir() else []


_extra = _plugin_dirs()
if _extra:
    _old = _os.environ.get("FERRITE_BACKEND_PATH", "")
    _os.environ["FERRITE_BACKEND_PATH"] = ":".join([p for p in [_old] if p] + _extra)

from . import _core  # noqa: E402
from ._core import FerriteError, UnsupportedError  # noqa: E402
from ._session import Session, default_device, devices  # noqa: E402
from . import distributed  # noqa: E402  (torch is imported only when it is used)

__version__ = "0.1.0"

__all__ = [
    "Session",
    "FerriteError",
    "UnsupportedError",
    "default_device",
    "devices",
    "export",
    "explain",
    "__version__",
]


def export(*args, **kwargs):
    """Ahead-of-time compile a PyTorch model; see :func:`ferrite.pytorch.export.export`."""
    from .pytorch.export import export as _export

    return _export(*args, **kwargs)


def explain(*args, **kwargs):
    """Report what ferrite runs of a PyTorch model; see :func:`ferrite.pytorch.explain.explain`."""
    from .pytorch.explain import explain as _explain

    return _explain(*args, **kwargs)
