"""``ferrite.export``: ahead-of-time compilation through ``torch.export`` and PyTorch's ONNX
exporter (its dynamo path, default opset), in memory."""

from __future__ import annotations

import os
from typing import Any, Dict, Optional, Sequence, Union

import torch


def export(model: torch.nn.Module, args: Sequence[Any], *, kwargs: Optional[Dict] = None,
           dynamic_shapes: Any = None, path: Union[str, os.PathLike, None] = None,
           device: str = "cpu", input_names: Optional[Sequence[str]] = None,
           output_names: Optional[Sequence[str]] = None, **session_options: Any):
    """Exports `model` (``torch.export`` + ``torch.onnx.export(dynamo=True)``) and returns a
    :class:`ferrite.Session` on `device`. `dynamic_shapes` follows ``torch.export`` (e.g.
    ``{"x": {0: torch.export.Dim("batch")}}``); dims exported as dynamic stay symbolic in ferrite,
    so one compile serves every size. With `path`, the ``.onnx`` file is written there too.
    ``session_options`` go to the Session (precision, threads, autotune, ...)."""
    from .._session import Session

    if not isinstance(args, tuple):
        args = tuple(args)
    was_training = model.training
    model.eval()
    try:
        program = torch.onnx.export(model, args, kwargs=kwargs, dynamo=True,
                                    dynamic_shapes=dynamic_shapes, input_names=input_names,
                                    output_names=output_names, verbose=False)
    finally:
        model.train(was_training)
    proto = program.model_proto
    data = proto.SerializeToString()
    if path is not None:
        with open(path, "wb") as f:
            f.write(data)
    return Session(data, device, base_dir=os.getcwd(), **session_options)
