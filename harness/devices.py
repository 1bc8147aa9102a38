"""The matrix's ``device``: which torch device the plugins' tensor kernels run on, checked up front.

A config's top-level ``device`` (``cpu``, ``cuda`` or ``cuda:N``) becomes every cell's
``CellContext.device``; plugins that run torch kernels pass it on (the descriptor-release
attacks' point-to-subspace distances, for instance). It is checked when the config is
read, so a run that cannot use the device stops before it logs anything.
"""

from __future__ import annotations

import re

from vispriv.harness.errors import ConfigError

_DEVICE = re.compile(r"^(cpu|cuda(:\d+)?)$")


def check_device(device: str, source: str = "config") -> None:
    """Raise one-line :class:`ConfigError` unless ``device`` is ``cpu`` or a CUDA device this torch can use."""
    if not _DEVICE.match(device):
        raise ConfigError(f"{source}: device {device!r} is not one of cpu, cuda, cuda:N")
    if device == "cpu":
        return
    import torch

    if not torch.cuda.is_available():
        raise ConfigError(
            f"{source}: device {device!r} asked for, but this torch ({torch.__version__}) sees no CUDA GPU "
            "(torch.cuda.is_available() is False); use device: cpu, or install a CUDA build of torch on a GPU machine"
        )
    index = int(device.split(":")[1]) if ":" in device else 0
    if index >= torch.cuda.device_count():
        raise ConfigError(f"{source}: device {device!r}: this machine has {torch.cuda.device_count()} CUDA device(s), cuda:0 .. cuda:{torch.cuda.device_count() - 1}")
