"""Reading and checking the files of a captured update, once, when the config is built.

Every file ``captured-update`` reads (model, update, images, labels) is opened, parsed and
checked against the others here, so a problem is one ``error:`` line naming the file, what
is wrong and what to do, before any run exists. :func:`read_captured` remembers what it read
(by path, size and modification time), so the cell that follows reads nothing again.
"""

from __future__ import annotations

import functools
import io
import logging
import os
import zipfile
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from vispriv.harness.errors import InputError
from vispriv.plugins.federated.deep.payloads import flatten
from vispriv.plugins.federated.npy_files import read_npy

if TYPE_CHECKING:  # torch is imported where it is used, so listing plugins stays light
    import torch

#: How to write the model file vispriv reads.
EXPORT_HOW = 'torch.export.save(torch.export.export(model, (example_batch,)), "model.pt2")'
#: How to export a model that takes batches of any size.
DYNAMIC_HOW = 'torch.export.export(model, (x,), dynamic_shapes=({0: torch.export.Dim("batch")},))'
#: DataParallel / DistributedDataParallel's prefix of every parameter name.
WRAPPER_PREFIX = "module."


#: Where a relative path of a config resolves (harness/config_paths.py), said beside "not found".
CONFIG_PATH_HINT = " (relative paths written in a config file are read from its folder, those given with --set from the shell's)"


def existing_file(path: str, what: str, hint: str = CONFIG_PATH_HINT) -> Path:
    """``path`` made absolute, checked to be a file, else one line showing the absolute path (and ``hint``)."""
    p = Path(os.path.abspath(Path(path).expanduser()))
    if not p.is_file():
        raise InputError(f"{what} file not found: {p}{hint}")
    return p


def archive_kind(data: bytes) -> str:
    """What a model file is: ``export`` (a torch.export program), ``torchscript``, ``pickle`` (torch.save) or ``other``."""
    try:
        names = zipfile.ZipFile(io.BytesIO(data)).namelist()
    except zipfile.BadZipFile:
        return "other"
    if any("/code/__torch__/" in n or n.endswith("/constants.pkl") for n in names):
        return "torchscript"
    if any(n.endswith(("/models/model.json", "serialized_exported_program.json")) for n in names):
        return "export"
    return "pickle" if any(n.endswith("/data.pkl") for n in names) else "other"


def load_exported(path: str, hint: str = CONFIG_PATH_HINT) -> tuple[bytes, torch.nn.Module, tuple[int, ...] | None, int | None]:
    """The bytes of a ``torch.export`` file, its module, its example input's (C, H, W) and batch size, or one-line
    InputError (``hint``: what "not found" adds, e.g. where a config's relative paths resolve)."""
    import torch

    p = existing_file(path, "model", hint)
    data = p.read_bytes()
    kind = archive_kind(data)
    if kind == "torchscript":
        raise InputError(
            f"model {p} is a TorchScript file (torch.jit.save); vispriv needs a torch.export program, because it "
            "re-runs the model's forward as a function of new inputs and substituted parameters (gradient matching, "
            f"the FedAvg unroll), which a scripted module cannot do: save it with {EXPORT_HOW}"
        )
    if kind == "pickle":
        raise InputError(f"model {p} is a torch.save'd object, not a torch.export program: save it with {EXPORT_HOW}")
    # torch.export logs a traceback of its own before raising on a foreign file: the one line below replaces it.
    torch_export_log = logging.getLogger("torch.export")
    level = torch_export_log.level
    torch_export_log.setLevel(logging.CRITICAL)
    try:
        program = torch.export.load(io.BytesIO(data))
        module = program.module()
    except Exception as exc:  # noqa: BLE001 -- torch raises many types on a file that is not an exported program
        raise InputError(
            f"model {p} does not load as a torch.export program ({type(exc).__name__}; truncated, or another format): "
            f"save it with {EXPORT_HOW}"
        ) from None
    finally:
        torch_export_log.setLevel(level)
    example = program.example_inputs[0] if program.example_inputs else ()
    four_d = bool(example) and getattr(example[0], "ndim", 0) == 4
    shape = tuple(example[0].shape[1:]) if four_d else None
    return data, module, shape, int(example[0].shape[0]) if four_d else None


def accepts(module: torch.nn.Module, batch: int, shape: tuple[int, ...]) -> tuple[Any, str]:
    """(output, "") when ``module`` takes a zero batch of ``batch`` x ``shape``, else (None, torch's first line)."""
    import torch

    try:
        with torch.no_grad():
            return module(torch.zeros(batch, *shape)), ""
    except Exception as exc:  # noqa: BLE001 -- a model that rejects the input
        return None, (str(exc).strip().splitlines() or [type(exc).__name__])[0]


def count_classes(path: Path, module: torch.nn.Module, batch: int, shape: tuple[int, ...],
                  example_shape: tuple[int, ...] | None, example_batch: int | None) -> int:
    """The model's number of outputs for a batch of ``batch`` x ``shape``, or one line saying why it refuses it."""
    out, why = accepts(module, batch, shape)
    if out is not None:
        return int(out.shape[-1])
    if example_batch is not None and example_batch != batch and accepts(module, example_batch, shape)[0] is not None:
        raise InputError(
            f"model {path} was exported for batches of exactly {example_batch} image(s) and batch_size is {batch} "
            f"(torch: {why}): export it with a dynamic batch, {DYNAMIC_HOW}, "
            f"or capture an update of {example_batch} image(s) and set batch_size: {example_batch}"
        )
    seen = f"; its example input is {example_batch} x {example_shape}" if example_shape is not None else ""
    raise InputError(f"model {path} does not accept a batch of {batch} x {shape} images (torch: {why}){seen}: "
                     "set image_shape: [C, H, W] to the images the model takes")


