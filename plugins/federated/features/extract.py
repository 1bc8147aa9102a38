"""Extract deep features of an image folder with a network you supply, in the feature-file layout.

    vispriv extract-features IMAGES --model net.pt2 --out features.npz
    python -m vispriv.plugins.federated.features.extract IMAGES ...     (the same, without the vispriv command)

``net.pt2`` is a ``torch.export`` program (``torch.export.save(torch.export.export(model,
(example_batch,), dynamic_shapes=...), "net.pt2")``) whose output for a batch (B, C, H, W) is
B feature vectors; images are read as RGB (grey when C = 1), scaled to [0, 1] and resized to
the program's example (H, W). ``IMAGES`` is one sub-folder per class (ids ``class/file``,
labels and class names written too) or a flat folder (ids are file names, e.g. CelebA's
``img_align_celeba/``, whose attributes then come from ``list_attr_celeba.txt``).

A model exported the plain way (``torch.export.export(model, (torch.rand(1, 3, H, W),))``)
takes batches of exactly that size: the extractor then runs at that size, with a one-line
note. Batched, with a progress bar on a terminal (one line per saved chunk in a log), and resumable (each file written whole, an OS refusal one ``error:`` line): every ``--save-every`` batches the rows done so far
go to ``<out>.partial.npz``; a rerun with the same arguments continues from there. DPHE
(ICCV 2017) section 3.2 uses such features (ResNet-152's pooled outputs) for its classifiers.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import click
import numpy as np

from vispriv.harness.errors import InputError, VisprivError, os_refusal
from vispriv.harness.writes import write_file
from vispriv.plugins.federated.deep.captured_files import DYNAMIC_HOW

SUFFIXES = {".png", ".jpg", ".jpeg", ".bmp", ".tif", ".tiff", ".webp"}


def list_folder(root: Path) -> tuple[list[Path], list[str], np.ndarray | None, list[str]]:
    """Files, ids, labels (None for a flat folder) and class names of an image folder."""
    if not root.is_dir():
        raise InputError(f"image folder {str(root)!r} is not a directory")
    classes = sorted(p.name for p in root.iterdir() if p.is_dir())
    if classes:
        files = [(c, p) for c in classes for p in sorted((root / c).iterdir()) if p.suffix.lower() in SUFFIXES]
        paths = [p for _, p in files]
        return paths, [f"{c}/{p.name}" for c, p in files], np.asarray([classes.index(c) for c, _ in files]), classes
    paths = sorted(p for p in root.iterdir() if p.is_file() and p.suffix.lower() in SUFFIXES)
    return paths, [p.name for p in paths], None, []


def read_batch(paths: list[Path], shape: tuple[int, int, int]) -> np.ndarray:
    """(B, C, H, W) float32 in [0, 1] at the model's input size."""
    from skimage.color import gray2rgb, rgb2gray, rgba2rgb
    from skimage.io import imread
    from skimage.transform import resize

    out = []
    for path in paths:
        try:
            img = np.asarray(imread(path), dtype=np.float64)
        except Exception as exc:  # noqa: BLE001 -- any decoder failure
            raise InputError(f"{path}: not a readable image ({type(exc).__name__})") from None
        img = img / 255.0 if img.max() > 1 else img
        if img.ndim == 3 and img.shape[-1] == 4:
            img = rgba2rgb(img)
        img = rgb2gray(img)[..., None] if shape[0] == 1 and img.ndim == 3 else img
        img = gray2rgb(img) if shape[0] == 3 and img.ndim == 2 else img
        img = img[..., None] if img.ndim == 2 else img
        if img.shape[:2] != shape[1:]:
            img = resize(img, shape[1:], anti_aliasing=True)
        out.append(np.transpose(img, (2, 0, 1)))
    return np.stack(out).astype(np.float32)


