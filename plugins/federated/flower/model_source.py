"""The attacked model from the user's own code: an importable ``module:function`` or a ``torch.export`` file.

The attacks call the model with substituted weights (``torch.func.functional_call``), so the
module the user's function builds is loaded with the round's global arrays and then exported
with ``torch.export`` (the form :class:`~vispriv.plugins.federated.deep.payloads.DeepFederatedPublic`
carries a user's own model in).
"""

from __future__ import annotations

import importlib
import io
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from vispriv.harness.errors import InputError

if TYPE_CHECKING:
    from torch import nn


def is_export_file(spec: str) -> bool:
    return spec.endswith((".pt2", ".pt")) or Path(spec).expanduser().is_file()


def build_module(spec: str) -> nn.Module:
    """The ``nn.Module`` that ``spec`` names (``package.module:function`` called without arguments, or a .pt2 file)."""
    from torch import nn

    if is_export_file(spec):
        from vispriv.plugins.federated.deep.captured import load_exported

        return load_exported(spec)[1]
    module_name, _, attr = spec.partition(":")
    if not module_name or not attr:
        raise InputError(f"model {spec!r} must be 'package.module:function' or a torch.export (.pt2) file")
    try:
        factory = getattr(importlib.import_module(module_name), attr)
    except (ImportError, AttributeError) as exc:
        raise InputError(f"model {spec!r} cannot be imported ({type(exc).__name__}: {exc})") from None
    try:
        built = factory()
    except Exception as exc:  # noqa: BLE001 -- the user's own code may raise anything
        raise InputError(f"model {spec!r} raised {type(exc).__name__} when called without arguments: {exc}") from None
    if not isinstance(built, nn.Module):
        raise InputError(f"model {spec!r} returned a {type(built).__name__}, not a torch.nn.Module")
    return built


def load_arrays(module: nn.Module, arrays: dict[str, np.ndarray], spec: str) -> None:
    """Load the capture's global ``arrays`` into ``module``; a name or shape that differs is one InputError line."""
    import torch

    state = module.state_dict()
    missing = [k for k in state if k not in arrays]
    extra = [k for k in arrays if k not in state]
    if missing or extra:
        raise InputError(f"model {spec!r} does not match the capture's arrays: missing {missing[:3]}, "
                         f"unexpected {extra[:3]} (is it the model the Flower app trains?)")
    for k, v in state.items():
        if tuple(v.shape) != tuple(arrays[k].shape):
            raise InputError(f"model {spec!r} does not match the capture: {k} has shape {tuple(arrays[k].shape)} "
                             f"in the capture, {tuple(v.shape)} in the model")
    module.load_state_dict({k: torch.from_numpy(np.array(arrays[k])) for k in state})


def export_bytes(module: nn.Module, image_shape: tuple[int, int, int]) -> bytes:
    """``module`` (in eval mode) as the bytes of a ``torch.export`` program on (B, C, H, W) inputs, B free."""
    import torch

    from vispriv.plugins.federated.deep.local import LocalWork

    LocalWork(batchnorm="eval").set_mode(module)
    try:
        program = torch.export.export(module, (torch.zeros(2, *image_shape),),
                                      dynamic_shapes=({0: torch.export.Dim.AUTO},))
    except Exception as exc:  # noqa: BLE001 -- torch.export raises many types on a model it cannot trace
        raise InputError(f"the model does not export with torch.export on (B, {', '.join(map(str, image_shape))}) "
                         f"inputs ({type(exc).__name__}); check image_shape") from None
    buffer = io.BytesIO()
    torch.export.save(program, buffer)
    return buffer.getvalue()