def load_update(path: str, module: torch.nn.Module) -> np.ndarray:
    """The captured update, checked name by name and shape by shape against the model."""
    import torch

    from vispriv.plugins.federated.deep.local import trainable

    p = existing_file(path, "update")
    try:
        state = torch.load(p, map_location="cpu", weights_only=True)
    except Exception as exc:  # noqa: BLE001 -- a damaged or foreign file
        raise InputError(f"update {p} does not load with torch.load ({type(exc).__name__}; truncated, or not a "
                         "torch.save'd dict): save it with torch.save({name: tensor, ...}, path)") from None
    if not isinstance(state, dict):
        raise InputError(f"update {p} must hold a dict {{parameter name: tensor}}; got {type(state).__name__}")
    params = trainable(module)
    missing = [k for k in params if k not in state]
    extra = [k for k in state if k not in params]
    if missing and extra and all(str(k).startswith(WRAPPER_PREFIX) for k in extra) \
            and {str(k).removeprefix(WRAPPER_PREFIX) for k in extra} >= set(missing):
        raise InputError(
            f"update {p}: its parameter names carry the {WRAPPER_PREFIX!r} prefix of a (Distributed)DataParallel "
            f"wrapper ({extra[0]!r}; the model's is {missing[0]!r}): strip it before saving, "
            f"{{k.removeprefix({WRAPPER_PREFIX!r}): v for k, v in update.items()}}"
        )
    if missing or extra:
        raise InputError(
            f"update {p} does not match the model's parameters: missing {missing[:3]}, unexpected {extra[:3]}; "
            "save one entry per trainable parameter, named as model.named_parameters() names it"
        )
    for k, param in params.items():
        if tuple(state[k].shape) != tuple(param.shape):
            raise InputError(f"update {p}: {k} has shape {tuple(state[k].shape)}, the model's is {tuple(param.shape)}")
    return flatten([state[k].to(torch.float32) for k in params])


@dataclass(frozen=True)
class CapturedFiles:
    """Everything a captured update's files hold, checked against each other."""

    model: bytes
    image_shape: tuple[int, int, int]
    n_classes: int
    update: np.ndarray
    images: np.ndarray  # (B, H, W, C) in [0, 1], or (0, H, W, C) without truth
    labels: np.ndarray


def _stamp(path: str) -> tuple[str, int, int]:
    """A file's identity for the read cache: absolute path, size, modification time."""
    if not path:
        return ("", 0, 0)
    p = Path(path).expanduser().absolute()
    st = p.stat() if p.is_file() else None
    return (str(p), st.st_size if st else -1, st.st_mtime_ns if st else -1)


def read_captured(model: str, update: str, images: str, labels: str, image_shape: tuple[int, int, int] | None,
                  batch_size: int, channels_of_mean: int) -> CapturedFiles:
    """Read and check every file (remembered by path, size and modification time); one line on the first problem."""
    stamps = tuple(_stamp(p) for p in (model, update, images, labels))
    return _read(stamps, model, update, images, labels, image_shape, batch_size, channels_of_mean)


@functools.lru_cache(maxsize=4)
def _read(stamps: tuple[tuple[str, int, int], ...], model: str, update: str, images: str, labels: str,
          image_shape: tuple[int, int, int] | None, batch_size: int, channels_of_mean: int) -> CapturedFiles:
    data, module, example_shape, example_batch = load_exported(model)
    vector = load_update(update, module)
    shape = image_shape or example_shape
    path = existing_file(model, "model")
    if shape is None or len(shape) != 3:
        raise InputError(f"model {path} carries no 4-d example input (B, C, H, W): set image_shape: [C, H, W]")
    c, h, w = (int(v) for v in shape)
    n_classes = count_classes(path, module, batch_size, (c, h, w), example_shape, example_batch)
    if channels_of_mean and channels_of_mean != c:
        raise InputError(f"mean and std need one value per channel ({c}) each, or neither")
    truth = np.zeros((0, h, w, c), np.float32)
    truth_labels = np.zeros(0, np.int64)
    if images:
        images_path = existing_file(images, "images")
        raw = read_npy(images_path, "images")
        if raw.shape != (batch_size, c, h, w):
            raise InputError(f"images {images_path} have shape {raw.shape}; expected {(batch_size, c, h, w)} "
                             "(B, C, H, W as PyTorch holds them, B = batch_size)")
        truth = np.asarray(raw, np.float32).transpose(0, 2, 3, 1)
    if images and labels:
        labels_path = existing_file(labels, "labels")
        truth_labels = read_npy(labels_path, "labels")
        if truth_labels.shape != (batch_size,):
            raise InputError(f"labels {labels_path} have shape {truth_labels.shape}; expected ({batch_size},)")
    elif images:
        truth_labels = np.zeros(batch_size, np.int64)
    return CapturedFiles(data, (c, h, w), n_classes, vector, truth, truth_labels)