def extract(images: Path, model: Path, out: Path, batch_size: int = 64, save_every: int = 10,
            stop_after: int | None = None, quiet: bool = False) -> int:
    """Write ``out`` (features, ids[, labels, names]); returns the number of batches computed in this call.

    ``stop_after`` batches ends the call early with only the partial file written (an interruption).
    """
    import torch
    from tqdm import tqdm

    from vispriv.plugins.federated.deep.captured_files import load_exported

    _, module, shape, example_batch = load_exported(str(model), hint="")
    if shape is None:
        raise InputError(f"model {model}: its example input is not an image batch (B, C, H, W)")
    paths, ids, labels, names = list_folder(images)
    if not paths:
        raise InputError(f"image folder {images} holds no images with suffixes {sorted(SUFFIXES)}")
    fixed = fixed_batch(model, module, shape, min(batch_size, len(paths)), example_batch)
    if fixed is not None:
        click.echo(f"note: {model} was exported for batches of exactly {fixed} image(s): extracting {fixed} at a "
                   f"time (export it with {DYNAMIC_HOW} for batches of {batch_size})", err=True)
        batch_size = fixed
    lines = not quiet and not sys.stderr.isatty()  # a log file gets one line per saved chunk, not a redrawn bar
    partial = out.with_name(out.name + ".partial.npz")
    done: list[np.ndarray] = []
    if partial.is_file():
        with np.load(partial, allow_pickle=False) as data:
            if [str(i) for i in data["ids"]] != ids[: len(data["ids"])]:
                raise InputError(f"{partial}: its ids are not the first images of {images}; delete it to start over")
            done = [data["features"]]
    start = len(done[0]) if done else 0
    batches = 0
    bar = tqdm(total=len(paths), initial=start, desc="extract-features", unit="img", disable=quiet or lines)
    with torch.no_grad():
        for lo in range(start, len(paths), batch_size):
            batch = torch.from_numpy(read_batch(paths[lo : lo + batch_size], shape))
            done.append(run_batch(module, batch, fixed))
            batches += 1
            bar.update(len(batch))
            finished = lo + batch_size >= len(paths)
            if batches % save_every == 0 or finished or batches == stop_after:
                features = np.concatenate(done)
                rows = {"features": features, "ids": np.asarray(ids[: len(features)])}
                write_file(partial, lambda tmp, rows=rows: np.savez(tmp, **rows))
                done = [features]
                if lines:
                    click.echo(f"extract-features: {len(features)}/{len(paths)} images", err=True)
            if batches == stop_after and not finished:
                bar.close()
                return batches
    bar.close()
    extra = {"labels": labels, "names": np.asarray(names)} if labels is not None else {}
    features = np.concatenate(done)
    if not np.isfinite(features).all():
        raise InputError(f"model {model} gave NaN or infinite features (first at image {ids[int(np.argmin(np.isfinite(features).all(axis=1)))]})")
    arrays = {"features": features, "ids": np.asarray(ids), **extra}
    write_file(out, lambda tmp: np.savez(tmp, **arrays))
    partial.unlink()
    return batches


def fixed_batch(model: Path, module: Any, shape: tuple[int, ...], batch_size: int, example_batch: int | None) -> int | None:
    """The one batch size a static export takes when it refuses ``batch_size``; ``None`` when it takes ``batch_size``."""
    from vispriv.plugins.federated.deep.captured_files import accepts

    out, why = accepts(module, batch_size, shape)
    if out is not None:
        return None
    if example_batch is not None and accepts(module, example_batch, shape)[0] is not None:
        return example_batch
    raise InputError(f"model {model} does not accept a batch of {batch_size} x {shape} images (torch: {why})")


def run_batch(module: Any, batch: Any, fixed: int | None) -> np.ndarray:
    """The features of ``batch``, one row per image; a short last batch is padded to a static export's ``fixed`` size."""
    import torch

    n = len(batch)
    if fixed is not None and n < fixed:
        batch = torch.cat([batch, batch.new_zeros(fixed - n, *batch.shape[1:])])
    return module(batch)[:n].reshape(n, -1).double().numpy()


@click.command(name="extract-features")
@click.argument("images", type=click.Path(path_type=Path))
@click.option("--model", required=True, type=click.Path(path_type=Path), help="torch.export program (.pt2)")
@click.option("--out", required=True, type=click.Path(path_type=Path), help="the feature file to write (.npz)")
@click.option("--batch-size", default=64, show_default=True, type=click.IntRange(1))
@click.option("--save-every", default=10, show_default=True, type=click.IntRange(1), help="batches between partial saves")
@click.option("--quiet", is_flag=True, help="no progress bar")
def main(images: Path, model: Path, out: Path, batch_size: int, save_every: int, quiet: bool) -> None:
    """Features of every image in IMAGES from MODEL, written as a feature file (ids, labels of class folders)."""
    if out.suffix != ".npz":
        raise InputError(f"--out {out}: the feature file is an .npz")
    extract(images, model, out, batch_size, save_every, quiet=quiet)
    click.echo(f"wrote {out}")


def run() -> None:
    """The command line: a user's mistake is one ``error:`` line and exit status 2."""
    try:
        main.main(standalone_mode=False)
    except click.ClickException as exc:
        exc.show()
        sys.exit(exc.exit_code)
    except VisprivError as exc:
        click.echo(f"error: {exc}", err=True)
        sys.exit(2)
    except OSError as exc:
        click.echo(f"error: {os_refusal(exc)}", err=True)
        sys.exit(2)


if __name__ == "__main__":
    run()
