"""Dataset ``federated-features``: the federated scenario on deep features instead of pixels.

DPHE (ICCV 2017) learns its linear classifiers on deep features (section 3.2: 2048-d
ResNet-152 outputs; section 3.3: 512-d face-network outputs for CelebA's 40 attributes).
Sources:

* ``file`` -- a feature file (:mod:`vispriv.plugins.federated.features.file`) with its labels;
* ``celeba`` -- features keyed by CelebA image id, attributes from ``list_attr_celeba.txt``
  and, when given, the split from ``list_eval_partition.txt``
  (:mod:`vispriv.plugins.federated.features.celeba`);
* ``bundled`` -- the zero-download default: features of scikit-learn's digits from a small
  network vispriv trains itself (:mod:`vispriv.plugins.federated.features.bundled`).

The files are read and checked when the config is built, so a bad file is one ``error:``
line before any run starts. A feature vector is shown (truth and leaked estimates alike) as
a 1 x D grey strip, each dimension scaled to [0, 1] by its range over the file; the users
train on the standardised features, which that affine scaling does not change.
"""

from __future__ import annotations

import functools
from pathlib import Path
from typing import Literal

import numpy as np
from pydantic import Field, model_validator

from vispriv.harness import CellContext, Dataset, FilePath, PluginConfig, Scene
from vispriv.harness.errors import ConfigError, InputError
from vispriv.plugins.federated.data import INIT, TEST, TRAIN, LabelledImages, split_users
from vispriv.plugins.federated.features.file import FeatureTable, align_to, read_features, read_labels
from vispriv.plugins.federated.payloads import FederatedData

#: The settings each source leaves unread.
IGNORED_BY_SOURCE: dict[str, frozenset[str]] = {
    "bundled": frozenset({"features", "ids", "labels", "attributes", "partition"}),
    "file": frozenset({"attributes", "partition", "bundled_labels"}),
    "celeba": frozenset({"labels", "bundled_labels"}),
}


class FederatedFeaturesConfig(PluginConfig):
    source: Literal["file", "celeba", "bundled"] = "bundled"
    features: FilePath = Field("", description="file / celeba: the .npz (features, ids[, labels, names]) or .npy file")
    ids: FilePath = Field("", description="with an .npy: a text file of image ids, one per line")
    labels: FilePath = Field("", description="file: an .npz of ids, labels ((N,) or (N, L) 0/1) and optional names")
    attributes: FilePath = Field("", description="celeba: list_attr_celeba.txt")
    partition: FilePath = Field("", description="celeba: list_eval_partition.txt (0 train, 1 validation -> init, 2 test)")
    bundled_labels: Literal["classes", "attributes"] = Field(
        "attributes", description="bundled: the 10 digit classes, or 14 binary attributes derived from them"
    )
    n_users: int = Field(5, ge=1, le=1000)
    test_fraction: float = Field(0.25, gt=0, lt=1)
    init_fraction: float = Field(0.1, gt=0, lt=1)
    standardise: bool = True
    max_per_user: int | None = Field(None, ge=1)

    def ignored_fields(self) -> frozenset[str]:
        """The settings ``source`` does not read (left out of the cell's label)."""
        return IGNORED_BY_SOURCE[self.source]

    @model_validator(mode="after")
    def _files_read(self) -> FederatedFeaturesConfig:
        if self.source != "bundled" and not self.features:
            raise ConfigError(f"source {self.source!r} needs features: the feature file")
        if self.source == "celeba" and not self.attributes:
            raise ConfigError("source 'celeba' needs attributes: the path of list_attr_celeba.txt")
        if self.source != "bundled":
            labelled(self)
        return self


def _stamp(path: str) -> tuple[str, int, int]:
    """A file's identity for the read cache: path, size, modification time."""
    if not path:
        return ("", 0, 0)
    p = Path(path).expanduser()
    st = p.stat() if p.is_file() else None
    return (str(p), st.st_size if st else -1, st.st_mtime_ns if st else -1)


def labelled(cfg: FederatedFeaturesConfig) -> LabelledImages:
    """The source's features as 1 x D strips with their labels (and the data's own split, if any)."""
    if cfg.source == "bundled":
        from vispriv.plugins.federated.features.bundled import bundled_features

        return bundled_features(cfg.bundled_labels)
    stamps = tuple(_stamp(p) for p in (cfg.features, cfg.ids, cfg.labels, cfg.attributes, cfg.partition))
    return _read(cfg.source, stamps)


@functools.lru_cache(maxsize=4)
def _read(source: str, stamps: tuple[tuple[str, int, int], ...]) -> LabelledImages:
    features, ids, labels, attributes, partition = (s[0] for s in stamps)
    table = read_features(features, ids or None)
    roles = None
    if source == "celeba":
        from vispriv.plugins.federated.features.celeba import read_attributes, read_partition

        attrs = read_attributes(attributes)
        rows = align_to(table.ids, Path(attributes), attrs.ids)
        table = FeatureTable(table.ids, table.features, attrs.values[rows], attrs.names)
        if partition:
            parts = read_partition(partition)
            missing = [(row, i) for row, i in enumerate(table.ids) if i not in parts]
            if missing:
                raise InputError(f"{partition}: no partition for image id {missing[0][1]!r} (feature row {missing[0][0]})")
            roles = np.asarray([(TRAIN, INIT, TEST)[parts[i]] for i in table.ids], np.int64)
    elif labels:
        table = read_labels(labels, table)
    if table.labels is None:
        raise InputError(f"{features}: no labels; store 'labels' in the .npz or give labels: a labels .npz")
    return as_strips(table, roles)


def as_strips(table: FeatureTable, roles: np.ndarray | None = None) -> LabelledImages:
    """Features as (N, 1, D) strips in [0, 1] (each dimension scaled by its range), labels and names."""
    lo, hi = table.features.min(axis=0), table.features.max(axis=0)
    strips = (table.features - lo) / np.where(hi > lo, hi - lo, 1.0)
    labels = np.asarray(table.labels)
    count = labels.shape[1] if labels.ndim == 2 else int(labels.max()) + 1
    names = table.names if table.names and len(table.names) == count else [str(c) for c in range(count)]
    return LabelledImages(strips[:, None, :], labels, names, roles)


class FederatedFeatures(Dataset):
    """N users' deep features with class labels or binary attributes (feature file, CelebA layout, or bundled)."""

    name = "federated-features"
    version = "1.0"
    scenario = "federated-learning"
    Config = FederatedFeaturesConfig
    produces = (FederatedData,)

    def provenance(self) -> str:
        if self.config.source == "bundled":
            from vispriv.plugins.federated.features.bundled import PROVENANCE

            return PROVENANCE[self.config.bundled_labels]
        return ""

    def load(self, ctx: CellContext) -> Scene:
        cfg: FederatedFeaturesConfig = self.config
        private, public = split_users(
            labelled(cfg),
            cfg.n_users,
            ctx.rng("federated-split"),
            test_fraction=cfg.test_fraction,
            init_fraction=cfg.init_fraction,
            standardise=cfg.standardise,
            max_per_user=cfg.max_per_user,
            schedule_seed=ctx.child_seed("federated-schedule"),
        )
        return Scene(private=private, public=public)
